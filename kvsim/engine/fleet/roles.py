"""Replica roles: what a replica of each role does differently (`cluster.pools[].role`).

A role is one class here and one entry in ROLES (kvsim/registry.py lists the names and summaries from it;
the schema's `role` values come from there). It says which router sends it requests, what it does after a
prefill, what KV a sequence holds there at most (admission's refusal test), and what the fleet report
shows of it (`report`, passed to kvsim/metrics/fleet.py in meta['fleet']['roles']). Imports nothing of
kvsim: the registry, below the schema, reads it.
"""

from __future__ import annotations

from typing import ClassVar


class Role:
    """A replica role. Class attributes:

    - `front`: the fleet's first router sends it requests (else the decode router, after a prefill);
    - `sends_kv`: a finished prefill leaves the batch with its KV held until a decode replica has it;
    - `receives_kv`: it admits requests whose prompt KV comes from a prefill replica;
    - `holds_output_kv`: a sequence's output KV stays here (a prefill replica holds the prompt's only,
      until the transfer): admission's refusal test counts prompt + output - 1 tokens, else the prompt;
    - `report`: what the fleet section shows of its replicas: `hit_rate` (whether its prefix-cache hits
      are its own), and `queue` (None, or the request columns (start, end) of the wait its role's
      queue figure measures, with `queue_of`: `served` (every request it served) or `handed` (the
      handed-off ones))."""

    name: ClassVar[str]
    summary: ClassVar[str]
    front: ClassVar[bool] = True
    sends_kv: ClassVar[bool] = False
    receives_kv: ClassVar[bool] = False
    holds_output_kv: ClassVar[bool] = True
    report: ClassVar[dict] = {"hit_rate": True, "queue": None, "queue_of": None}

    def max_held_tokens(self, prompt: int, output: int) -> int:
        """The most KV tokens one sequence of a request holds here (its last token's KV is never
        written)."""
        return prompt + max(output - 1, 0) if self.holds_output_kv else prompt


class Mixed(Role):
    name = "mixed"
    summary = "prefill and decode on the same replica (colocated)"


class Prefill(Role):
    name = "prefill"
    summary = "prefill only; the KV moves to a decode replica after (disaggregated P/D)"
    sends_kv = True
    holds_output_kv = False
    report = {"hit_rate": True, "queue": ("arrival_s", "first_scheduled_s"), "queue_of": "served"}


class Decode(Role):
    name = "decode"
    summary = "decode only; admits a request once its KV has arrived from a prefill replica"
    front = False
    receives_kv = True
    # decode replicas prefill nothing: their requests' cache hits happened on the prefill side
    report = {"hit_rate": False, "queue": ("prefill_done_s", "decode_admit_s"), "queue_of": "handed"}


ROLES: dict[str, Role] = {cls.name: cls() for cls in (Mixed, Prefill, Decode)}
"""Role name -> the role (one instance each: roles hold no state)."""


def role_report() -> dict[str, dict]:
    """meta['fleet']['roles']: per role, whether the first router routes to it and what the fleet
    report shows of it (Role.report)."""
    return {name: {"front": r.front, **r.report} for name, r in ROLES.items()}
