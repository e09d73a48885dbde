"""kvsim/metrics/consistency.py: what it reports for the hand-filled frames of conftest.py (one hand-made
inconsistency) and for tampered summaries, check mode's error, and every example scenario (cut to a few
hundred requests) consistent with every numeric figure checked or exempt."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import kvsim
from kvsim.metrics.consistency import (
    ConsistencyError,
    Mismatch,
    assert_consistent,
    check_consistency,
    check_mode,
    checked_figures,
    exemption,
    numeric_leaves,
)
from kvsim.metrics.summary import build_summary

WORKLOADS = Path(__file__).parents[2] / "workloads"


def test_hand_frames_agree_except_the_preemptions_they_were_not_made_to_match(frames, meta):
    """conftest's rid 1 (n = 2) was preempted once, so requests.parquet says 2 sequences preempted; its
    timeline says 1: the one figure the checker flags. Every other figure agrees."""
    requests, timeline = frames
    summary = build_summary(requests, timeline, meta)
    found = check_consistency(summary, requests, timeline)
    assert found == [Mismatch("preemptions", 1, 2, 0.0, "requests.parquet (preemptions x n)")]
    assert found[0].line() == "summary preemptions = 1, requests.parquet (preemptions x n) gives 2"
    checked, exempt = checked_figures(summary, requests, timeline)
    assert "latency.ttft_s.p99" in checked and "kv.utilization_mean" in checked
    assert "cost.usd_per_million_output_tokens" not in checked + exempt  # (no pricing in the hand meta)
    assert exempt == ["kv.capacity_blocks", "kv.block_size", "kv.bytes_per_token", "kv.bytes_per_block",
                      "prefix_cache.evictions", "replicas", "weight_bytes_per_gpu"]
    assert len(checked) + len(exempt) == len(numeric_leaves(summary))


@pytest.mark.parametrize("path, value", [
    ("requests.completed", 3),
    ("throughput.output_tokens_per_s", 6.6),
    ("latency.e2e_s.p90", 1.0),
    ("concurrency.mean", 1.0),
    ("kv.utilization_mean", 0.5),
    ("kv.breakdown.free", 0.1),
    ("prefix_cache.hit_rate_tokens", None),
    ("iterations", 5),
])
def test_a_tampered_figure_is_named_with_both_values(frames, meta, path, value):
    requests, timeline = frames
    summary = build_summary(requests, timeline, meta)
    node = summary
    *head, last = path.split(".")
    for key in head:
        node = node[key]
    was = node[last]
    node[last] = value
    found = [m for m in check_consistency(summary, requests, timeline) if m.figure != "preemptions"]
    assert [(m.figure, m.summary) for m in found] == [(path, value)]
    assert found[0].recomputed == pytest.approx(was)


def test_a_figure_neither_checked_nor_exempt_is_reported(frames, meta):
    requests, timeline = frames
    summary = build_summary(requests, timeline, meta)
    summary["kv"]["new_figure"] = 1.5
    found = [m for m in check_consistency(summary, requests, timeline) if m.figure == "kv.new_figure"]
    assert found and found[0].recomputed == "neither checked nor exempt"
    assert exemption("fleet.pools[3].replicas") == "configuration (the pools as run)"
    assert exemption("tiers.per_tier.ssd.stores").startswith("engine counter")
    assert exemption("kv.new_figure") is None


def test_check_mode_raises_on_a_mismatch_naming_the_figure(frames, meta, monkeypatch):
    requests, timeline = frames
    requests = requests.assign(preemptions=[0, 0, 0, 0])  # consistent with the timeline? no: it says 1
    timeline = timeline.assign(preempted=[0, 0, 0, 0])
    meta["scenario"]["kv"] = {"check_invariants": True}
    build_summary(requests, timeline, meta)  # consistent: no error
    import kvsim.metrics.core_sections as core

    real = core.requests_section
    monkeypatch.setattr(core, "requests_section", lambda rq: {**real(rq), "output_tokens": 14})
    with pytest.raises(ConsistencyError) as exc:
        build_summary(requests, timeline, meta)
    assert str(exc.value) == "summary requests.output_tokens = 14, requests.parquet gives 13"
    meta["scenario"]["kv"] = {"check_invariants": False}
    assert build_summary(requests, timeline, meta)["requests"]["output_tokens"] == 14  # not checked


EXAMPLES = sorted(p.stem for p in WORKLOADS.glob("*.yaml") if p.stem != "vidur_azure_conv")
"""Every example scenario (vidur_azure_conv.yaml needs a trace the user downloads)."""


def _cut(name: str) -> dict:
    over: dict = {"simulation.requests": 200}
    sc = kvsim.load(WORKLOADS / f"{name}.yaml")
    if sc.workload.kind == "trace":
        over["workload.trace.limit"] = 200
    if name == "chat":  # SLO and goodput figures too
        over["slo"] = {"ttft_s": {"p90": 0.2}, "tpot_s": {"p99": 0.02}}
    if name == "sparsity_chat":  # a policy on (the example's is none)
        over["kv.sparsity.policy"] = "h2o"
    if name == "sparsity_agentic":
        over["kv.sparsity.policy"] = "infinigen"
    if name == "fleet_pd":  # P/D with a cpu tier below the hash cache
        over.update({"kv.prefix_cache": "hash", "kv.tiers": [{"medium": "cpu", "capacity_gb": 8}]})
    return over


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_scenario_is_consistent(name):
    res = kvsim.run(WORKLOADS / f"{name}.yaml", overrides=_cut(name))
    found = check_consistency(res.summary, res.requests, res.timeline)
    assert [m.line() for m in found] == []
    checked, exempt = checked_figures(res.summary, res.requests, res.timeline)
    assert len(checked) >= 50 and len(checked) + len(exempt) == len(numeric_leaves(res.summary))


def test_check_mode_runs_the_checker_on_an_example():
    """kv.check_invariants: build_summary checks its own figures (the run went through), and a tampered copy
    raises ConsistencyError naming the figure."""
    res = kvsim.run(WORKLOADS / "fleet_pd.yaml",
                    overrides={"simulation.requests": 40, "kv.check_invariants": True})
    assert check_mode(res.summary)
    assert_consistent(res.summary, res.requests, res.timeline)
    bad = copy.deepcopy(res.summary)
    bad["fleet"]["kv_transfer"]["bytes"] *= 2
    found = check_consistency(bad, res.requests, res.timeline)
    assert [m.figure for m in found] == ["fleet.kv_transfer.bytes"]
    assert found[0].source == "requests.parquet (kv_transfer_bytes)"
    with pytest.raises(ConsistencyError) as raised:
        assert_consistent(bad, res.requests, res.timeline)
    assert str(raised.value) == found[0].line()
    assert str(raised.value).startswith("summary fleet.kv_transfer.bytes = ")


def test_a_wait_for_a_tier_load_without_a_tier_load_is_flagged():
    """A request waits for a tier load only for KV it loaded from a tier (on any replica, at any admission):
    take one waiting request's cpu-tier hit and load away and the summary, rebuilt from those frames, is
    flagged on tiers.load_wait_s (as P/D runs with tiers were before their loads were credited, issue 25),
    and on the cpu tier's loads, no longer all in loaded_tokens_cpu."""
    from kvsim.engine.simulation import Simulation

    sc = kvsim.load(WORKLOADS / "mooncake_tiers.yaml",
                    overrides={"simulation.requests": 200, "workload.trace.limit": 200})
    res = Simulation(sc).run()
    rq = res.requests.copy()
    waited = rq[(rq["loaded_tokens_cpu"] > 0) & (rq["load_wait_s"] > 0)
                & (rq["loaded_tokens_ssd"] == 0)].index
    assert len(waited)
    i = waited[0]
    rq.loc[i, "hit_tokens_gpu"] += rq.loc[i, "hit_tokens_cpu"]
    rq.loc[i, "hit_tokens_cpu"] = 0
    rq.loc[i, "loaded_tokens_cpu"] = 0
    summary = build_summary(rq, res.timeline, res.meta)
    found = check_consistency(summary, rq, res.timeline)
    bs = summary["kv"]["block_size"]
    loads = summary["tiers"]["per_tier"]["cpu"]["loads"]
    assert [(m.figure, m.summary, m.recomputed) for m in found] == [
        ("tiers.per_tier.cpu.loads", loads, loads - res.requests.loc[i, "loaded_tokens_cpu"] / bs),
        ("tiers.load_wait_s", 1, 0)]
    assert "waited for a tier load but loaded no tokens" in found[1].source
    assert check_consistency(build_summary(res.requests, res.timeline, res.meta), res.requests,
                             res.timeline) == []  # the frames as run agree
