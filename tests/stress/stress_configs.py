"""Seeded random configurations for the stress check: small scenarios that must run in check mode
(`kv.check_invariants: true`) with every figure consistent. One seed gives one scenario, always the same.

Each draw picks a shape (one replica, several mixed replicas behind a router, or prefill / decode pools
with a KV link), a workload (synthetic, chat, rag, agentic, or the head of a shipped trace), a model
(full attention, sliding-window, hybrid with Mamba layers, MLA, DeepSeek-V4 compressed, or an inline
`layer_types` model), a prefix cache (none / hash / radix), sampling (n, beam), a preemption mode and
scheduler policy, KV tiers (cpu / ssd / remote, shared remote in fleets; small capacities), sparsity, and
a small KV pool that forces preemption, and issue 26's speculative decoding, multi-LoRA and expert
parallelism (stress_features.py: about a fifth of the draws each). Combinations the engine refuses by
design (docs/tiers.md, docs/fleet.md, docs/layer_groups.md: tiers need the hash cache and one layer
group, P/D needs one group and n = 1, ...) are not drawn; a draw `kvsim.load` still refuses is redrawn
(`draw_valid`)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import stress_features

ROOT = Path(__file__).resolve().parents[2]
TRACES = {
    "azure": ROOT / "workloads" / "traces" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv",
    "mooncake": ROOT / "workloads" / "traces" / "mooncake" / "conversation_trace.jsonl",
}

FULL_MODELS = ("llama-3-8b", "qwen2.5-7b", "llama-3.1-8b")
"""One full-attention layer group: what tiers and P/D take."""
GROUP_MODELS = ("mistral-7b", "gemma-2-9b", "gpt-oss-20b", "nemotron-h-8b", "deepseek-v2-lite",
                "deepseek-v4-flash")
"""Sliding window, hybrid sliding, hybrid Mamba, MLA, DeepSeek-V4 compressed."""
INLINE_HYBRID = {
    "name": "stress-hybrid", "num_layers": 4, "hidden_size": 2048, "num_attention_heads": 16,
    "num_kv_heads": 4, "num_params": 1.0e9, "sliding_window": 256,
    "layer_types": ["state", "sliding", "state", "full"], "ssm_kind": "mamba2", "ssm_num_heads": 32,
    "ssm_head_dim": 64, "ssm_state_size": 64, "ssm_groups": 4, "ssm_conv_kernel": 4,
}
INLINE_SLIDING = {
    "name": "stress-sliding", "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
    "num_kv_heads": 2, "num_params": 5.0e8, "sliding_window": 128,
    "layer_types": ["sliding", "full", "sliding", "full"],
}
_POOLS = {"trace:mooncake": [700, 1000, 1500, 4000], "trace:azure": [150, 300, 600, 1500],
          "*": [40, 80, 160, 320, 1500]}
"""KV blocks of a replica's pool by workload: small enough that most runs preempt (Mooncake's prompts are
about 10k tokens; a request longer than the pool is refused, which is drawn too)."""
ROUTERS = ("round_robin", "least_loaded", "power_of_two", "prefix_aware", "random", "session_affinity",
           "store_aware")
SPARSITY = ("streaming", "h2o", "snapkv", "scissorhands", "pyramidkv", "infinigen")


def _lengths(r: random.Random, top: int) -> dict[str, Any]:
    if r.random() < 0.3:
        return {"dist": "uniform", "low": 1, "high": r.randint(2, top)}
    mean = r.randint(max(2, top // 8), max(3, top // 2))
    return {"dist": "lognormal", "mean": mean, "p50": round(mean * r.uniform(0.4, 0.9), 2), "max": top}


def _workload(r: random.Random, requests: int, reuse: bool) -> tuple[dict[str, Any], str]:
    """reuse: mostly workloads whose prompts share prefixes (what tiers serve)."""
    kinds = ["chat", "rag", "rag", "agentic", "trace", "synthetic"] if reuse else \
        ["synthetic", "synthetic", "chat", "rag", "agentic", "trace"]
    kind = r.choice(kinds)
    rate = round(r.uniform(5, 120), 2)
    wl: dict[str, Any] = {"kind": kind, "output_len": _lengths(r, r.choice([32, 128, 512]))}
    if kind != "trace":
        wl["arrival"] = {"process": r.choice(["poisson", "gamma", "fixed"]), "rate": rate}
        if wl["arrival"]["process"] == "gamma":
            wl["arrival"]["cv"] = round(r.uniform(0.5, 3), 2)
    if kind == "synthetic":
        wl["prompt_len"] = _lengths(r, r.choice([256, 1024, 2048]))
    elif kind == "chat":
        wl["chat"] = {"system_prompts": r.randint(1, 3), "system_prompt_len": _lengths(r, 256),
                      "turns": {"dist": "uniform", "low": 1, "high": r.randint(1, 4)},
                      "user_turn_len": _lengths(r, 256), "think_time_s": round(r.uniform(0, 2), 2),
                      "max_context": 4096}
    elif kind == "rag":
        wl["rag"] = {"passages": r.randint(5, 60), "passage_len": _lengths(r, 256), "top_k": r.randint(1, 4),
                     "question_len": _lengths(r, 64)}
    elif kind == "agentic":
        wl["agentic"] = {"scaffolds": r.randint(1, 2), "scaffold_len": _lengths(r, 512),
                         "task_len": _lengths(r, 128), "steps": {"dist": "uniform", "low": 1,
                                                                "high": r.randint(1, 4)},
                         "tool_output_len": _lengths(r, 256), "tool_time_s": round(r.uniform(0, 1), 2),
                         "fork_prob": round(r.uniform(0, 0.3), 2), "max_context": 4096}
    else:
        fmt = r.choice(["mooncake"] if reuse else ["azure", "mooncake"])
        wl["trace"] = {"path": str(TRACES[fmt]), "format": fmt, "limit": requests,
                       "time_scale": round(r.uniform(0.02, 1), 3)}
        kind = f"trace:{fmt}"
    return wl, kind


def _tiers(r: random.Random, bytes_hint: float, fleet: bool) -> list[dict[str, Any]]:
    """One to three tiers, each holding between a few dozen and a few thousand blocks (bytes_hint: about
    one block's bytes, generously rounded up, so no tier is smaller than a block)."""
    media = r.choice([["cpu"], ["cpu"], ["cpu", "ssd"], ["remote"], ["cpu", "remote"],
                      ["cpu", "ssd", "remote"], ["ssd"]])
    out = []
    for m in media:
        blocks = r.choice([40, 200, 1000, 4000])
        t: dict[str, Any] = {"medium": m, "capacity_gb": round(blocks * bytes_hint / 1e9, 4),
                             "eviction": r.choice(["lru", "lfu", "fifo", "arc", "s3fifo"])}
        if m == "remote":
            t["bandwidth_gbps"] = r.choice([5, 25, 100])
            t["latency_s"] = r.choice([0.0, 1e-4, 1e-3])
            if fleet and r.random() < 0.5:
                t["shared"] = True
        out.append(t)
    return out


def draw(seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scenario mapping, labels): the configuration of `seed` and what was drawn, for the report."""
    r = random.Random(seed)
    shape = r.choice(["single", "single", "single", "replicas", "pd"])
    requests = r.randint(30, 100)
    # token sparsity wants one full-attention sequence per request and no prefix cache
    sparse_pick = shape == "single" and random.Random(seed + 0x5EED).random() < 0.3
    tiers_on = r.random() < 0.45 and not sparse_pick
    wl, kind = _workload(r, requests, tiers_on)
    model: Any
    if tiers_on or shape == "pd" or sparse_pick:
        model = r.choice(FULL_MODELS)
    else:
        model = r.choice([*FULL_MODELS, *GROUP_MODELS, "inline-hybrid", "inline-sliding"])
        model = {"inline-hybrid": INLINE_HYBRID, "inline-sliding": INLINE_SLIDING}.get(model, model)
    grouped = not (isinstance(model, str) and model in FULL_MODELS)
    # (the radix cache is one layer group's; per-sequence states do not fork for n / beam)
    stateful = model in ("nemotron-h-8b", "deepseek-v4-flash") or model is INLINE_HYBRID
    caches = ["none"] if stateful else ["none", "hash"] if grouped else ["none", "hash", "radix"]
    cache = "hash" if tiers_on else r.choice(caches)
    cache = "none" if sparse_pick else cache
    block_size = r.choice([16, 16, 32]) if not grouped else 16
    sampling = "single" if shape == "pd" or stateful else r.choice(["single", "single", "n", "beam"])
    sampling = "single" if sparse_pick else sampling
    if sampling == "n":
        wl["n"] = r.randint(2, 3)
    elif sampling == "beam":
        wl["beam_width"] = r.randint(2, 3)
    kv: dict[str, Any] = {"block_size": block_size, "prefix_cache": cache, "check_invariants": True,
                          "num_gpu_blocks_override": r.choice(_POOLS.get(kind, _POOLS["*"]))}
    sched: dict[str, Any] = {"max_num_seqs": r.choice([16, 64, 256]),
                             "max_num_batched_tokens": r.choice([2048, 4096, 8192]),
                             "preemption_mode": r.choice(["recompute", "swap"]),
                             "policy": r.choice(["vllm_v1", "vllm_v1", "vllm_v0", "sarathi", "orca"])}
    if sched["policy"] == "vllm_v0":
        sched["chunked_prefill"] = False
    if tiers_on:
        kv["tiers"] = _tiers(r, 4.5e6 * block_size / 16, shape != "single")
        kv["tier_placement"] = r.choice(["exclusive", "inclusive"])
        kv["tier_store"] = r.choice(["write_back", "write_through"])
        kv["tier_load"] = r.choice(["blocking", "pipelined"])
        if r.random() < 0.3:
            kv["tier_chunk_tokens"] = block_size * r.choice([1, 2, 4])
        if r.random() < 0.2:
            kv["tier_store_min_uses"] = 2
    sparse = sparse_pick or (shape == "single" and sampling == "single" and not tiers_on and not grouped
                             and cache == "none" and r.random() < 0.25)
    if sparse:
        kv["sparsity"] = {"policy": r.choice(SPARSITY), "budget_tokens": r.choice([64, 256, 1024])}
    sc: dict[str, Any] = {"name": f"stress-{seed}", "model": model,
                          "hardware": r.choice(["h100-sxm", "h200"]), "kv": kv, "scheduler": sched,
                          "workload": wl,
                          "simulation": {"seed": seed, "requests": requests}}
    if r.random() < 0.3:
        sc["slo"] = {"ttft_s": {"p90": round(r.uniform(0.05, 2), 3)}, "tpot_s": {"p99": 0.05}}
    replicas = 1
    if model == "deepseek-v4-flash":  # (its weights need 4 GPUs)
        sc["parallelism"] = {"tensor_parallel_size": 4}
    if shape == "replicas":
        replicas = r.randint(2, 3)
        sc.setdefault("parallelism", {})["replicas"] = replicas
        sc["router"] = {"policy": r.choice(ROUTERS)}
    elif shape == "pd":
        n_pre, n_dec = r.randint(1, 2), r.randint(1, 2)
        replicas = n_pre + n_dec
        sc["cluster"] = {"pools": [{"name": "p", "role": "prefill", "data_parallel_size": n_pre},
                                   {"name": "d", "role": "decode", "data_parallel_size": n_dec}],
                         "kv_transfer": {"mode": r.choice(["after_prefill", "layerwise"])}}
        sc["router"] = {"policy": r.choice(["round_robin", "least_loaded", "prefix_aware"]),
                        "decode_policy": r.choice(["round_robin", "least_loaded"])}
    labels = {"seed": seed, "shape": shape, "replicas": replicas, "workload": kind, "requests": requests,
              "model": model if isinstance(model, str) else model["name"], "cache": cache,
              "sampling": sampling, "preemption": sched["preemption_mode"], "policy": sched["policy"],
              "tiers": "+".join(t["medium"] + ("(shared)" if t.get("shared") else "")
                                for t in kv.get("tiers", [])) or "-",
              "sparsity": kv["sparsity"]["policy"] if sparse else "-",
              "blocks": kv["num_gpu_blocks_override"]}
    stress_features.apply(seed, sc, labels)
    return sc, labels


def draw_valid(seed: int, tries: int = 20) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The first draw from seed, seed + 10^6, ... that kvsim accepts (the scenario loads and its deployment
    builds): (scenario, labels, redraws)."""
    import kvsim
    from kvsim.engine.simulation import Simulation

    last = None
    for i in range(tries):
        sc, labels = draw(seed + i * 1_000_000)
        try:
            Simulation(kvsim.load(sc))
        except kvsim.KvsimError as e:
            last = e
            continue
        return sc, labels, i
    raise RuntimeError(f"seed {seed}: no valid draw in {tries} tries (last: {last})")
