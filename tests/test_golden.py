"""End-to-end golden run: a small fixed scenario (tests/data/golden/scenario.yaml, llama-3-8b on h100-sxm,
200 synthetic requests, a KV pool small enough to force preemptions) through Simulation + build_summary.
Chosen summary figures must match tests/data/golden/summary.json to rel 1e-9, and the run must satisfy
the engine's invariants. After an intended change of behaviour, regenerate with
    KVSIM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py
and review the diff of summary.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from kvsim.engine.simulation import Simulation
from kvsim.metrics.summary import build_summary
from kvsim.scenario import load_scenario

GOLDEN_DIR = Path(__file__).parent / "data" / "golden"
SCENARIO = GOLDEN_DIR / "scenario.yaml"
GOLDEN = GOLDEN_DIR / "summary.json"
UPDATE = os.environ.get("KVSIM_UPDATE_GOLDEN") == "1"
REQUESTS = 200

GOLDEN_KEYS = (
    "requests.total", "requests.completed", "requests.rejected", "requests.prompt_tokens",
    "requests.output_tokens", "requests.preempted",
    "throughput.makespan_s", "throughput.requests_per_s", "throughput.output_tokens_per_s",
    "throughput.total_tokens_per_s",
    *(f"latency.{m}.{s}" for m in ("ttft_s", "tpot_s", "e2e_s", "queue_s")
      for s in ("mean", "p50", "p90", "p99")),
    "concurrency.mean", "concurrency.p50", "concurrency.p99", "concurrency.max",
    "concurrency.waiting_mean", "concurrency.waiting_max",
    "kv.capacity_blocks", "kv.block_size", "kv.bytes_per_token", "kv.utilization_mean", "kv.utilization_max",
    "kv.used_blocks_mean", "kv.used_blocks_max", "kv.internal_fragmentation_mean",
    "preemptions", "iterations",
)


def dig(data: dict, dotted: str):
    for key in dotted.split("."):
        data = data[key]
    return data


def run(overrides: list[str] | None = None):
    result = Simulation(load_scenario(SCENARIO, overrides)).run()
    return result, build_summary(result.requests, result.timeline, result.meta)


@pytest.fixture(scope="module")
def golden_run():
    return run()


def test_matches_golden(golden_run):
    _, summary = golden_run
    got = {key: dig(summary, key) for key in GOLDEN_KEYS}
    if UPDATE:
        doc = {"about": f"chosen figures of {SCENARIO.name} (see tests/test_golden.py)", "values": got}
        GOLDEN.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))["values"]
    assert sorted(want) == sorted(GOLDEN_KEYS), "golden keys changed: regenerate with KVSIM_UPDATE_GOLDEN=1"
    mismatches = {}
    for key in GOLDEN_KEYS:
        w, g = want[key], got[key]
        same = (w is None and g is None) or (
            w is not None and g is not None and g == pytest.approx(w, rel=1e-9, abs=0))
        if not same:
            mismatches[key] = (w, g)
    assert not mismatches, f"(golden, got): {mismatches}"


def test_golden_exercises_preemption(golden_run):
    _, summary = golden_run
    assert summary["preemptions"] > 0
    assert summary["kv"]["capacity_blocks"] == 800


def test_all_requests_complete(golden_run):
    result, summary = golden_run
    assert summary["requests"]["completed"] == REQUESTS
    assert summary["requests"]["rejected"] == 0
    req = result.requests
    assert len(req) == REQUESTS
    assert sorted(req["rid"]) == list(range(REQUESTS))
    assert req["finish_s"].notna().all()


def test_request_times_are_ordered(golden_run):
    req = golden_run[0].requests
    assert (req["first_scheduled_s"] >= req["arrival_s"]).all()
    assert (req["first_token_s"] >= req["arrival_s"]).all()
    assert (req["first_token_s"] >= req["first_scheduled_s"]).all()
    assert (req["finish_s"] >= req["first_token_s"]).all()
    tpot = req["tpot_s"].dropna()
    assert len(tpot) == int((req["output_len"] > 1).sum())
    assert (tpot >= 0).all()
    assert (req["output_len"] >= 1).all()


def test_timeline_invariants(golden_run):
    result, summary = golden_run
    tl = result.timeline
    capacity = result.meta["capacity_blocks"]
    busy = tl[tl["iteration"] >= 0]  # iteration -1 rows mark a replica going idle
    assert len(busy) == summary["iterations"]
    assert (tl.loc[tl["iteration"] < 0, "dt_s"] == 0).all()
    assert (busy["dt_s"] > 0).all()
    for _, rows in tl.groupby("replica"):
        assert np.all(np.diff(rows["t_s"].to_numpy()) >= 0)
    for _, rows in busy.groupby("replica"):
        assert np.all(np.diff(rows["iteration"].to_numpy()) > 0)
    assert (tl["kv_used_blocks"] >= 0).all()
    assert (tl["kv_used_blocks"] <= capacity).all()
    assert (tl["kv_used_blocks"] + tl["kv_cached_blocks"] <= capacity).all()
    block_size = result.meta["block_size"]
    assert (tl["kv_token_states"] <= tl["kv_used_blocks"] * block_size).all()
    assert (tl["running_reqs"] <= 64).all()  # scheduler.max_num_seqs in the scenario
    assert int(tl["preempted"].sum()) == summary["preemptions"]


def test_runtime_invariant_checks_change_nothing(golden_run):
    result, summary = golden_run
    checked_result, checked = run(["kv.check_invariants=true"])
    assert checked["scenario"]["kv"]["check_invariants"] is True
    assert summary["scenario"]["kv"]["check_invariants"] is False
    strip = lambda s: {k: v for k, v in s.items() if k != "scenario"}  # noqa: E731
    assert strip(checked) == strip(summary)
    assert checked_result.requests.equals(result.requests)
    assert checked_result.timeline.equals(result.timeline)


def test_rerun_is_identical(golden_run):
    result, summary = golden_run
    again_result, again = run()
    assert again == summary
    assert again_result.requests.equals(result.requests)
    assert again_result.timeline.equals(result.timeline)
