"""cost.request_overhead_s (kvsim/engine/simulation.py `_arrivals`, `_release`): a request reaches the
engine that long after it arrives, so every TTFT and E2E latency holds it once, and no iteration does."""

from __future__ import annotations

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.scenario import build_scenario


def _run(front: float, requests: int = 1):
    sc = build_scenario({
        "model": "llama-3-8b", "hardware": "h200", "cost": {"model": "roofline", "request_overhead_s": front},
        "workload": {"kind": "synthetic", "arrival": {"process": "closed_loop", "users": 1},
                     "prompt_len": {"dist": "fixed", "value": 100},
                     "output_len": {"dist": "fixed", "value": 5}},
        "simulation": {"seed": 0, "requests": requests},
    })
    return Simulation(sc).run()


def test_a_lone_request_waits_the_front_end_latency_once():
    base, late = _run(0.0).requests, _run(0.05).requests
    assert base["arrival_s"].tolist() == late["arrival_s"].tolist() == [0.0]
    assert late["first_scheduled_s"].iloc[0] == pytest.approx(0.05, abs=1e-12)
    for col in ("ttft_s", "e2e_s"):
        assert late[col].iloc[0] == pytest.approx(base[col].iloc[0] + 0.05, abs=1e-12)
    assert late["tpot_s"].iloc[0] == pytest.approx(base["tpot_s"].iloc[0], abs=1e-12)


def test_a_closed_loop_user_pays_it_on_every_request_and_iterations_are_unchanged():
    base, late = _run(0.0, 3), _run(0.05, 3)
    b, la = base.requests, late.requests
    # each next request arrives when the last one finishes and reaches the engine 0.05 s later
    assert la["arrival_s"].iloc[1] == pytest.approx(la["finish_s"].iloc[0], abs=1e-12)
    assert la["e2e_s"].tolist() == pytest.approx((b["e2e_s"] + 0.05).tolist(), abs=1e-12)
    assert la["finish_s"].iloc[-1] == pytest.approx(b["finish_s"].iloc[-1] + 3 * 0.05, abs=1e-12)
    busy = [t[t["num_seqs"] > 0]["dt_s"].tolist() for t in (late.timeline, base.timeline)]
    assert len(busy[0]) == 3 * 5 and busy[0] == pytest.approx(busy[1], abs=1e-15)
