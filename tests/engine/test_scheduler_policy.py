"""scheduler.policy: hand-computed iterations of each variant (kvsim/engine/scheduler_policy.py), the
registry and schema around it, and short runs that must leave the default untouched."""

from __future__ import annotations

import pytest

from kvsim.engine.group import DECODE, RUNNING, SWAPPED, WAITING, Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.scheduler_policy import (
    ORCA,
    RULES,
    SARATHI,
    VLLM_V0,
    VLLM_V0_CHUNKED,
    VLLM_V1,
    effective_chunked_prefill,
    scheduler_rules,
)
from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.kvcache.paged import PagedKVManager
from kvsim.metrics.summary import build_summary
from kvsim.registry import SCHEDULER_POLICIES, all_policies
from kvsim.scenario import build_scenario, load_scenario, scenario_dict
from kvsim.workload.request import Request

_seq = [0]


def make(rules, chunked=False, num_blocks=64, bs=16, max_tokens=64, mode="recompute", swap_blocks=0):
    kv = PagedKVManager(num_blocks, bs, swap_capacity_blocks=swap_blocks)
    lim = SchedulerLimits(8, max_tokens, chunked, mode, 0, bytes_per_block=100.0, rules=rules)
    return Scheduler(lim, kv)


def group(rid, prompt, output):
    seq = _seq[0]
    _seq[0] += 1
    return Group(req=Request(rid, 0.0, prompt, output), order=rid, seqs=[seq], output=output, prompt=prompt,
                 n=1)


def step(s: Scheduler, t: float):
    batch = s.schedule(t)
    s.kv.check_invariants()
    done = s.complete(t + 1.0)
    return batch, done


def two_decodes_then_a_long_prompt(rules, chunked=False):
    """A and B (prompt 10, output 5) prefill in iteration 0 and decode; C (prompt 63, output 2) arrives
    after iteration 1, one token short of the budget of 64 once A and B's decode tokens are charged."""
    s = make(rules, chunked)
    a, b, c = group(0, 10, 5), group(1, 10, 5), group(2, 63, 2)
    s.add(a)
    s.add(b)
    batches = [step(s, 0.0)[0], step(s, 1.0)[0]]
    s.add(c)
    t = 2.0
    while s.has_work():
        batches.append(step(s, t)[0])
        t += 1.0
    shape = [(x.prefill_tokens, x.decode_seqs, x.decode_context_tokens) for x in batches]
    return s, (a, b, c), shape


def test_vllm_v1_charges_decodes_so_the_prompt_waits_for_them_to_finish():
    s, (a, b, c), shape = two_decodes_then_a_long_prompt(VLLM_V1)
    # budget 64 - 2 decode tokens = 62 < 63: C waits until A and B finish (it4), then has all 64
    assert shape == [(20, 0, 0), (0, 2, 22), (0, 2, 24), (0, 2, 26), (0, 2, 28), (63, 0, 0), (0, 1, 64)]
    assert a.finish_s == b.finish_s == 5.0
    assert (c.first_token_s, c.finish_s) == (6.0, 7.0)
    assert s.iterations == s.it == 7


def test_vllm_v0_runs_the_prompt_alone_with_the_whole_budget_and_decodes_pause():
    s, (a, b, c), shape = two_decodes_then_a_long_prompt(VLLM_V0)
    # it2 is prefill-only (63 <= 64, decodes not run); it3 decodes A, B (context 12 each) and C (64)
    assert shape == [(20, 0, 0), (0, 2, 22), (63, 0, 0), (0, 3, 88), (0, 2, 26), (0, 2, 28)]
    # A and B lose the two prefill-only iterations: 1 + 4 tokens by the end of the 6th iteration
    assert a.finish_s == b.finish_s == 6.0
    assert (c.first_token_s, c.finish_s) == (3.0, 4.0)
    assert (s.iterations, s.it) == (6, 4)  # the decode clock stood still through two iterations


def test_orca_batches_the_whole_prompt_with_the_decodes_uncharged():
    s, (a, b, c), shape = two_decodes_then_a_long_prompt(ORCA)
    assert shape == [(20, 0, 0), (0, 2, 22), (63, 2, 24), (0, 3, 90), (0, 2, 28)]
    assert a.finish_s == 5.0 and (c.first_token_s, c.finish_s) == (3.0, 4.0)


def test_sarathi_chunks_the_prompt_into_what_the_decodes_leave():
    s, (a, b, c), shape = two_decodes_then_a_long_prompt(SARATHI, chunked=True)
    # 62 tokens beside the two decodes, the last one the next iteration
    assert shape == [(20, 0, 0), (0, 2, 22), (62, 2, 24), (1, 2, 26), (0, 3, 92)]
    assert a.finish_s == 5.0 and (c.first_token_s, c.finish_s) == (4.0, 5.0)


def swap_then_arrival(rules, chunked=False):
    """6 blocks of 4 tokens, swap preemption: A and B (prompt 8, output 10) fill the pool at context 12;
    C (prompt 4, output 2) arrives just before the decode at context 13, where A's growth swaps B out."""
    s = make(rules, chunked, num_blocks=6, bs=4, mode="swap", swap_blocks=16)
    a, b, c = group(0, 8, 10), group(1, 8, 10), group(2, 4, 2)
    s.add(a)
    s.add(b)
    t = 0.0
    while not (a.phase == DECODE and a.base + s.it == 13):
        step(s, t)
        t += 1.0
    s.add(c)
    step(s, t)
    assert b.state == SWAPPED and s.kv.num_free_blocks == (2 if c.state == WAITING else 1)
    return s, c, t + 1.0


def test_admission_after_a_preemption_follows_the_policy():
    _, c, _ = swap_then_arrival(VLLM_V1)
    assert c.state == WAITING  # V1: no admission in an iteration that preempted
    _, c, _ = swap_then_arrival(SARATHI, chunked=True)
    assert c.state == RUNNING and c.generated == 1  # Sarathi-Serve admits it in that iteration


def test_vllm_v0_admits_no_prompt_while_a_group_is_swapped_out():
    s, c, t = swap_then_arrival(VLLM_V1)
    step(s, t)
    assert c.state == RUNNING  # V1: the next iteration admits C (1 block of the 2 free)
    s, c, t = swap_then_arrival(VLLM_V0)
    for k in range(3):
        step(s, t + k)
        assert s.swapped and c.state == WAITING  # V0: swapped groups first; B needs 4 blocks back


def test_rules_table_and_registry_list_the_same_names():
    assert list(RULES) == list(SCHEDULER_POLICIES)
    assert [k for k, *_ in all_policies()].count("scheduler.policy") == len(SCHEDULER_POLICIES)
    assert scheduler_rules("vllm_v0", False) is VLLM_V0
    assert scheduler_rules("vllm_v0", True) is VLLM_V0_CHUNKED
    assert scheduler_rules("vllm_v1", False) is VLLM_V1
    assert effective_chunked_prefill("sarathi", False) is True
    assert effective_chunked_prefill("orca", True) is False
    assert effective_chunked_prefill("vllm_v0", False) is False
    with pytest.raises(ValueError):
        scheduler_rules("fcfs", True)


def test_scenario_key_default_omitted_and_bad_name_one_line():
    sc = build_scenario({})
    assert sc.scheduler.policy == "vllm_v1"
    assert "policy" not in scenario_dict(sc)["scheduler"]
    sc = build_scenario({"scheduler": {"policy": "orca"}})
    assert scenario_dict(sc)["scheduler"]["policy"] == "orca"
    with pytest.raises(KvsimError) as e:
        load_scenario(None, ["scheduler.policy=vllm_v2"])
    msg = str(e.value)
    assert "scheduler.policy" in msg and "'vllm_v0'" in msg and "\n" not in msg


def test_vllm_v0_without_chunking_refuses_token_sparsity():
    with pytest.raises(KvsimError, match="scheduler.policy: vllm_v0"):
        load_scenario(None, ["scheduler.policy=vllm_v0", "scheduler.chunked_prefill=false",
                             "kv.sparsity.policy=streaming"])


def run(overrides):
    sc = load_scenario(None, ["workload.kind=synthetic", "simulation.requests=60", "kv.check_invariants=true",
                              "kv.num_gpu_blocks_override=300", "workload.arrival.rate=40", *overrides])
    res = Simulation(sc).run()
    return res, build_summary(res.requests, res.timeline, res.meta)


def test_default_policy_is_vllm_v1_and_every_policy_runs():
    base, s_base = run(["scheduler.chunked_prefill=false"])
    named, s_named = run(["scheduler.chunked_prefill=false", "scheduler.policy=vllm_v1"])
    assert base.requests.equals(named.requests) and base.timeline.equals(named.timeline)
    assert s_base == s_named
    for policy in ("vllm_v0", "sarathi", "orca"):
        for chunked in ("true", "false"):
            res, s = run([f"scheduler.policy={policy}", f"scheduler.chunked_prefill={chunked}"])
            assert s["requests"]["completed"] == 60, (policy, chunked)
            assert res.meta["scenario"]["scheduler"]["policy"] == policy
            tl = res.timeline[res.timeline["iteration"] >= 0]
            assert list(tl["iteration"]) == list(range(len(tl)))  # every iteration numbered, paused ones too
            if policy == "vllm_v0" and chunked == "false":
                assert not ((tl["prefill_seqs"] > 0) & (tl["decode_seqs"] > 0)).any()
                assert (tl["prefill_seqs"] > 0).any() and (tl["decode_seqs"] > 0).any()
            if policy == "sarathi":
                assert tl["prefill_tokens"].max() <= 8192 and ((tl["prefill_seqs"] > 0)
                                                               & (tl["decode_seqs"] > 0)).any()


def test_vllm_v0_prefill_only_iteration_holds_no_decode_token():
    """In the prefill-only iteration it2 A and B decode nothing: they hold 11 tokens each (10 prompt + the
    first output token's KV written by it1), not the 12 the decode clock gives (was 87, found by the
    random-configuration stress check)."""
    s = make(VLLM_V0)
    a, b, c = group(0, 10, 5), group(1, 10, 5), group(2, 63, 2)
    s.add(a)
    s.add(b)
    step(s, 0.0)
    step(s, 1.0)
    s.add(c)
    batch = s.schedule(2.0)
    assert (batch.prefill_tokens, batch.decode_seqs) == (63, 0)
    assert s.token_states() == 11 + 11 + 63
    s.complete(3.0)
    batch = s.schedule(3.0)  # it3 decodes A and B (the 12th token each) and C
    assert batch.decode_seqs == 3 and s.token_states() == 12 + 12 + 64


def test_vllm_v0_parallel_samples_copy_their_shared_last_block_at_their_first_decode():
    """n = 2, prompt 15 in one 16-token block, prefilled in a prefill-only iteration: the first decode
    writes token 16 into each sample's copy of the shared block, so the copy is made in that iteration
    (it came one iteration late: 17 token states in one block, an invariant failure in check mode)."""
    s = make(VLLM_V0)
    g = Group(req=Request(0, 0.0, 15, 4, n=2), order=0, seqs=[100, 101], output=4, prompt=15, n=2)
    s.add(g)
    step(s, 0.0)
    batch = s.schedule(1.0)
    assert batch.decode_seqs == 2
    s.kv.check_invariants()
    assert s.kv.used_blocks == 2 and s.token_states() == 16 + 16
