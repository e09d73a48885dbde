"""The example scenarios of issue 3 (workloads/rag.yaml, agentic.yaml, mooncake_*.yaml) load, and run
briefly; the Mooncake ones only where ../shared/traces is present."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.metrics.summary import build_summary
from kvsim.scenario import load_scenario

WORKLOADS = Path(__file__).parents[1] / "workloads"
SHARED = Path(__file__).parents[2] / "shared" / "traces" / "mooncake"


@pytest.mark.parametrize("name, cache", [("rag", "hash"), ("agentic", "radix")])
def test_synthetic_examples_run_with_hits(name, cache):
    overrides = ["simulation.requests=150", "kv.check_invariants=true", "kv.num_gpu_blocks_override=2500"]
    sc = load_scenario(WORKLOADS / f"{name}.yaml", overrides)
    assert sc.kv.prefix_cache == cache
    res = Simulation(sc).run()
    s = build_summary(res.requests, res.timeline, res.meta)
    assert s["requests"]["completed"] == 150
    assert s["prefix_cache"]["hit_rate_tokens"] > 0.1


@pytest.mark.parametrize("name", ["mooncake_conversation", "mooncake_synthetic", "mooncake_tiers"])
def test_mooncake_examples(name):
    sc = load_scenario(WORKLOADS / f"{name}.yaml")
    assert sc.workload.trace.format == "mooncake" and sc.kv.prefix_cache == "hash"
    if not SHARED.is_dir():
        pytest.skip("Mooncake traces not present (../shared/traces)")
    sc = load_scenario(WORKLOADS / f"{name}.yaml", ["simulation.requests=40", "workload.trace.limit=40"])
    res = Simulation(sc).run()
    assert build_summary(res.requests, res.timeline, res.meta)["requests"]["total"] == 40


def test_long_context_example_holds_more_with_the_sliding_rule():
    """workloads/long_context.yaml (Mistral-7B): the hybrid manager holds far fewer pages per request than
    allocating the sliding layers as full attention, at the same decode cost per token."""
    base = ["simulation.requests=40"]
    runs = {}
    for hybrid in (True, False):
        sc = load_scenario(WORKLOADS / "long_context.yaml",
                           [*base, f"kv.disable_hybrid_kv_cache_manager={str(not hybrid).lower()}"])
        assert sc.model == "mistral-7b"
        res = Simulation(sc).run()
        runs[hybrid] = (res, build_summary(res.requests, res.timeline, res.meta))
    (_, with_rule), (_, without) = runs[True], runs[False]
    assert with_rule["requests"]["completed"] == without["requests"]["completed"] == 40
    assert with_rule["kv"]["used_blocks_mean"] < 0.5 * without["kv"]["used_blocks_mean"]


def test_fleet_examples_run():
    """workloads/fleet_chat.yaml (8 replicas, prefix_aware) and fleet_pd.yaml (2P2D) run briefly; the
    Mooncake fleet loads (and runs where the traces are present)."""
    for name, replicas in (("fleet_chat", 8), ("fleet_pd", 4)):
        sc = load_scenario(WORKLOADS / f"{name}.yaml", ["simulation.requests=80", "kv.check_invariants=true"])
        res = Simulation(sc).run()
        s = build_summary(res.requests, res.timeline, res.meta)
        assert s["requests"]["completed"] == 80
        assert len(s["fleet"]["per_replica"]) == replicas
    sc = load_scenario(WORKLOADS / "fleet_mooncake.yaml")
    assert sc.parallelism.replicas == 4 and sc.workload.trace.format == "mooncake"
    if not SHARED.is_dir():
        pytest.skip("Mooncake traces not present (../shared/traces)")
    shared = "kv.tiers=[{medium: remote, capacity_gb: 1024, bandwidth_gbps: 50, shared: true}]"
    sc = load_scenario(WORKLOADS / "fleet_mooncake.yaml",
                       ["simulation.requests=40", "workload.trace.limit=40", shared])
    res = Simulation(sc).run()
    assert res.meta["tiers"]["tiers"]["remote"]["shared"] is True
