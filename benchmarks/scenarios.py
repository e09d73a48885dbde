"""The scenarios of the speed suite (benchmarks/suite.py), in one place.

Each scenario is a scenario file of this repository plus `--set` overrides, with its request count given
here (so `--quick` can divide it by 10). The set is fixed: the same names, files and overrides on every
run, so figures from two runs (or two trees, `suite.py --compare`) measure the same work.

A scenario whose input files are absent (a trace removed from workloads/traces/) is skipped by the suite,
saying which file is missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / "workloads"
TRACES = WORKLOADS / "traces"

QUICK_DIVISOR = 10
"""`--quick` divides every scenario's request count by this."""

# CodeLlama-34B is not in kvsim's built-in catalog (`kvsim models`): an inline spec from the shapes of
# codellama/CodeLlama-34b-hf's config.json (48 layers, hidden 8192, 64 heads, 8 KV heads, FFN 22016,
# vocab 32000, 16,384 positions, bf16), on top of llama-2-70b (same head layout and vocab).
CODELLAMA_34B = {
    "base": "llama-2-70b", "name": "codellama-34b", "num_layers": 48, "hidden_size": 8192,
    "num_attention_heads": 64, "num_kv_heads": 8, "head_dim": 128, "intermediate_size": 22016,
    "vocab_size": 32000, "num_params": 33_743_970_304, "active_params": 33_743_970_304,
    "max_position_embeddings": 16384, "weight_dtype": "bf16",
}


@dataclass(frozen=True)
class BenchScenario:
    name: str
    path: Path
    requests: int
    overrides: tuple[str, ...] = ()
    needs: tuple[Path, ...] = ()
    """Input files (traces in workloads/traces/); the scenario is skipped when one is absent."""
    note: str = ""
    tags: tuple[str, ...] = field(default=())

    def request_count(self, quick: bool = False) -> int:
        return max(1, self.requests // QUICK_DIVISOR) if quick else self.requests

    def all_overrides(self, quick: bool = False) -> list[str]:
        """The `--set` overrides of one run: this scenario's, then its request count."""
        return [*self.overrides, f"simulation.requests={self.request_count(quick)}"]

    def missing(self) -> list[Path]:
        return [p for p in (self.path, *self.needs) if not p.exists()]


SCENARIOS: tuple[BenchScenario, ...] = (
    BenchScenario(
        "azure_conv_codellama34b_tp2", WORKLOADS / "azure_conv_v0_v1.yaml", 19_366,
        (f"model={json.dumps(CODELLAMA_34B)}", "hardware=a100-80gb", "parallelism.tensor_parallel_size=2",
         "kv.prefix_cache=none", "scheduler.policy=vllm_v1", "scheduler.chunked_prefill=true",
         "scheduler.max_num_batched_tokens=8192", "scheduler.max_model_len=16384"),
        needs=(TRACES / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv",),
        note="Azure 2023 conversation trace (19,366 requests), CodeLlama-34B (inline spec) TP2, A100-80GB, "
             "no prefix cache"),
    BenchScenario(
        "chat_hash", WORKLOADS / "chat.yaml", 20_000, ("kv.prefix_cache=hash",),
        note="chat.yaml, vLLM hash prefix cache"),
    BenchScenario(
        "chat_radix", WORKLOADS / "chat.yaml", 20_000, ("kv.prefix_cache=radix",),
        note="chat.yaml, SGLang radix prefix cache"),
    BenchScenario(
        "sparsity_h2o", WORKLOADS / "sparsity_agentic.yaml", 3_000, ("kv.sparsity.policy=h2o",),
        note="sparsity_agentic.yaml, kv.sparsity.policy=h2o"),
    BenchScenario(
        "sparsity_none", WORKLOADS / "sparsity_agentic.yaml", 3_000, ("kv.sparsity.policy=none",),
        note="sparsity_agentic.yaml, kv.sparsity.policy=none (the baseline of sparsity_h2o)"),
    BenchScenario(
        "fleet_chat_8", WORKLOADS / "fleet_chat.yaml", 16_000, (),
        note="fleet_chat.yaml: 8 replicas, prefix_aware router, hash prefix cache"),
    BenchScenario(
        "mooncake_tiers", WORKLOADS / "mooncake_tiers.yaml", 12_031, (),
        needs=(TRACES / "mooncake" / "conversation_trace.jsonl",),
        note="mooncake_tiers.yaml: Mooncake conversation trace, GPU + CPU + SSD tiers"),
    BenchScenario(
        "synthetic_1m", WORKLOADS / "chat.yaml", 1_000_000, ("kv.prefix_cache=none",),
        note="chat.yaml with 1,000,000 requests, no prefix cache"),
)

RATIOS: tuple[tuple[str, str, str], ...] = (
    ("sparsity_h2o", "sparsity_none", "issue 14 target: h2o within 3x of none"),
)
"""(slower, baseline, what it is): pairs whose per-request cost ratio the suite prints."""


def by_name(name: str) -> BenchScenario:
    for sc in SCENARIOS:
        if sc.name == name:
            return sc
    raise KeyError(f"unknown scenario {name!r}; known: {', '.join(s.name for s in SCENARIOS)}")
