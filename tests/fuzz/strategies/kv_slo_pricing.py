"""KV precision, SLO and pricing keys: `kv.dtype` (vLLM's names, Hugging Face spellings, quantized formats
{bits, group_size, scale_bits}, per-part {rope, rest}) and the weights' `quantization`, through the
scenario, --set, `kvsim footprint --kv-dtype` and `kvsim hitrate --kv-dtype` (`kvdtype_cases`); `slo:`
sections and `kvsim run --slo` (`slo_cases`); `pricing.usd_per_gpu_hour` as one number or a mapping by
hardware profile, on one replica or a fleet of two profiles (`pricing_cases`). Valid and bad values."""

from __future__ import annotations

import json
from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import Raw, run_argv, small_scenario, to_yaml, yaml_scalar_text

# ---------------------------------------------------------------------------------------------------
# KV precision

KV_DTYPES: tuple[tuple[Any, str], ...] = (
    ("auto", "pass"), ("fp8", "pass"), ("fp8_e4m3", "pass"), ("fp8_e5m2", "pass"), ("fp32", "pass"),
    ("fp16", "pass"), ("bf16", "pass"), ("int8", "pass"), ("int4", "pass"), ("nvfp4", "pass"),
    ("bfloat16", "pass"), ("float16", "pass"), ("BF16", "any"), ("fp7", "fail"), ("", "fail"),
    ("int3", "fail"),
    ("fp8_e3m4", "fail"), (None, "fail"), (16, "fail"), (True, "fail"), ([], "fail"), ("[bold]x[/]", "fail"),
    ({"bits": 3.5, "group_size": 128, "scale_bits": 16}, "pass"), ({"bits": 6}, "pass"),
    ({"bits": 1}, "pass"),
    ({"bits": 64}, "pass"), ({"bits": 0}, "fail"), ({"bits": -4}, "fail"), ({"bits": 65}, "fail"),
    ({"bits": Raw(".nan")}, "fail"), ({"bits": "4"}, "fail"), ({"bits": True}, "fail"), ({}, "fail"),
    ({"bits": 4, "group_size": 32}, "fail"), ({"bits": 4, "scale_bits": 8}, "fail"),
    ({"bits": 4, "group_size": 0, "scale_bits": 8}, "fail"),
    ({"bits": 4, "group_size": 1.5, "scale_bits": 8}, "fail"),
    ({"bits": 4, "group_size": 10**12, "scale_bits": 8}, "fail"),
    ({"bits": 4, "group_size": 32, "scale_bits": 0}, "any"),
    ({"bits": 4, "group_size": 32, "scale_bits": -8}, "fail"), ({"bits": 4, "gs": 32}, "fail"),
    ({"rope": "bf16", "rest": "fp8"}, "pass"), ({"rope": "bf16", "rest": {"bits": 4}}, "pass"),
    ({"rope": "bf16", "rest": {"bits": 8, "group_size": 128, "scale_bits": 32}}, "pass"),
    ({"rope": "fp7", "rest": "fp8"}, "fail"), ({"rope": "bf16"}, "any"), ({"rest": "fp8"}, "any"),
    ({"rope": {"rope": "bf16"}, "rest": "fp8"}, "fail"), ({"rope": "bf16", "rest": "fp8", "x": 1}, "fail"),
    ({"rope": "bf16", "bits": 4}, "fail"), ({"rope": None, "rest": "fp8"}, "fail"),
)
QUANTIZATION: tuple[tuple[Any, str], ...] = (
    ("none", "pass"), ("fp8", "pass"), ("fp8_block", "pass"), ("nvfp4", "pass"), ("mxfp4", "pass"),
    (None, "pass"),
    ("int4", "fail"), ("FP8", "fail"), ("", "fail"), (8, "fail"), ({"method": "fp8"}, "fail"),
)
MODELS = ("llama-3-8b", "deepseek-v2-lite", "qwen2.5-7b", "mistral-7b")


@st.composite
def kvdtype_cases(draw) -> Case:
    """One kv.dtype (or quantization) value, in a scenario, by --set or by a --kv-dtype flag."""
    which = draw(st.sampled_from(["kv", "kv", "kv", "quantization"]))
    value, expect = draw(st.sampled_from(KV_DTYPES if which == "kv" else QUANTIZATION))
    model = draw(st.sampled_from(MODELS))
    sc = small_scenario(3, model=model)
    files: dict[str, Any] = {}
    if model == "deepseek-v2-lite" or model == "mistral-7b":
        sc["hardware"] = "h200"
    how = draw(st.sampled_from(["file", "file", "set", "footprint", "hitrate"] if which == "kv" else
                               ["file", "set"]))
    if how == "file":
        sc["kv" if which == "kv" else "quantization"] = {"dtype": value} if which == "kv" else value
        argv = draw(st.sampled_from([run_argv("s.yaml", "--no-plots"), ["validate", "s.yaml"]]))
    elif how == "set":
        text = yaml_scalar_text(value) if not isinstance(value, (dict, list)) else json.dumps(
            value, default=lambda r: r.text)
        key = "kv.dtype" if which == "kv" else "quantization"
        argv = run_argv("s.yaml", "--no-plots", "--set", f"{key}={text}")
        if value is None or value == "":
            expect = "any" if which == "quantization" else expect  # (an empty --set value: YAML null)
    else:
        text = value if isinstance(value, str) else yaml_scalar_text(value) if not isinstance(
            value, (dict, list)) else json.dumps(value, default=lambda r: r.text)
        if how == "footprint":
            argv = ["footprint", model, "--tokens", "1000", "--kv-dtype", text]
        else:
            files["t.jsonl"] = "".join(json.dumps({"timestamp": i * 100, "input_length": 1500,
                                                   "output_length": 8, "hash_ids": [1, 2, 3 + i]}) + "\n"
                                       for i in range(5))
            argv = ["hitrate", "t.jsonl", "--model", model, "--kv-dtype", text, "--capacities", "4,64",
                    "--out", "h"]
        if value is None:
            expect = "any"
    if which == "kv" and isinstance(value,
                                    dict) and ("rope" in value or "rest" in value) and expect == "pass" \
            and model != "deepseek-v2-lite":
        expect = "any"  # a per-part precision on a model without RoPE dims in its KV
    files["s.yaml"] = to_yaml(sc)
    return Case("kvdtype", argv, files, expect=expect, why=f"{which} {how} {value!r} on {model}",
                outputs=("out/summary.json",) if expect == "pass" and argv[0] == "run" else ())


# ---------------------------------------------------------------------------------------------------
# SLO

SLO_SECTIONS: tuple[tuple[Any, str], ...] = (
    ({"ttft_s": {"p99": 2.0}}, "pass"), ({"ttft_s": {"p99": 2.0}, "tpot_s": {"p90": 0.05}}, "pass"),
    ({"e2e_s": {"p50": 1e-9}}, "pass"), ({"queue_s": {"p99.9": 1}}, "pass"),
    ({"ttft_s": {"p100": 1e9}}, "pass"),
    ({"ttft_s": {"p0.001": 1}}, "pass"), (None, "pass"), ({}, "any"),
    ({"ttft_s": {"p99": 0}}, "fail"), ({"ttft_s": {"p99": -1}}, "fail"),
    ({"ttft_s": {"p99": Raw(".nan")}}, "fail"),
    ({"ttft_s": {"p99": 1e10}}, "fail"), ({"ttft_s": {"p99": True}}, "fail"),
    ({"ttft_s": {"p99": "2"}}, "any"),
    ({"ttft_s": {"p99": None}}, "fail"), ({"ttft_s": {"p0": 1}}, "fail"), ({"ttft_s": {"p101": 1}}, "fail"),
    ({"ttft_s": {"99": 1}}, "fail"), ({"ttft_s": {"P99": 1}}, "fail"), ({"ttft_s": {"pnan": 1}}, "fail"),
    ({"ttft_s": {"p99": 1, "p50": 1}}, "fail"), ({"ttft_s": {}}, "fail"), ({"ttft_s": 2}, "fail"),
    ({"ttft_s": [2]}, "fail"), ({"ttft": {"p99": 1}}, "fail"), ({"latency_s": {"p99": 1}}, "fail"),
    ("fast", "fail"), ([{"ttft_s": {"p99": 1}}], "fail"), (5, "fail"), ({"ttft_s": {"p-1": 1}}, "fail"),
    ({"ttft_s": {"p1e2": 1}}, "any"), ({"ttft_s": {"p99": [1, 2]}}, "fail"),
)
SLO_FLAGS: tuple[tuple[str, str], ...] = (
    ("ttft_s.p99=2", "pass"), ("tpot_s.p90=0.05", "pass"), ("e2e_s.p50=30", "pass"),
    ("queue_s.p99.9=1", "pass"),
    ("ttft_s.p99", "fail"), ("ttft_s=2", "fail"), ("foo.p99=1", "fail"), ("ttft_s.p0=1", "fail"),
    ("ttft_s.p99=-1", "fail"), ("ttft_s.p99=nan", "fail"), ("ttft_s.p99=inf", "fail"), (".p99=1", "fail"),
    ("ttft_s.p99=abc", "fail"), ("ttft_s.p99=2=3", "fail"), ("ttft_s.p99=", "fail"), ("=", "fail"),
    ("ttft_s.p99={a: 1}", "fail"), ("ttft_s.p99=[1]", "fail"), ("ttft_s.p99=1e400", "fail"),
)


@st.composite
def slo_cases(draw) -> Case:
    """A scenario's `slo:` and / or `kvsim run --slo` items (one objective per metric on the command
    line; a flag replaces the scenario's objective on its metric)."""
    section, expect = draw(st.sampled_from(SLO_SECTIONS))
    sc = small_scenario(draw(st.sampled_from([3, 6])))
    if section is not None:
        sc["slo"] = section
    argv = run_argv("s.yaml", "--no-plots")
    validate = draw(st.integers(0, 4)) == 0
    flags = [] if validate else draw(st.lists(st.sampled_from(SLO_FLAGS), max_size=2))
    if flags and expect == "fail":
        expect = "any"  # a flag replaces the scenario's objective on its metric (the bad one, maybe)
    for item, verdict in flags:
        argv += ["--slo", item]
        if verdict == "fail":
            expect = "fail"
    metrics = [item.split(".")[0] for item, _ in flags]
    if len(set(metrics)) < len(metrics):
        expect = "fail"  # one percentile per metric
    if draw(st.integers(0, 4)) == 0:  # a fleet: goodput over every replica's requests
        sc["parallelism"] = {"replicas": 2}
    if draw(st.integers(0, 4)) == 0:  # every request refused: the SLO judged on none
        sc["scheduler"] = {"max_model_len": 16}
        expect = "any" if expect == "pass" else expect
    if validate:
        argv = ["validate", "s.yaml"]
    return Case("slo", argv, {"s.yaml": to_yaml(sc)}, expect=expect, why=f"slo {section!r}, --slo "
                f"{[f for f, _ in flags]}", validate_first=argv[0] == "run" and not flags)


# ---------------------------------------------------------------------------------------------------
# Pricing

PRICES: tuple[tuple[Any, str], ...] = (
    (2.5, "pass"), (0, "pass"), (1e6, "pass"), (None, "pass"), ({"h100-sxm": 2.5}, "pass"),
    ({"h100-sxm": 2.5, "h200": 3.5}, "pass"), ({"H100-SXM": 2.5}, "any"), ({"h100-sx": 2.5}, "fail"),
    ({"nope": 1}, "fail"), ({}, "any"), (-1, "fail"), (1e7, "fail"), (Raw(".nan"), "fail"),
    (Raw(".inf"), "fail"),
    (True, "fail"), ("2.5", "any"), ("$2.5", "fail"), ([2.5], "fail"), ({"h100-sxm": -1}, "fail"),
    ({"h100-sxm": "cheap"}, "fail"), ({"h100-sxm": None}, "any"), ({"h100-sxm": {"a": 1}}, "fail"),
    ({"cpu": 0.1}, "any"),
)


@st.composite
def pricing_cases(draw) -> Case:
    """`pricing.usd_per_gpu_hour` (or a bad pricing key) on one replica, a fleet of one profile or pools
    of two profiles."""
    price, expect = draw(st.sampled_from(PRICES))
    sc = small_scenario(3)
    shape = draw(st.sampled_from(["one", "one", "replicas", "pools"]))
    if shape == "replicas":
        sc["parallelism"] = {"replicas": 2, "tensor_parallel_size": draw(st.sampled_from([1, 2]))}
    elif shape == "pools":
        sc["cluster"] = {"pools": [{"hardware": "h100-sxm"}, {"hardware": "h200", "tensor_parallel_size": 2}]}
    sc["pricing"] = {"usd_per_gpu_hour": price}
    if draw(st.integers(0, 5)) == 0:
        sc["pricing"][draw(st.sampled_from(["usd_per_hour", "currency", "usd_per_gpu_hour "]))] = 1
        expect = "fail"
    if draw(st.integers(0, 6)) == 0:
        sc["pricing"] = draw(st.sampled_from([5, "cheap", [1]]))
        expect = "fail"
    if isinstance(price, dict) and "h200" in price and shape != "pools" and expect == "pass":
        expect = "any"  # a price for a profile no GPU of this run uses
    return Case("pricing", run_argv("s.yaml", "--no-plots"), {"s.yaml": to_yaml(sc)}, expect=expect,
                why=f"{shape}: usd_per_gpu_hour {price!r}", validate_first=True,
                outputs=("out/summary.json",) if expect == "pass" else ())
