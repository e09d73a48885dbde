"""The regression table of published runs (kvsim/cost/published_runs.yaml): kvsim's cost model on each
case stays within the case's band of the published figure, the table's kvsim figures are current, the
docs show the same tables, and a simulation of one latency case agrees with the analytic step sum.
Throughput cases are small simulations (kvsim.cost.published.throughput_scenario), run once per seed and
cached for the module (about 5 s for all of them, the fixed-3-ms figures included)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from kvsim.cost import roofline
from kvsim.cost.published import (
    BEFORE_FIT,
    load_published_runs,
    predict_ms,
    predict_req_s,
    throughput_scenario,
)
from kvsim.engine.simulation import Simulation
from kvsim.metrics.summary import build_summary
from kvsim.scenario import CostConfig, build_scenario

CASES = load_published_runs()
LATENCY = [c for c in CASES if c["kind"] == "latency"]
THROUGHPUT = [c for c in CASES if c["kind"] == "throughput"]
DOC = Path(__file__).resolve().parents[2] / "docs" / "cost_model.md"


def case_id(case):
    return f"{case['case']}-{case['hardware']}"


def makespan_s(scenario: dict) -> float:
    """One simulation of a throughput case's scenario: last finish minus first arrival (all 200 finish)."""
    requests = Simulation(build_scenario(scenario)).run().requests
    assert requests["finish_s"].notna().all() and not requests["rejected"].any()
    return float(requests["finish_s"].max() - requests["arrival_s"].min())


@functools.cache
def throughput(i: int, before: bool = False) -> dict:
    """kvsim's figures for THROUGHPUT[i] (with the fixed 3 ms overhead when `before`), computed once."""
    return predict_req_s(THROUGHPUT[i], makespan_s, **(BEFORE_FIT if before else {}))


def kvsim_figure(case) -> float:
    if case["kind"] == "latency":
        return predict_ms(case)
    return throughput(THROUGHPUT.index(case))["mean"]


def published(case) -> float:
    return case["published_ms"] if case["kind"] == "latency" else case["published_req_s"]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_ratio_stays_within_its_band(case):
    got = kvsim_figure(case)
    ratio = got / published(case)
    unit = "ms" if case["kind"] == "latency" else "req/s"
    assert abs(ratio - 1) <= case["band"], f"{case_id(case)}: kvsim {got:.3f} {unit} / published " \
        f"{published(case)} {unit} = {ratio:.3f}, outside 1 +- {case['band']}"


@pytest.mark.parametrize("case", LATENCY, ids=case_id)
def test_table_figures_are_current(case):
    got = predict_ms(case)
    assert case["kvsim_ms"] == pytest.approx(got, abs=0.05), "rerun predict_ms and update published_runs.yaml"
    assert case["ratio"] == pytest.approx(got / case["published_ms"], abs=5e-4)
    before = predict_ms(case, **BEFORE_FIT)
    assert case["kvsim_before_ms"] == pytest.approx(before, abs=0.05)


@pytest.mark.parametrize("case", THROUGHPUT, ids=case_id)
def test_throughput_figures_are_current(case):
    i = THROUGHPUT.index(case)
    got, before = throughput(i), throughput(i, before=True)
    hint = "rerun predict_req_s and update published_runs.yaml"
    for key, stat in (("kvsim_req_s", "mean"), ("kvsim_sd_req_s", "sd"), ("kvsim_min_req_s", "min"),
                      ("kvsim_max_req_s", "max")):
        assert case[key] == pytest.approx(got[stat], abs=5e-4), f"{key}: {hint}"
    assert case["kvsim_before_req_s"] == pytest.approx(before["mean"], abs=5e-4), hint
    assert case["ratio"] == pytest.approx(got["mean"] / case["published_req_s"], abs=5e-4), hint


def test_throughput_cases_are_held_out_and_honestly_banded():
    """Not fitted, and a band at least the per-sample spread (sd / mean) kvsim itself shows: one
    200-prompt sample (vLLM's) may sit that far from the mean of others for no fault of the model."""
    assert THROUGHPUT
    for case in THROUGHPUT:
        assert case["fitted"] is False
        assert case["seeds"] >= 8 and case["num_prompts"] == 200
        # 0.9: the test's few seeds overstate the spread (sd / mean 0.24-0.28 over 10 seeds, 0.19-0.22 over
        # 64)
        assert case["band"] >= 0.9 * case["kvsim_sd_req_s"] / case["kvsim_req_s"], case_id(case)


def test_the_8b_to_70b_ratio_within_a_build():
    """Sample-free check: within one build both models ran the same 200 prompts, and across kvsim's seeds
    the 8B / 70B throughput ratio hardly moves, so it is compared far tighter than each case (±10%)."""
    by_hw = {}
    for case in THROUGHPUT:
        by_hw.setdefault(case["hardware"], {})[case["model"]] = case
    for hw, pair in by_hw.items():
        small, large = pair["llama-3-8b"], pair["llama-3-70b"]
        mine = kvsim_figure(small) / kvsim_figure(large)
        theirs = small["published_req_s"] / large["published_req_s"]
        assert abs(mine / theirs - 1) <= 0.10, f"{hw}: 8B/70B kvsim {mine:.3f}, published {theirs:.3f}"


def test_throughput_scenario_is_all_at_once():
    case = THROUGHPUT[0]
    sc = build_scenario(throughput_scenario(case, 0))
    assert sc.workload.arrival.process == "closed_loop" and sc.workload.arrival.users == case["num_prompts"]
    assert sc.simulation.requests == case["num_prompts"]
    assert sc.scheduler.policy == "vllm_v0" and sc.scheduler.chunked_prefill is False
    assert (sc.scheduler.max_num_seqs, sc.scheduler.max_num_batched_tokens) == (256, 8192)
    assert sc.kv.prefix_cache == "none" and sc.kv.gpu_memory_utilization == 0.9
    result = Simulation(sc).run()
    assert (result.requests["arrival_s"] == 0).all()


def test_every_case_cites_a_source():
    for case in CASES:
        assert case["source"].startswith("https://") and published(case) > 0
        name = "latency-tests.json @" if case["kind"] == "latency" else "throughput-tests.json @"
        assert name in case["definition"]


def test_docs_show_the_table():
    text = DOC.read_text(encoding="utf-8")
    for case in CASES:
        row = re.search(rf"\| {re.escape(case['case'])} \| {re.escape(case['hardware'])} \|[^\n]*", text)
        assert row, f"docs/cost_model.md has no row for {case_id(case)}"
        if case["kind"] == "latency":
            figures = (f"{case['published_ms']:g}", f"{case['kvsim_before_ms']:.1f}",
                       f"{case['kvsim_ms']:.1f}", f"{case['ratio']:.3f}")
        else:
            figures = (f"{case['published_req_s']:g}", f"{case['kvsim_before_req_s']:.2f}",
                       f"{case['kvsim_req_s']:.2f} ± {case['kvsim_sd_req_s']:.2f}",
                       f"{case['kvsim_min_req_s']:.2f}–{case['kvsim_max_req_s']:.2f}", f"{case['ratio']:.3f}",
                       f"±{round(100 * case['band'])}%", "no")
        for figure in figures:
            assert figure in row.group(0), f"{case_id(case)}: {figure} not in {row.group(0)!r}"


def test_scenario_defaults_are_the_fitted_constants():
    """A scenario that sets no overhead key gets the roofline's fitted constants on the roofline."""
    assert CostConfig().iteration_overhead_s is None
    sc = build_scenario({"hardware": "mi300x", "model": "llama-3-8b"})  # no kernel tables: auto -> roofline
    d = Simulation(sc).cost.describe()
    assert d["model"] == "roofline" and "no kernel tables" in d["selected"]
    assert (d["iteration_overhead_s"], d["layer_overhead_s"], d["eager_layer_overhead_s"],
            d["seq_overhead_s"]) == (roofline.ITERATION_OVERHEAD_S, roofline.LAYER_OVERHEAD_S,
                                     roofline.EAGER_LAYER_OVERHEAD_S, roofline.SEQ_OVERHEAD_S)


def test_a_simulation_of_a_latency_case_matches_the_step_sum():
    case = next(c for c in LATENCY if c["hardware"] == "h100-sxm" and c["tensor_parallel_size"] == 1)
    sc = build_scenario({
        "model": case["model"], "hardware": case["hardware"], "kv": {"block_size": 16},
        "cost": {"model": "roofline"},
        "workload": {"kind": "synthetic", "arrival": {"process": "closed_loop", "users": case["batch_size"]},
                     "prompt_len": {"dist": "fixed", "value": case["input_len"]},
                     "output_len": {"dist": "fixed", "value": case["output_len"]}},
        "simulation": {"seed": 0, "requests": case["batch_size"]},
    })
    result = Simulation(sc).run()
    summary = build_summary(result.requests, result.timeline, result.meta)
    assert summary["iterations"] == case["output_len"]
    assert 1e3 * summary["throughput"]["makespan_s"] == pytest.approx(predict_ms(case), rel=1e-3)
