"""The published serving runs (kvsim/cost/published_serving_runs.yaml): the file loads through kvsim's YAML
reader, every case has the keys a fit needs, names a built-in model and a hardware profile at a
tensor-parallel size the model allows, and its transcribed figures agree with each other (throughput =
tokens / duration)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvsim.inputs import load_yaml
from kvsim.specs.catalog import get_model, list_models
from kvsim.specs.dtypes import QUANTIZATION
from kvsim.specs.hardware import list_hardware, load_hardware

PATH = Path(__file__).resolve().parents[2] / "kvsim" / "cost" / "published_serving_runs.yaml"
CASES = load_yaml(PATH, "published serving runs")["cases"]
REQUIRED = ("case", "group", "model", "hardware", "tensor_parallel_size", "quantization", "engine",
            "engine_version", "dataset", "input_len", "output_len", "concurrency", "request_rate",
            "num_prompts", "metrics", "source", "table", "inferred")
UNITS = {"ms", "s", "tokens/s", "req/s", "tokens"}


def _ids(case):
    return case["case"]


def test_the_file_holds_8_to_23_distinct_cases_on_at_least_two_devices():
    assert 8 <= len(CASES) <= 23
    assert len({c["case"] for c in CASES}) == len(CASES)
    assert len({c["hardware"] for c in CASES}) >= 2


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_every_case_has_the_required_keys_and_a_known_model_and_device(case):
    assert [k for k in REQUIRED if k not in case] == []
    assert case["model"] in list_models() and case["hardware"] in list_hardware()
    load_hardware(case["hardware"])
    get_model(case["model"]).validate_tp(case["tensor_parallel_size"])
    assert case["quantization"] in QUANTIZATION
    assert isinstance(case["engine_version"], str) and case["engine_version"]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_lengths_load_and_count_are_stated_or_listed_as_not_stated(case):
    not_stated = case.get("not_stated", [])
    assert set(case["inferred"]) | set(not_stated) <= set(case)  # they name fields of the case
    assert case["dataset"] in ("fixed", "random", "sharegpt")
    if case["dataset"] == "sharegpt":
        assert case["input_len"] is None and case["output_len"] is None
    else:
        assert all(isinstance(case[k], int) and case[k] > 0 for k in ("input_len", "output_len"))
    # exactly one load: a closed loop of `concurrency` clients, or requests sent at `request_rate`
    assert (case["concurrency"] is None) != (case["request_rate"] is None)
    if case["concurrency"] is not None:
        assert isinstance(case["concurrency"], int) and case["concurrency"] >= 1
    else:
        assert case["request_rate"] == "inf" or case["request_rate"] > 0
    if "num_prompts" in not_stated:
        assert case["num_prompts"] is None
    else:
        assert isinstance(case["num_prompts"], int) and case["num_prompts"] > 0


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_metrics_have_positive_values_and_units(case):
    assert case["metrics"]
    for name, metric in case["metrics"].items():
        assert set(metric) == {"value", "unit"}, name
        assert metric["unit"] in UNITS and metric["value"] > 0, name


@pytest.mark.parametrize("case", [c for c in CASES if "duration" in c["metrics"]], ids=_ids)
def test_transcribed_throughputs_agree_with_tokens_over_duration(case):
    m = {k: v["value"] for k, v in case["metrics"].items()}
    # the printed duration has 2 decimals, so a few 0.01% of slack
    assert math.isclose(m["request_throughput"], case["num_prompts"] / m["duration"], rel_tol=2e-3)
    assert math.isclose(m["output_throughput"], m["total_generated_tokens"] / m["duration"], rel_tol=2e-3)
    total = (m["total_input_tokens"] + m["total_generated_tokens"]) / m["duration"]
    assert math.isclose(m["total_throughput"], total, rel_tol=2e-3)


def test_one_case_pinned():
    # TensorRT-LLM perf-overview, Llama 3.1 8B, 1000/1000 on H100 TP1 (FP8): 15,220 output tokens/s,
    # 3000 requests
    case = next(c for c in CASES if c["case"] == "trtllm_llama3.1-8b_fp8_h100_tp1_1000_1000")
    assert (case["hardware"], case["tensor_parallel_size"], case["quantization"]) == ("h100-sxm", 1, "fp8")
    assert (case["input_len"], case["output_len"], case["num_prompts"]) == (1000, 1000, 3000)
    assert case["metrics"]["output_throughput"] == {"value": 15220, "unit": "tokens/s"}
