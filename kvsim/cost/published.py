"""Published measurements kvsim's cost model is checked against (published_runs.yaml beside this file):
vLLM's CI latency tests and throughput tests, and how kvsim computes each case.

A latency case is an analytic sum of roofline steps (`predict_ms`). A throughput case needs the scheduler,
so it is a small simulation; kvsim.cost may not import the engine (docs/architecture.md), so this module
builds the scenarios as plain dicts (`throughput_scenario`) and `predict_req_s` takes the function that
runs one and returns its makespan (tests/cost/test_published_runs.py passes a `Simulation`)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvsim.cost.batch import Batch
from kvsim.cost.kernels import KERNEL_DEFAULTS, KernelCost
from kvsim.cost.roofline import RooflineCost
from kvsim.errors import KvsimError
from kvsim.inputs import load_yaml
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware
from kvsim.specs.kernel_tables import load_kernel_tables

PUBLISHED_RUNS = Path(__file__).with_name("published_runs.yaml")
REPO_ROOT = Path(__file__).resolve().parents[2]
COMMON_KEYS = ("case", "kind", "model", "hardware", "tensor_parallel_size", "source", "definition", "ratio",
               "band", "fitted")
KIND_KEYS = {
    "latency": ("batch_size", "input_len", "output_len", "published_ms", "kvsim_before_ms", "kvsim_ms"),
    "throughput": ("num_prompts", "lengths", "seeds", "engine", "published_req_s", "kvsim_before_req_s",
                   "kvsim_req_s", "kvsim_sd_req_s", "kvsim_min_req_s", "kvsim_max_req_s"),
}
CASE_KEYS = COMMON_KEYS + KIND_KEYS["latency"]
"""The keys of a latency case (kept for callers of the latency-only table)."""
BEFORE_FIT = {"iteration_overhead_s": 0.003, "layer_overhead_s": 0.0, "eager_layer_overhead_s": 0.0,
              "seq_overhead_s": 0.0}
"""The cost overrides that give the model before the overhead terms were fitted (a fixed 3 ms a step)."""


def load_published_runs(path: str | Path = PUBLISHED_RUNS) -> list[dict[str, Any]]:
    """The `cases` of a published-runs file, each with the keys of its kind (KvsimError otherwise)."""
    data = load_yaml(path, "published runs")
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list) or not cases:
        raise KvsimError(f"{path}: needs a non-empty 'cases' list")
    for i, case in enumerate(cases):
        if not isinstance(case, dict) or case.get("kind") not in KIND_KEYS:
            raise KvsimError(f"{path}: cases[{i}].kind: one of {sorted(KIND_KEYS)}")
        missing = [k for k in COMMON_KEYS + KIND_KEYS[case["kind"]] if k not in case]
        if missing:
            raise KvsimError(f"{path}: cases[{i}] has no {missing[0]!r}")
    return cases


def latency_run_s(cost: RooflineCost, batch: int, input_len: int, output_len: int,
                  block_size: int = 16) -> float:
    """vLLM's `benchmark_latency` (one `generate` of `batch` prompts of `input_len` tokens, `output_len`
    tokens each, ignore_eos): one prefill step of batch x input_len tokens, which also samples the first
    token, then output_len - 1 decode steps of `batch` sequences whose context grows by one a step."""
    t = cost.step_time(Batch(num_seqs=batch, prefill_seqs=batch, prefill_tokens=batch * input_len,
                             prefill_attn_pairs=batch * input_len * (input_len + 1) / 2))
    for k in range(1, output_len):
        ctx = input_len + k
        t += cost.step_time(Batch(num_seqs=batch, decode_seqs=batch, decode_context_tokens=batch * ctx,
                                  decode_blocks=batch * -(-ctx // block_size)))
    return t


def predict_ms(case: dict[str, Any], cost_model: str = "roofline", **tunables: float) -> float:
    """kvsim's latency for a latency case, in ms: the roofline (or with cost_model "kernels" the kernel
    model on the device's tables) with its defaults (or `tunables`), bf16 weights and KV (vLLM's dtype
    auto for these checkpoints), blocks of 16 tokens."""
    model, hw = get_model(case["model"]), load_hardware(case["hardware"])
    tp = case["tensor_parallel_size"]
    per_block = 16 * model.kv_bytes_per_token("bf16", tp)
    if cost_model == "kernels":
        cost = KernelCost(model, hw, tp, "bf16", per_block, load_kernel_tables(case["hardware"], lazy=True),
                          **(KERNEL_DEFAULTS | tunables))
    else:
        cost = RooflineCost(model, hw, tp, "bf16", per_block, **tunables)
    return 1e3 * latency_run_s(cost, case["batch_size"], case["input_len"], case["output_len"])


def throughput_scenario(case: dict[str, Any], seed: int, **cost: float) -> dict[str, Any]:
    """The scenario (a dict for `kvsim.scenario.build_scenario`) of one draw of a throughput case:
    vLLM's `benchmark_throughput` (one `LLM.generate` of `num_prompts` ShareGPT prompts, each to its
    conversation's reply length, ignore_eos) as `num_prompts` requests all arriving at t = 0 (a closed
    loop of as many users, one request each), lengths drawn in pairs from the case's `lengths` file with
    `seed`, the engine settings of the case's `engine` (scheduler keys and gpu_memory_utilization), bf16
    weights and KV, blocks of 16 tokens, no prefix caching, the roofline (this file's figures are its own)
    unless `cost` names another model; `cost` overrides the cost model's defaults."""
    n, engine = case["num_prompts"], dict(case["engine"])
    kv = {"block_size": 16, "dtype": "bf16", "prefix_cache": "none",
          "gpu_memory_utilization": engine.pop("gpu_memory_utilization")}
    sc: dict[str, Any] = {
        "model": case["model"], "hardware": case["hardware"],
        "parallelism": {"tensor_parallel_size": case["tensor_parallel_size"]},
        "kv": kv, "scheduler": engine,
        "workload": {"kind": "synthetic", "arrival": {"process": "closed_loop", "users": n},
                     "length_pairs": {"path": str(REPO_ROOT / case["lengths"])}},
        "simulation": {"seed": seed, "requests": n},
    }
    sc["cost"] = {"model": "roofline", **cost}
    return sc


def predict_req_s(case: dict[str, Any], makespan_s: Callable[[dict[str, Any]], float],
                  **cost: float) -> dict[str, float]:
    """kvsim's throughput for a throughput case, in requests per second, as vLLM reports it
    (num_prompts / the whole generate's elapsed time): num_prompts / makespan for each of the seeds
    0 .. seeds - 1 (`makespan_s` runs one scenario of `throughput_scenario`), summarised as their mean,
    sample standard deviation, min and max (the spread of 200-prompt samples, not an error bar)."""
    rates = [case["num_prompts"] / makespan_s(throughput_scenario(case, seed, **cost))
             for seed in range(case["seeds"])]
    return {"mean": statistics.fmean(rates), "sd": statistics.stdev(rates) if len(rates) > 1 else 0.0,
            "min": min(rates), "max": max(rates)}
