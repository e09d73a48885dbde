"""The per-policy rules of the one Scheduler (`scheduler.policy`, names in kvsim/registry.py
SCHEDULER_POLICIES): a frozen set of flags the scheduler copies into plain attributes once, so its
iteration loop never looks a policy up. docs/engine.md "Scheduler policies" gives each rule against the
engine source it follows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class SchedulerRules:
    """How one scheduler variant builds an iteration.

    decodes_use_budget: running decode tokens are taken from max_num_batched_tokens before any prefill
    (vLLM V1, Sarathi-Serve); False: prefills get the whole budget (Orca, vLLM V0's prefill iterations).
    mix: prefills and decodes may share an iteration; False (vLLM V0 without chunked prefill): an
    iteration that admits a prefill runs prefills only, and decodes run only when no prefill was admitted.
    chunked_prefill: forced on (True) or off (False); None follows `scheduler.chunked_prefill`.
    admit_after_preemption: waiting requests are admitted in an iteration that preempted (vLLM V0's
    chunked scheduler, Sarathi-Serve); False as vLLM V1 (`if not preempted_reqs`).
    admit_while_swapped: new prefills are admitted while a group is swapped out; False as vLLM V0's
    default scheduler ("If any requests are swapped, prioritized swapped requests").
    """

    name: str
    decodes_use_budget: bool = True
    mix: bool = True
    chunked_prefill: bool | None = None
    admit_after_preemption: bool = False
    admit_while_swapped: bool = True


VLLM_V1 = SchedulerRules("vllm_v1")
VLLM_V0 = SchedulerRules("vllm_v0", decodes_use_budget=False, mix=False, admit_while_swapped=False)
VLLM_V0_CHUNKED = SchedulerRules("vllm_v0", admit_after_preemption=True)
"""vLLM V0 with chunked prefill on (`_schedule_chunked_prefill`): decodes first, one shared budget."""
SARATHI = SchedulerRules("sarathi", chunked_prefill=True, admit_after_preemption=True)
ORCA = SchedulerRules("orca", decodes_use_budget=False, chunked_prefill=False)

RULES: dict[str, SchedulerRules] = {r.name: r for r in (VLLM_V1, VLLM_V0, SARATHI, ORCA)}
"""The rules of each kvsim/registry.py SCHEDULER_POLICIES name (tests check the two lists match)."""


def scheduler_rules(policy: str, chunked_prefill: bool) -> SchedulerRules:
    """The rules of `policy` given `scheduler.chunked_prefill` (vLLM V0 has one scheduler for each)."""
    rules = RULES.get(policy)
    if rules is None:
        raise ValueError(f"unknown scheduler policy {policy!r}; known: {', '.join(RULES)}")
    if rules is VLLM_V0 and chunked_prefill:
        return VLLM_V0_CHUNKED
    return rules


def effective_chunked_prefill(policy: str, chunked_prefill: bool) -> bool:
    """Whether prefills are chunked under `policy` (forced by sarathi and orca)."""
    forced = scheduler_rules(policy, chunked_prefill).chunked_prefill
    return chunked_prefill if forced is None else forced
