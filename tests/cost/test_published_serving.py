"""kvsim.cost.published_serving: the scenarios of the published serving runs (three cases checked key by key),
the published-metric -> summary.json mapping on a hand-made summary, the error summary and the implied
front-end latency by hand, and the figures file and the docs' table current (the cheapest cases rerun,
about a second)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsim.cost.published_serving import (
    BEGIN,
    END,
    SHAREGPT_LENGTHS,
    comparison_rows,
    error_summary,
    implied_overhead_s,
    kvsim_metric,
    load_results,
    load_serving_runs,
    measured_output_len,
    render_from_results,
    render_table,
    replace_between_markers,
    run_case,
    serving_scenario,
)
from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.metrics.summary import build_summary
from kvsim.scenario import build_scenario

CASES = {c["case"]: c for c in load_serving_runs()}
DOC = Path(__file__).resolve().parents[2] / "docs" / "cost_model.md"
CHEAP = [("rocm_llama3.1-70b_fp8_mi300x_tp8_latency_b1_128_2048", "roofline"),
         ("rocm_llama3.1-405b_fp8_mi300x_tp8_latency_b1_2048_2048", "roofline"),
         ("nim_llama3.3-70b_fp8_h100_tp2_5000_500_c1", "roofline"),
         ("nim_llama3.3-70b_fp8_h100_tp2_5000_500_c1", "kernels"),
         ("gpustack_gpt-oss-20b_h100_tp1_random_2000_100", "kernels")]


def summarize(scenario: dict) -> dict:
    result = Simulation(build_scenario(scenario)).run()
    return build_summary(result.requests, result.timeline, result.meta)


def test_trtllm_offline_case_is_fixed_lengths_all_at_once_without_front_end():
    sc = serving_scenario(CASES["trtllm_llama3.1-8b_fp8_h100_tp1_1000_1000"], "kernels")
    assert (sc["model"], sc["hardware"], sc["quantization"]) == ("llama-3.1-8b", "h100-sxm", "fp8")
    assert sc["parallelism"] == {"tensor_parallel_size": 1}
    assert sc["workload"] == {"kind": "bench_serve", "bench_serve": {
        "num_prompts": 3000, "dataset": "random", "random_input_len": 1000, "random_output_len": 1000,
        "random_range_ratio": 0.0, "request_rate": "inf"}}
    assert sc["simulation"] == {"seed": 0, "requests": 3000}
    assert sc["cost"] == {"model": "kernels", "request_overhead_s": 0.0}
    assert sc["scheduler"] == {} and sc["kv"] == {"block_size": 16, "prefix_cache": "none"}


def test_gpustack_random_case_takes_the_measured_mean_output_and_the_seed():
    case = CASES["gpustack_gpt-oss-20b_h100_tp1_random_4000_200"]
    assert measured_output_len(case) == 105  # 52,309 generated tokens / 500 requests = 104.6
    sc = serving_scenario(case, "roofline")
    b = sc["workload"]["bench_serve"]
    assert (b["random_input_len"], b["random_output_len"], b["random_range_ratio"]) == (4000, 105, 0.0)
    assert (b["num_prompts"], b["seed"], b["request_rate"]) == (500, 42, "inf")
    assert "max_concurrency" not in b
    assert sc["cost"] == {"model": "roofline"}  # a served run: the default request_overhead_s
    assert sc["quantization"] == "mxfp4"


def test_gpustack_sharegpt_case_states_max_model_len_and_tp():
    sc = serving_scenario(CASES["gpustack_gpt-oss-120b_h100_tp4_sharegpt"], "roofline")
    assert sc["workload"]["bench_serve"] == {"num_prompts": 1000, "dataset": "sharegpt",
                                             "dataset_path": str(SHAREGPT_LENGTHS), "request_rate": "inf"}
    # the flags it states, plus vLLM 0.10.2's `vllm serve` defaults on an H100 (vllm_serve_defaults)
    assert sc["scheduler"] == {"max_model_len": 32768, "max_num_batched_tokens": 8192, "max_num_seqs": 1024}
    assert sc["parallelism"]["tensor_parallel_size"] == 4


def test_nim_case_is_a_closed_loop_of_its_concurrency_and_rocm_keeps_its_engine_args():
    sc = serving_scenario(CASES["nim_llama3.3-70b_fp8_h100_tp2_5000_500_c25"], "roofline")
    b = sc["workload"]["bench_serve"]
    assert b["max_concurrency"] == 25 and "request_rate" not in b
    assert b["num_prompts"] == sc["simulation"]["requests"] == 16 * 25
    rocm = serving_scenario(CASES["rocm_llama3.1-70b_fp8_mi300x_tp8_latency_b64_128_2048"], "roofline")
    assert rocm["kv"]["dtype"] == "fp16" and rocm["kv"]["gpu_memory_utilization"] == 0.9
    assert rocm["workload"]["bench_serve"]["num_prompts"] == 64 and rocm["cost"]["request_overhead_s"] == 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_case_builds(name):
    sc = build_scenario(serving_scenario(CASES[name], "roofline"))
    assert sc.workload.kind == "bench_serve" and sc.simulation.requests == sc.workload.bench_serve.num_prompts


def test_metric_mapping_on_a_hand_made_summary():
    summary = {"bench_serve": {"output_throughput": 100.0, "duration_s": 2.5, "mean_ttft_ms": 40.0,
                               "median_ttft_ms": 30.0, "mean_itl_ms": 5.0, "median_itl_ms": None,
                               "total_output_tokens": 250}}
    assert kvsim_metric("output_throughput", summary) == 100.0
    assert kvsim_metric("latency_mean", summary) == 2.5 == kvsim_metric("duration", summary)
    assert (kvsim_metric("ttft_mean", summary), kvsim_metric("ttft_median", summary)) == (40.0, 30.0)
    assert kvsim_metric("itl_mean", summary) == 5.0 and kvsim_metric("itl_median", summary) is None
    assert kvsim_metric("total_generated_tokens", summary) == 250
    with pytest.raises(KvsimError, match="p99_ttft"):
        kvsim_metric("p99_ttft", summary)


def test_a_latency_case_is_the_makespan_of_its_batch():
    # one request of 128 + 2048 tokens at t = 0: benchmark_latency's latency is its end-to-end time
    case = CASES["rocm_llama3.1-70b_fp8_mi300x_tp8_latency_b1_128_2048"]
    summary = summarize(serving_scenario(case, "roofline"))
    assert summary["bench_serve"]["duration_s"] == pytest.approx(summary["bench_serve"]["mean_e2el_ms"] / 1e3)


def test_error_summary_and_implied_overhead_by_hand():
    rows = [{"model": "a", "group": "g", "roofline": 1.1, "kernels": "no tables"},
            {"model": "a", "group": "g", "roofline": 0.7, "kernels": 0.9},
            {"model": "b", "group": "g", "roofline": None, "kernels": 1.5}]
    assert error_summary(rows, "roofline")["a"] == {"n": 2, "median": pytest.approx(0.2),
                                                    "max": pytest.approx(0.3)}
    assert "b" not in error_summary(rows, "roofline")
    assert error_summary(rows, "kernels", "group")["g"]["max"] == pytest.approx(0.5)
    case = {"metrics": {"ttft_mean": {"value": 406.77, "unit": "ms"}}}
    assert implied_overhead_s(case, 292.57) == pytest.approx(0.1142)


def test_a_case_that_did_not_run_says_why_in_its_row():
    case = CASES["trtllm_llama3.1-8b_fp8_h100_tp1_2048_128"]
    rows = comparison_rows([case], {case["case"]: {"roofline": "too slow (> 120 s)", "kernels": {
        "output_throughput": 3450.0}}})
    assert [(r["roofline"], r["kernels"]) for r in rows] == [("too slow (> 120 s)", 1.0)]
    assert "| too slow (> 120 s) | 1.000 |" in render_table(rows)


@pytest.mark.parametrize(("name", "cost_model"), CHEAP)
def test_figures_are_current(name, cost_model):
    figures, _ = load_results()
    stored = figures[name][cost_model]
    got = run_case(CASES[name], cost_model, summarize)
    assert got.keys() == stored.keys()
    for metric, value in got.items():
        assert value == pytest.approx(stored[metric], rel=1e-6), \
            f"{name} {cost_model} {metric}: rerun calibration/serving_runs_report.py"


def test_implied_overhead_is_current():
    _, overheads = load_results()
    assert {o["cost_model"] for o in overheads} == {"roofline", "kernels"}
    for o in overheads:
        got = run_case(CASES[o["case"]], o["cost_model"], summarize, request_overhead_s=0.0)
        assert got["ttft_mean"] == pytest.approx(o["ttft_mean_ms"], rel=1e-6)


def test_docs_show_the_current_table():
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index(BEGIN):text.index(END) + len(END)]
    assert block == render_from_results(list(CASES.values())), "rerun calibration/serving_runs_report.py"
    with pytest.raises(KvsimError, match="markers"):
        replace_between_markers("no markers here", block)
