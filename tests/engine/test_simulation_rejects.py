"""Requests the engine refuses: the bound is prompt + output - 1 slots (and, for a group that can be swapped
out, the pool above the watermark), and a refused turn does not end its session. Settings that need the
model and pool size to check fail when the Simulation is built (what `kvsim validate` does)."""

from __future__ import annotations

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.scenario import Scenario, load_scenario


def sim(*overrides: str) -> Simulation:
    return Simulation(load_scenario(None, list(overrides)))


def test_a_request_fitting_exactly_is_admitted():
    # 2 blocks of 16 hold 32 slots; prompt 16 + output 17 needs 16 + 16 = 32 slots
    # (the last token's KV is never written)
    pool = ("kv.num_gpu_blocks_override=2", "kv.block_size=16", "simulation.requests=1",
            "workload.prompt_len={dist: fixed, value: 16}")
    r = sim(*pool, "workload.output_len={dist: fixed, value: 17}").run().requests
    assert int(r["rejected"].iloc[0]) == 0 and r["finish_s"].notna().all()
    s = sim(*pool, "workload.output_len={dist: fixed, value: 18}")
    assert int(s.run().requests["rejected"].iloc[0]) == 1


def test_follow_ups_of_a_rejected_request_still_arrive():
    # closed loop: each user's next request follows the previous one, refused or not
    s = sim("workload.arrival={process: closed_loop, users: 2, think_time_s: 1.0}",
            "workload.prompt_len={dist: uniform, low: 10, high: 400}", "scheduler.max_model_len=200",
            "simulation.requests=30")
    r = s.run().requests
    assert len(r) == 30
    assert 0 < int(r["rejected"].sum()) < 30


def test_without_chunked_prefill_the_budget_covers_max_model_len():
    # a recompute-preempted request re-prefills prompt + generated tokens in one iteration
    s = sim("kv.num_gpu_blocks_override=20", "kv.block_size=16", "kv.swap_space_gb=0",
            "workload.prompt_len={dist: fixed, value: 120}", "workload.output_len={dist: fixed, value: 200}",
            "scheduler.max_num_batched_tokens=128", "scheduler.max_num_seqs=64",
            "scheduler.chunked_prefill=false",
            "scheduler.max_model_len=512", "simulation.requests=6")
    r = s.run().requests
    assert (r["rejected"] == 0).all() and r["finish_s"].notna().all()
    assert int(r["preemptions"].sum()) > 0


def error_of(*overrides: str) -> str:
    with pytest.raises(KvsimError) as info:
        sim(*overrides)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_group_that_could_not_swap_back_past_the_watermark_is_refused():
    # 10 blocks, watermark 0.5 keeps 5 free when swapping in: a swapped group of b blocks returns only when
    # b + 1 <= 10 - 5. Prompt 16 + output 64 needs 16 + 63 = 79 slots = 5 blocks: refused; output 48
    # needs 63 slots = 4 blocks: admitted.
    pool = ("kv.num_gpu_blocks_override=10", "kv.block_size=16", "kv.watermark=0.5", "simulation.requests=1",
            "scheduler.preemption_mode=swap", "workload.prompt_len={dist: fixed, value: 16}")
    refused = sim(*pool, "workload.output_len={dist: fixed, value: 64}")
    assert refused.reject_reason(refused.build_requests()[0]) == \
        "request needs more KV blocks than the pool has above the watermark"
    assert int(refused.run().requests["rejected"].iloc[0]) == 1
    ok = sim(*pool, "workload.output_len={dist: fixed, value: 48}")
    assert int(ok.run().requests["rejected"].iloc[0]) == 0
    # recompute never swaps a single sequence: the watermark does not refuse it
    recompute = sim(*pool, "workload.output_len={dist: fixed, value: 64}",
                    "scheduler.preemption_mode=recompute")
    assert int(recompute.run().requests["rejected"].iloc[0]) == 0


def test_watermark_on_a_tiny_pool_does_not_stall():
    # once stalled with "internal error: the scheduler stalled": two-sample groups swap even in
    # recompute mode, and a group needing more than the pool above the watermark never came back
    r = sim("kv.num_gpu_blocks_override=16", "kv.watermark=0.7", "scheduler.max_num_seqs=4", "workload.n=2",
            "workload.prompt_len={dist: uniform, low: 1, high: 32}", "workload.arrival.rate=100",
            "workload.output_len={dist: uniform, low: 1, high: 150}", "simulation.requests=30").run().requests
    assert len(r) == 30 and r["rejected"].sum() > 0 and r.loc[r["rejected"] == 0, "finish_s"].notna().all()


# sliding (window 32) + full layers: a 16-token block is a page in each group
SLIDING_FULL = ('model={"name": "tiny-sliding", "num_layers": 2, "hidden_size": 512, '
                '"num_attention_heads": 8, "num_kv_heads": 2, "num_params": 2.0e8, "sliding_window": 32, '
                '"layer_types": ["sliding", "full"]}')


def test_a_single_sequence_whose_recompute_could_never_fit_is_refused():
    # a recompute-preempted request prefills prompt + generated tokens again, without chunked prefill in
    # one chunk, which the sliding group holds whole until its next growth. Prompt 16 + output 82: decoding
    # it holds at most 97 tokens, 7 full pages + 3 sliding (10 of 12); the prefill of 97 takes 7 + 7 = 14.
    # Once admitted (the bound was the decode-time 10), a late preemption left it waiting for ever:
    # "the scheduler stalled" (stress seed 604).
    pool = (SLIDING_FULL, "kv.block_size=16", "kv.num_gpu_blocks_override=12", "simulation.requests=1",
            "workload.prompt_len={dist: fixed, value: 16}")
    for policy in ("scheduler.policy=orca", "scheduler.chunked_prefill=false"):
        refused = sim(*pool, policy, "workload.output_len={dist: fixed, value: 82}")
        assert refused.reject_reason(refused.build_requests()[0]) == \
            "request needs more KV blocks than the pool has"
        ok = sim(*pool, policy, "workload.output_len={dist: fixed, value: 81}")  # 96 tokens: 6 + 6 pages
        assert ok.reject_reason(ok.build_requests()[0]) is None
    # in chunks of 32 the prefill holds a chunk and the window before it in the sliding group: it fits
    chunked = sim(*pool, "scheduler.max_num_batched_tokens=32", "scheduler.max_num_seqs=4",
                  "workload.output_len={dist: fixed, value: 82}")
    assert chunked.reject_reason(chunked.build_requests()[0]) is None


def test_recompute_on_a_sliding_model_without_chunked_prefill_does_not_stall():
    # a reproduction of stress seed 604's stall: the recomputed requests that could never fit are refused
    r = sim(SLIDING_FULL, "kv.block_size=16", "kv.num_gpu_blocks_override=12", "kv.check_invariants=true",
            "scheduler.policy=orca", "workload.prompt_len={dist: uniform, low: 1, high: 64}",
            "workload.output_len={dist: uniform, low: 1, high: 150}",
            "workload.arrival={process: poisson, rate: 50}", "simulation.requests=5",
            "simulation.seed=25").run().requests
    assert int(r["rejected"].sum()) == 3 and int(r["preemptions"].sum()) >= 1
    assert r.loc[r["rejected"] == 0, "finish_s"].notna().all()


def test_a_multi_sequence_group_on_a_model_of_two_groups_keeps_a_block_per_group_above_the_watermark():
    # n = 2 (always swappable): prompt 16 + output 33 holds 48 tokens, 3 full + 2 sliding pages a sample:
    # 10 pages, and its swap-in needs a page per group for each sample's next block: 14. A pool of 13 once
    # took it (one page per sample: 12), and its swap-in then ran a sample past its pages.
    pool = (SLIDING_FULL, "kv.block_size=16", "simulation.requests=1", "workload.n=2",
            "workload.prompt_len={dist: fixed, value: 16}", "workload.output_len={dist: fixed, value: 33}")
    refused = sim(*pool, "kv.num_gpu_blocks_override=13")
    assert refused.reject_reason(refused.build_requests()[0]) == \
        "request needs more KV blocks than the pool has above the watermark"
    ok = sim(*pool, "kv.num_gpu_blocks_override=14")
    assert ok.reject_reason(ok.build_requests()[0]) is None


def test_contiguous_max_larger_than_the_pool_fails_at_construction():
    # what `kvsim validate` builds: the error comes before any request is simulated
    assert error_of("kv.layout=contiguous:max", "kv.num_gpu_blocks_override=10") == (
        "kv.layout: contiguous:max reserves max_model_len (8192) slots per sequence, more than the KV "
        "capacity (160 slots)")


def test_pool_size_is_bounded():
    assert error_of("kv.num_gpu_blocks_override=200000000", "parallelism.replicas=10") == (
        "kv: 10 replica(s) with 2,000,000,000 KV blocks in all exceed the simulator's bound of "
        "1,073,741,824 blocks (the ids it can address here); raise kv.block_size, or lower "
        "kv.num_gpu_blocks_override or parallelism.replicas")
    with pytest.raises(KvsimError, match="num_gpu_blocks_override: Input should be less than or equal to "
                                         "1073741824"):
        sim("kv.num_gpu_blocks_override=2000000000")


def test_no_block_fits():
    base = sim()
    reserve = base.capacity.activation_reserve_bytes + base.capacity.usable_bytes - 1000  # 1000 bytes left
    msg = error_of(f"kv.activation_reserve_gib={reserve / 2**30!r}")
    assert msg.startswith("kv.block_size: not one block of 16 tokens fits in the KV memory of ")


def test_a_scenario_built_without_load_scenario_gets_the_same_cross_checks():
    sc = Scenario.model_validate({"workload": {"n": 300}})
    with pytest.raises(KvsimError, match=r"^workload\.n: 300 sequences per request exceed"):
        Simulation(sc)
