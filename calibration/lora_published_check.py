"""The published multi-LoRA case of docs/lora.md: vLLM PR #11267 (benchmark_throughput with LoRA, one
A100, Llama-2-7b-hf, 1000 ShareGPT prompts): 11.45 req/s without LoRA, 7.60 with --enable-lora
--max-loras 1 --max-lora-rank 8 (one adapter), 7.61 with --max-loras 4 (four). kvsim runs the same offline
throughput scenario (kvsim/cost/published.py throughput_scenario: every prompt at t = 0, vLLM V0's engine
defaults of the time) without and with the lora section and prints req/s and the LoRA slowdown for each
seed, then their means: `.venv/bin/python calibration/lora_published_check.py [seeds] [kernel_overhead_s]
[cost model]` (roofline, the published runs' model, by default; `kernels` reads a100-80gb's kernel tables)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvsim.cost.published import throughput_scenario  # noqa: E402
from kvsim.engine.simulation import Simulation  # noqa: E402
from kvsim.scenario import build_scenario  # noqa: E402

PUBLISHED = {"base": 11.45, "lora1": 7.60, "lora4": 7.61}
SOURCE = ("vllm-project/vllm pull request #11267 ('[misc] benchmark_throughput : Add LoRA', 2024-12-17), "
          "1xA100, meta-llama/Llama-2-7b-hf, ShareGPT_V3, --num-prompts 1000, adapter "
          "yard1/llama-2-7b-sql-lora-test")
CASE = {
    "model": "llama-2-7b", "hardware": "a100-80gb", "tensor_parallel_size": 1, "num_prompts": 1000,
    # vLLM 0.6 offline defaults for a 4096-token model: V0, no chunked prefill, max_num_batched_tokens
    # max(max_model_len, 2048)
    "engine": {"policy": "vllm_v0", "chunked_prefill": False, "max_num_seqs": 256,
               "max_num_batched_tokens": 4096, "gpu_memory_utilization": 0.9},
    # ShareGPT V3 by vLLM's 2023 benchmark rule (OPT's byte-level BPE; Llama-2's tokenizer counts a few
    # percent more tokens)
    "lengths": "workloads/lengths/sharegpt_v3_vllm_bench.csv",
}


def req_s(seed: int, lora: dict | None, model: str = "roofline") -> float:
    sc = throughput_scenario(CASE, seed, model=model)
    if lora is not None:
        sc["lora"] = lora
    requests = Simulation(build_scenario(sc)).run().requests
    return len(requests) / float(requests["finish_s"].max() - requests["arrival_s"].min())


def main() -> None:
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    overhead = float(sys.argv[2]) if len(sys.argv) > 2 else 2e-6
    model = sys.argv[3] if len(sys.argv) > 3 else "roofline"
    variants = {"base": None,
                "lora1": {"max_loras": 1, "max_lora_rank": 8, "kernel_overhead_s": overhead,
                          "adapters": [{"name": "sql", "rank": 8}]},
                "lora4": {"max_loras": 4, "max_lora_rank": 8, "kernel_overhead_s": overhead,
                          "adapters": [{"count": 4, "rank": 8}]}}
    rows = {k: [req_s(s, v, model) for s in range(seeds)] for k, v in variants.items()}
    print(f"source: {SOURCE}")
    print(f"cost model {model}, kernel_overhead_s {overhead:g}, {seeds} seeds")
    print("| run | published req/s | kvsim req/s (mean of seeds) | error | slowdown: published | kvsim |")
    print("|---|---|---|---|---|---|")
    for k, rates in rows.items():
        m = statistics.fmean(rates)
        pub_slow = PUBLISHED[k] / PUBLISHED["base"] - 1
        slow = statistics.fmean(r / b for r, b in zip(rates, rows["base"], strict=True)) - 1
        print(f"| {k} | {PUBLISHED[k]:.2f} | {m:.2f} | {m / PUBLISHED[k] - 1:+.1%} | {pub_slow:+.1%} | "
              f"{slow:+.1%} |")


if __name__ == "__main__":
    main()
