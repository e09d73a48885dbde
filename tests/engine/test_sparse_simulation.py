"""End to end: every policy and reclaim mode under memory pressure, with the runtime invariant checks on."""

from __future__ import annotations

import pytest

from kvsim.engine.scheduler import Scheduler
from kvsim.engine.simulation import Simulation
from kvsim.engine.sparse_sizing import SparseSizing
from kvsim.errors import KvsimError
from kvsim.metrics.summary import build_summary, summary_table_rows
from kvsim.scenario import load_scenario

BASE = [
    "model=llama-3.1-8b", "kv.num_gpu_blocks_override=400", "kv.check_invariants=true",
    "workload.kind=chat", "workload.arrival.rate=200", "workload.chat.turns={dist: fixed, value: 2}",
    "workload.chat.system_prompt_len={dist: fixed, value: 600}", "workload.chat.think_time_s=0.5",
    "workload.output_len={dist: lognormal, mean: 120, p50: 80}",
    "workload.rereads={mean: 1.5, skip_first: 0}", "simulation.requests=50", "kv.sparsity.budget_tokens=256",
]


def simulate(*overrides):
    sc = load_scenario(None, [*BASE, *overrides])
    sim = Simulation(sc)
    result = sim.run()
    return sim, result, build_summary(result.requests, result.timeline, result.meta)


@pytest.mark.parametrize("policy", ["streaming", "h2o", "snapkv", "scissorhands", "pyramidkv", "infinigen"])
@pytest.mark.parametrize("reclaim,mode", [("compact", "recompute"), ("block", "swap")])
def test_policies_run_clean(policy, reclaim, mode):
    sim, result, summary = simulate(f"kv.sparsity.policy={policy}", f"kv.sparsity.reclaim={reclaim}",
                                    f"scheduler.preemption_mode={mode}")
    assert isinstance(sim.replicas[0].sched.sizing, SparseSizing)
    sp = summary["sparsity"]
    assert summary["requests"]["completed"] == 50
    assert 0 < sp["retained_fraction"] < 1 and 0 < sp["attention_mass_retained"] < 1
    assert sp["kv_blocks_held_mean"] < sp["kv_blocks_full_mean"]
    assert sp["rereads"] > 0
    if policy == "infinigen":
        assert sp["reread_lost_tokens"] == 0 and sp["recall_bytes"] > 0 and sp["stall_s"] > 0
    else:
        assert sp["reread_lost_tokens"] > 0 and sp["recall_bytes"] == 0
    # streaming: the sinks' block; pyramidkv compact: one table per sequence holds the widest group's
    # slots, which the smaller groups leave partly empty
    assert (sp["hole_fraction_mean"] > 0) == (reclaim == "block" or policy == "pyramidkv")
    df = result.requests
    steps, decodes = df["sparsity_decode_steps"], (df["output_len"] - 1).clip(lower=0)
    assert (steps <= decodes).all()  # a recompute's prefill makes one token without a decode step
    assert (steps[df["preemptions"] == 0] == decodes[df["preemptions"] == 0]).all()
    rows = dict(summary_table_rows(summary))
    assert rows["sparsity policy / budget / reclaim"] == f"{policy} / 256 tokens / {reclaim}"


def test_memory_pressure_preempts_and_recovers():
    _, _, none = simulate("kv.sparsity.policy=none")
    _, _, h2o = simulate("kv.sparsity.policy=h2o")
    assert none["preemptions"] > 0 and "sparsity" not in none
    assert h2o["preemptions"] < none["preemptions"]
    assert h2o["sparsity"]["concurrency_gain"] > 1.5


def test_policy_none_uses_the_base_scheduler():
    sim, _, _ = simulate("kv.sparsity.policy=none", "simulation.requests=5")
    assert type(sim.replicas[0].sched) is Scheduler


def test_runs_are_deterministic():
    a = simulate("kv.sparsity.policy=infinigen", "simulation.requests=30")
    b = simulate("kv.sparsity.policy=infinigen", "simulation.requests=30")
    assert a[2]["sparsity"] == b[2]["sparsity"] and a[2]["latency"] == b[2]["latency"]


def test_unsupported_combinations_are_one_line_errors():
    with pytest.raises(KvsimError, match="needs kv.layout: paged"):
        load_scenario(None, ["kv.sparsity.policy=h2o", "kv.layout=contiguous:max"])
    with pytest.raises(KvsimError, match="parallel sampling"):
        load_scenario(None, ["kv.sparsity.policy=h2o", "workload.n=2"])
    with pytest.raises(KvsimError, match="kv.sparsity.policy"):
        load_scenario(None, ["kv.sparsity.policy=bogus"])


@pytest.mark.parametrize("reclaim", ["compact", "block"])
def test_with_a_prefix_cache_under_pressure(reclaim):
    """Prompt blocks shared through the cache cannot be compacted in place; the run stays consistent."""
    sim, _, summary = simulate("kv.sparsity.policy=h2o", f"kv.sparsity.reclaim={reclaim}",
                               "kv.prefix_cache=hash", "kv.num_gpu_blocks_override=250",
                               "workload.chat.system_prompts=1")
    assert summary["requests"]["completed"] == 50 and summary["prefix_cache"]["hit_rate_tokens"] > 0
    assert summary["sparsity"]["kv_blocks_held_mean"] < summary["sparsity"]["kv_blocks_full_mean"]


def test_shared_tables_and_per_head_selection_hold_more_than_their_idealisations():
    """PyramidKV with one block table per sequence holds more blocks than per-layer tables; per-head
    selection in block mode pins more blocks than one shared token set (llama-3.1-8b: 8 KV heads)."""
    block, per_head = "kv.sparsity.reclaim=block", "kv.sparsity.selection=per_head"
    held = {}
    for extra in (["kv.sparsity.block_tables=per_layer"], [], [block], [block, per_head]):
        _, _, summary = simulate("kv.sparsity.policy=pyramidkv", "simulation.requests=20", *extra)
        held[" ".join(extra)] = summary["sparsity"]["kv_blocks_held_mean"] / summary["concurrency"]["mean"]
        assert summary["requests"]["completed"] == 20
    assert held["kv.sparsity.block_tables=per_layer"] < held[""]
    assert held[block] < held[f"{block} {per_head}"]


def test_infinigen_reports_prefetch_and_transfer_bound_iterations():
    _, result, summary = simulate("kv.sparsity.policy=infinigen", "simulation.requests=20",
                                  "kv.sparsity.host_pool_bytes=2e8")
    sp = summary["sparsity"]
    assert sp["prefetch"] and 0 < sp["prefetch_bytes"] <= sp["recall_bytes"]
    assert sp["host_pool_bytes"] == 2e8 and sp["host_bytes_max"] <= 2e8 + 1 and sp["host_evicted_bytes"] > 0
    assert sp["stall_iterations"] >= 0 and sp["stall_iteration_fraction"] is not None
    tl = result.timeline
    assert tl["recall_bytes"].sum() == pytest.approx(sp["recall_bytes"])
    assert tl["prefetch_bytes"].sum() == pytest.approx(sp["prefetch_bytes"])
    assert sp["stall_iterations"] == tl["transfer_bound"].sum()
    assert sp["stall_exposed_s"] == pytest.approx(tl["prefetch_exposed_s"].sum())
    assert sp["stall_exposed_s"] > 0
    # the exposed prefetch is part of each iteration's duration, at least its first layer's fetch
    pre = tl[tl["prefetch_bytes"] > 0]
    assert (pre["prefetch_exposed_s"] < pre["dt_s"]).all()
    first_layer = pre["prefetch_bytes"] / result.meta["sparsity"]["host_bandwidth"] / 32  # 32 layers
    assert (pre["prefetch_exposed_s"] >= first_layer * (1 - 1e-9)).all()


def test_bad_sparsity_keys_are_one_line_errors():
    for bad, key in (("kv.sparsity.block_tables=both", "block_tables"),
                     ("kv.sparsity.selection=heads", "selection"),
                     ("kv.sparsity.pool_kernel=0", "pool_kernel"),
                     ("kv.sparsity.host_pool_bytes=-1", "host_pool_bytes"),
                     ("kv.sparsity.prefetch_layers=0", "prefetch_layers")):
        with pytest.raises(KvsimError, match=f"kv.sparsity.{key}") as e:
            load_scenario(None, ["kv.sparsity.policy=h2o", bad])
        assert "\n" not in str(e.value)


def test_prefetch_layers_beyond_the_model_is_a_one_line_error():
    with pytest.raises(KvsimError, match="kv.sparsity.prefetch_layers must be at most the model's 32 ") as e:
        simulate("kv.sparsity.policy=infinigen", "kv.sparsity.prefetch_layers=33")
    assert "\n" not in str(e.value)
