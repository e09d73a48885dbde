"""Issue 26's features for the stress draw (stress_configs.py): speculative decoding (docs/speculative.md),
multi-LoRA (docs/lora.md) and MoE expert parallelism (docs/moe.md). Each is picked from its own stream
(`random.Random(seed + offset)`), so a configuration without them is drawn exactly as before, and each
edits the drawn scenario into one the docs say is modelled:

- speculative: a single replica or replicas (no P/D pools), vLLM V1's scheduler, n = beam = 1, no
  sparsity, a target of full or MLA attention, no `lora` section;
- lora: no P/D pools, no sparsity, a dense model without MLA / state / compressed layers (no MoE;
  sliding-window layers are taken);
- expert parallelism: an MoE model (gpt-oss-20b: 32 experts, deepseek-v2-lite: 64) whose experts split
  evenly over EP = DP (2 or 4), no P/D pools, the default cost model.

Speculative decoding and LoRA are never drawn together (refused); expert parallelism may come with
speculative decoding (deepseek-v2-lite, MLA)."""

from __future__ import annotations

import random
from typing import Any

SPEC_SHARE = 0.28
LORA_SHARE = 0.38
EP_SHARE = 0.25
"""Chances of picking each feature; the shares of all draws end lower (P/D shapes and the exclusion of
speculative + LoRA leave some out): about 20 % each (tests/stress/test_stress.py)."""

SPEC_MODELS = ("llama-3-8b", "qwen2.5-7b", "llama-3.1-8b", "deepseek-v2-lite")
"""Targets speculative decoding models (full or MLA attention)."""
LORA_MODELS = ("llama-3-8b", "qwen2.5-7b", "llama-3.1-8b", "mistral-7b", "gemma-2-9b", "stress-sliding")
"""Dense models LoRA slots are sized for (sliding window included)."""
STATE_MODELS = ("nemotron-h-8b", "deepseek-v4-flash", "stress-hybrid")
"""Models with state / compressed layers none of the three features takes: kept as drawn (not replaced,
so the draws still cover them)."""
EP_MODELS = ("gpt-oss-20b", "deepseek-v2-lite")
BACKENDS = ("allgather_reducescatter", "naive", "deepep_high_throughput", "deepep_low_latency", "pplx")
DRAFT = {
    "name": "stress-draft", "num_layers": 2, "hidden_size": 1024, "num_attention_heads": 8,
    "num_kv_heads": 2, "num_params": 2.0e8,
}
"""A small full-attention draft model (method draft_model)."""


def _set_model(sc: dict[str, Any], model: str) -> None:
    """Replace the drawn model, and what the old one brought: DeepSeek-V4's TP 4, a 32-token block (the
    layer-group models take 16), a radix cache (one full-attention group only)."""
    sc["model"] = model
    par = sc.get("parallelism", {})
    par.pop("tensor_parallel_size", None)
    if not par:
        sc.pop("parallelism", None)
    if model in ("deepseek-v2-lite", "gpt-oss-20b", "mistral-7b", "gemma-2-9b"):
        sc["kv"]["block_size"] = 16
        if sc["kv"]["prefix_cache"] == "radix":
            sc["kv"]["prefix_cache"] = "hash"
        if sc["kv"].get("tiers"):  # (tiers take one full-attention group)
            for k in [k for k in sc["kv"] if k.startswith("tier")]:
                del sc["kv"][k]


def _single_sampling(sc: dict[str, Any]) -> None:
    sc["workload"].pop("n", None)
    sc["workload"].pop("beam_width", None)
    sc["kv"].pop("sparsity", None)


def speculative(r: random.Random, sc: dict[str, Any], moe: bool) -> str:
    """Add a `speculative` section (and what it needs); the method drawn. moe: the target must stay an
    MoE model (expert parallelism): deepseek-v2-lite."""
    models = ("deepseek-v2-lite",) if moe else SPEC_MODELS
    if sc["model"] not in models:
        _set_model(sc, r.choice(models))
    _single_sampling(sc)
    if not sc["kv"].get("tiers"):  # (tiers keep the hash cache; radix takes one full-attention group)
        sc["kv"]["prefix_cache"] = r.choice(["none", "hash"] if sc["model"] == "deepseek-v2-lite"
                                            else ["none", "hash", "radix"])
    sc["scheduler"]["policy"] = "vllm_v1"
    sc["scheduler"].pop("chunked_prefill", None)
    method = r.choice(["ngram", "eagle", "eagle3", "draft_model"])
    k = r.randint(1, 5)
    form = r.choice(["list", "rate", "length"])
    if form == "list":
        acc: Any = [round(r.uniform(0, 1), 3) for _ in range(k)]
    elif form == "rate":
        acc = round(r.uniform(0, 1), 3)
    else:
        acc = {"mean_acceptance_length": round(r.uniform(1, k + 1), 3)}
    spec: dict[str, Any] = {"method": method, "num_speculative_tokens": k, "acceptance": acc}
    if method == "draft_model":
        spec["model"] = dict(DRAFT)
    if r.random() < 0.3:
        spec["draft_overhead_s"] = r.choice([0.0, 1e-4, 1e-3])
    sc["speculative"] = spec
    return f"{method}:k{k}:{form}"


def lora(r: random.Random, sc: dict[str, Any], replicas: int) -> str:
    """Add a `lora` section (a few adapters, 1-4 slots); with several replicas mostly the lora_affinity
    router. The label: slots and adapters."""
    model = sc["model"] if isinstance(sc["model"], str) else sc["model"]["name"]
    if model not in LORA_MODELS:
        _set_model(sc, r.choice(LORA_MODELS[:-1]))
    sc["kv"].pop("sparsity", None)
    max_loras = r.randint(1, 4)
    max_rank = r.choice([8, 16, 32, 64])
    ranks = [x for x in (1, 8, 16, 32, 64) if x <= max_rank]
    adapters: list[dict[str, Any]] = [{"name": f"a{i}", "rank": r.choice(ranks),
                                       "popularity": round(r.uniform(0, 5), 2)}
                                      for i in range(r.randint(0, 3))]
    if not adapters or r.random() < 0.5:
        adapters.append({"count": r.randint(1, 8), "rank": r.choice(ranks),
                         "popularity": r.choice(["uniform", "zipf"]),
                         "zipf_s": round(r.uniform(0.5, 1.5), 2)})
    n = sum(a.get("count", 1) for a in adapters)
    sec: dict[str, Any] = {"max_loras": max_loras, "max_lora_rank": max_rank, "adapters": adapters,
                           "base_fraction": r.choice([0.0, 0.1, 0.5])}
    if r.random() < 0.5:
        sec["max_cpu_loras"] = r.randint(max_loras, max_loras + 4)
    if r.random() < 0.3:
        sec["disk_bandwidth_gbps"] = r.choice([0.5, 2, 10])
    sc["lora"] = sec
    if replicas > 1 and r.random() < 0.7:
        sc["router"]["policy"] = "lora_affinity"
    return f"slots{max_loras}:adapters{n}"


def expert_parallel(r: random.Random, sc: dict[str, Any]) -> tuple[str, int]:
    """Turn the deployment into DP 2 or 4 ranks with expert parallelism over an MoE model (replacing
    `replicas`); (label, replicas)."""
    if sc["model"] not in EP_MODELS:
        _set_model(sc, r.choice(EP_MODELS))
    sc["kv"].pop("sparsity", None)
    dp = r.choice([2, 4])
    par = sc.setdefault("parallelism", {})
    par.pop("replicas", None)
    par.update(data_parallel_size=dp, enable_expert_parallel=True)
    if r.random() < 0.7:
        par["all2all_backend"] = r.choice(BACKENDS)
    if r.random() < 0.5:
        par["expert_load_factor"] = round(r.uniform(1, dp), 2)
    if r.random() < 0.2:
        par["expert_parallel_size"] = dp
    sc.setdefault("router", {"policy": r.choice(["round_robin", "least_loaded", "power_of_two"])})
    if r.random() < 0.3:
        sc["cost"] = {"model": r.choice(["roofline", "kernels"])}
    return f"dp{dp}:{par.get('all2all_backend', 'default')}", dp


def apply(seed: int, sc: dict[str, Any], labels: dict[str, Any]) -> None:
    """Pick and add the features of `seed` to the drawn scenario (not with P/D pools, nor to STATE_MODELS);
    labels gain `speculative`, `lora`, `ep` ('-' when not drawn) and the sampling / model / cache they
    changed."""
    picks = random.Random(seed + 0x26)
    spec_on = picks.random() < SPEC_SHARE
    lora_on = picks.random() < LORA_SHARE
    ep_on = picks.random() < EP_SHARE
    labels.update(speculative="-", lora="-", ep="-")
    if labels["shape"] == "pd" or labels["model"] in STATE_MODELS:
        return
    if ep_on:
        lora_on = False  # (LoRA is not sized for MoE models)
    elif spec_on and lora_on:
        lora_on = picks.random() < 0.5
        spec_on = not lora_on
    r = random.Random(seed + 0x2626)
    if ep_on:
        labels["ep"], labels["replicas"] = expert_parallel(r, sc)
        labels["shape"] = "ep"
    if spec_on:
        labels["speculative"] = speculative(r, sc, ep_on)
        labels["sampling"], labels["policy"] = "single", "vllm_v1"
    if lora_on:
        labels["lora"] = lora(r, sc, labels["replicas"])
        labels["sampling"] = "n" if "n" in sc["workload"] else \
            "beam" if "beam_width" in sc["workload"] else "single"
    labels["model"] = sc["model"] if isinstance(sc["model"], str) else sc["model"]["name"]
    labels["cache"] = sc["kv"]["prefix_cache"]
    labels["sparsity"] = sc["kv"]["sparsity"]["policy"] if "sparsity" in sc["kv"] else "-"
    labels["tiers"] = "+".join(t["medium"] + ("(shared)" if t.get("shared") else "")
                               for t in sc["kv"].get("tiers", [])) or "-"
