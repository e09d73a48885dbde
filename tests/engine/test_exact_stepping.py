"""simulation.exact_stepping (kvsim/engine/replica.py): every example scenario gives the same summary,
requests and timeline whether iterations run back to back (the default) or one by one through the event
loop and the scheduler's general path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.metrics.summary import build_summary
from kvsim.scenario import load_scenario

WORKLOADS = Path(__file__).parents[2] / "workloads"
EXAMPLES = sorted(p.name for p in WORKLOADS.glob("*.yaml"))


def _run(path: Path, exact: bool, extra: tuple[str, ...] = ()):
    sc = load_scenario(path, ["simulation.requests=150", f"simulation.exact_stepping={str(exact).lower()}",
                              *extra])
    sim = Simulation(sc)
    res = sim.run()
    summary = build_summary(res.requests, res.timeline, res.meta)
    return sim, res, json.dumps(summary, sort_keys=True)


def _assert_same(path: Path, extra: tuple[str, ...] = ()) -> int:
    """Both modes agree; returns how many iterations the default mode ran back to back."""
    _, ref, ref_summary = _run(path, True, extra)
    sim, got, got_summary = _run(path, False, extra)
    assert got_summary == ref_summary
    for name in ("requests", "timeline"):
        a, b = getattr(ref, name), getattr(got, name)
        assert list(a.columns) == list(b.columns) and list(a.dtypes) == list(b.dtypes)
        assert a.equals(b), f"{name} differs"
    return sum(r.fast_iterations for r in sim.replicas)


@pytest.mark.parametrize("name", EXAMPLES)
def test_back_to_back_iterations_match_exact_stepping(name):
    fast = _assert_same(WORKLOADS / name)
    sc = load_scenario(WORKLOADS / name)
    stepwise = (sc.kv.tiers or (sc.cluster is not None and any(p.role != "mixed" for p in sc.cluster.pools)))
    if not stepwise:  # (tier loads and P/D transfers call back into the cluster: those step one by one)
        assert fast > 0, "no iteration ran back to back: the test would not exercise the fast path"


@pytest.mark.parametrize("extra", [
    ("kv.check_invariants=true", "kv.num_gpu_blocks_override=300"),  # preemptions inside runs
    ("scheduler.preemption_mode=swap", "kv.num_gpu_blocks_override=300"),
    ("workload.n=2", "kv.num_gpu_blocks_override=400"),  # forked groups: copy-on-write at boundaries
    ("scheduler.policy=vllm_v0", "scheduler.chunked_prefill=false"),
    ("simulation.duration_s=20",),  # the run's end is an event too
])
def test_back_to_back_under_pressure_and_variants(extra):
    assert _assert_same(WORKLOADS / "chat.yaml", extra) > 0
