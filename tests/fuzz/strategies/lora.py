"""Multi-LoRA (`lora_cases`): every key of the `lora` section (max_loras, max_lora_rank, max_cpu_loras,
base_fraction, disk_bandwidth_gbps, kernel_overhead_s, graph_kernel_overhead_s, adapters as {name, rank,
popularity} and as {count, rank, popularity, zipf_s, prefix}) and vLLM's names for them, on one replica
or a small fleet with the lora_affinity router (under vllm_v1 or vllm_v0: both punica eras), valid and
with one bad value or a combination kvsim does not model."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import Raw, run_argv, small_scenario, to_yaml

LORA_BAD: tuple[tuple[str, Any, str], ...] = (
    ("max_loras", 0, "fail"), ("max_loras", -1, "fail"), ("max_loras", 1.5, "fail"),
    ("max_loras", True, "fail"),
    ("max_loras", 10**6, "fail"), ("max_loras", "4", "any"), ("max_lora_rank", 12, "fail"),
    ("max_lora_rank", 0, "fail"), ("max_lora_rank", 1024, "fail"), ("max_lora_rank", Raw(".nan"), "fail"),
    ("max_cpu_loras", 0, "fail"), ("max_cpu_loras", 10**9, "fail"), ("base_fraction", -0.1, "fail"),
    ("base_fraction", 1.5, "fail"), ("base_fraction", Raw(".nan"), "fail"), ("base_fraction", 1, "pass"),
    ("disk_bandwidth_gbps", 0, "fail"), ("disk_bandwidth_gbps", Raw(".inf"), "fail"),
    ("disk_bandwidth_gbps", 0.01, "pass"), ("kernel_overhead_s", -1, "fail"),
    ("kernel_overhead_s", 0, "pass"),
    ("kernel_overhead_s", Raw(".nan"), "fail"), ("kernel_overhead_s", None, "pass"),
    ("graph_kernel_overhead_s", -1e-6, "fail"), ("graph_kernel_overhead_s", Raw(".inf"), "fail"),
    ("graph_kernel_overhead_s", None, "fail"), ("graph_kernel_overhead_s", 0, "pass"),
    ("enabled", "maybe", "fail"), ("enabled", False, "pass"),
    ("adapters", "all", "fail"), ("adapters", [None], "fail"), ("adapters", [], "pass"),
    ("adapters", [{"name": "a"}, {"name": "a"}], "fail"), ("adapters", [{"name": ""}], "fail"),
    ("adapters", [{"name": "a", "rank": 0}], "fail"), ("adapters", [{"name": "a", "rank": 128}], "fail"),
    ("adapters", [{"name": "a", "popularity": -1}], "fail"),
    ("adapters", [{"name": "a", "popularity": 0}], "any"),
    ("adapters", [{"count": 0}], "fail"), ("adapters", [{"count": 10**6}], "fail"),
    ("adapters", [{"count": 3, "popularity": "pareto"}], "fail"),
    ("adapters", [{"count": 3, "zipf_s": -1}], "fail"),
    ("adapters", [{"count": 2, "prefix": "a"}, {"name": "a1"}], "fail"), ("adapters", [{"rank": 8}], "fail"),
    ("adapters", [{"name": "a", "count": 2}], "fail"), ("rank", 8, "fail"),
)


@st.composite
def lora_cases(draw) -> Case:
    """A scenario with a lora section (chat sessions keep their adapter), valid or with one bad key."""
    sc = small_scenario(draw(st.sampled_from([4, 8])))
    if draw(st.booleans()):
        sc["workload"] = {"kind": "chat", "chat": {"turns": {"dist": "fixed", "value": 2}},
                          "output_len": {"dist": "fixed", "value": 4}}
    max_loras = draw(st.sampled_from([1, 2, 4]))
    lora: dict[str, Any] = {"max_loras": max_loras, "max_lora_rank": draw(st.sampled_from([8, 16, 64]))}
    if draw(st.booleans()):
        lora["max_cpu_loras"] = max_loras + draw(st.integers(0, 3))
    if draw(st.booleans()):
        lora["base_fraction"] = draw(st.sampled_from([0, 0.3, 1]))
    adapters: list[dict[str, Any]] = []
    if draw(st.booleans()):
        adapters.append({"count": draw(st.integers(1, 6)), "rank": 8,
                         "popularity": draw(st.sampled_from(["uniform", "zipf"])),
                         "zipf_s": draw(st.sampled_from([0, 1.0, 3.0]))})
    for i in range(draw(st.integers(0 if adapters else 1, 3))):
        adapters.append({"name": f"ft-{i}", "rank": 8, "popularity": draw(st.sampled_from([0.5, 1, 10]))})
    lora["adapters"] = adapters
    for key, values in (("disk_bandwidth_gbps", [0.5, 7]), ("kernel_overhead_s", [0, 5e-6, 1.1e-4]),
                        ("graph_kernel_overhead_s", [0, 2e-6])):
        if draw(st.booleans()):
            lora[key] = draw(st.sampled_from(values))
    vllm_names = draw(st.booleans())
    if vllm_names:  # vLLM's engine-argument names at the top level
        sc["enable_lora"] = True
        sc["max_loras"] = lora.pop("max_loras")
        sc["max_lora_rank"] = lora.pop("max_lora_rank")
    sc["lora"] = lora
    if draw(st.integers(0, 3)) == 0:
        sc["parallelism"] = {"replicas": 2}
        if draw(st.booleans()):  # the v0 punica era (per-slice kernels, the fitted eager overhead)
            sc["scheduler"] = {**sc.get("scheduler", {}), "policy": "vllm_v0"}
        sc["router"] = {"policy": draw(st.sampled_from(["lora_affinity", "round_robin"]))}
    expect, how = "pass", "valid"
    mistake = draw(st.sampled_from([None, None, "key", "key", "shape"]))
    if mistake == "key":
        key, value, expect = draw(st.sampled_from(LORA_BAD))
        sc.pop("max_loras", None) if key == "max_loras" else None
        sc.pop("max_lora_rank", None) if key in ("max_lora_rank", "adapters") else None
        lora[key] = value
        how = f"lora.{key}: {value!r}"
    elif mistake == "shape":
        how = draw(st.sampled_from(["cpu-below-slots", "mla", "moe", "pd", "contiguous", "sparsity",
                                    "both-names", "trace-unknown"]))
        expect = "fail"
        if how == "cpu-below-slots":
            sc.pop("max_loras", None)
            lora["max_loras"], lora["max_cpu_loras"] = 4, 2
        elif how == "mla":
            sc["model"], sc["hardware"] = "deepseek-v2-lite", "h200"
        elif how == "moe":
            sc["model"], sc["hardware"] = "gpt-oss-20b", "h200"
        elif how == "pd":
            sc.pop("parallelism", None)
            sc.pop("router", None)
            sc["cluster"] = {"pools": [{"role": "prefill"}, {"role": "decode"}]}
        elif how == "contiguous":
            sc["kv"] = {"layout": "contiguous:max"}
        elif how == "sparsity":
            sc["kv"] = {"sparsity": {"policy": "h2o"}}
        elif how == "both-names":
            sc["max_loras"] = 3
            lora["max_loras"] = 2
        else:
            lora["adapters"] = [{"name": "a"}]
            sc["workload"] = {"kind": "trace", "trace": {"path": "t.csv", "format": "columns", "columns": {
                "arrival": "t", "prompt": "p", "output": "o", "adapter": "m"}}}
            return Case("lora", run_argv("s.yaml", "--no-plots"),
                        {"s.yaml": to_yaml(sc), "t.csv": "t,p,o,m\n0,10,2,a\n1,10,2,zz\n"}, expect="fail",
                        why=how, validate_first=False)
    return Case("lora", run_argv("s.yaml", "--no-plots"), {"s.yaml": to_yaml(sc)}, expect=expect, why=how,
                validate_first=True, outputs=("out/summary.json",) if expect == "pass" else ())
