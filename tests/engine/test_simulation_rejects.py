"""Requests the engine refuses: the bound is prompt + output - 1 slots, and a refused turn does not end
its session."""

from __future__ import annotations

from kvsim.engine.simulation import Simulation
from kvsim.scenario import load_scenario


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
