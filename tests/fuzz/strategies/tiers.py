"""KV tiers (`tier_cases`): every key of a `kv.tiers` entry (medium cpu / ssd / remote, capacity_gb,
bandwidth_gbps, latency_s, eviction, shared) and the chain's own keys (tier_placement, tier_store,
tier_load, tier_chunk_tokens, tier_store_min_uses), on one replica or a small fleet, valid and with one
bad value or a bad chain (order, duplicates, no hash prefix cache, a layer-group model, swap)."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import Raw, run_argv, small_scenario, to_yaml

EVICTIONS = ("lru", "lfu", "fifo", "arc", "s3fifo")

TIER_BAD: tuple[tuple[str, Any, str], ...] = (
    ("medium", "tape", "fail"), ("medium", "CPU", "fail"), ("medium", None, "fail"), ("medium", 1, "fail"),
    ("capacity_gb", -1, "fail"), ("capacity_gb", Raw(".nan"), "fail"), ("capacity_gb", Raw(".inf"), "fail"),
    ("capacity_gb", "64", "any"), ("capacity_gb", True, "fail"), ("capacity_gb", 1e10, "fail"),
    ("capacity_gb", 1e-9, "any"), ("capacity_gb", 0, "any"), ("capacity_gb", 1e6, "any"),
    ("bandwidth_gbps", 0, "fail"), ("bandwidth_gbps", 1e-300, "fail"), ("bandwidth_gbps", -5, "fail"),
    ("bandwidth_gbps", 1e7, "fail"), ("bandwidth_gbps", Raw(".nan"), "fail"), ("bandwidth_gbps", "x", "fail"),
    ("latency_s", -1, "fail"), ("latency_s", 1e10, "fail"), ("latency_s", Raw(".inf"), "fail"),
    ("latency_s", [0.1], "fail"), ("eviction", "random", "fail"), ("eviction", "LRU", "fail"),
    ("eviction", "length", "fail"), ("shared", "yes", "any"), ("shared", 2, "fail"), ("size_gb", 4, "fail"),
    ("bandwidth", 4, "fail"),
)
CHAIN_BAD: tuple[tuple[str, Any, str], ...] = (
    ("tier_placement", "both", "fail"), ("tier_store", "write_around", "fail"), ("tier_load", "lazy", "fail"),
    ("tier_chunk_tokens", 0, "fail"), ("tier_chunk_tokens", 24, "fail"), ("tier_chunk_tokens", 1.5, "fail"),
    ("tier_chunk_tokens", 10**10, "fail"), ("tier_chunk_tokens", 256, "any"),
    ("tier_store_min_uses", 0, "fail"), ("tier_store_min_uses", 10**7, "fail"),
    ("tier_store_min_uses", True, "fail"), ("tiers", {"medium": "cpu", "capacity_gb": 4}, "fail"),
    ("tiers", "cpu", "fail"), ("tiers", [None], "fail"), ("tiers", [], "pass"),
)


@st.composite
def tier_chain(draw) -> list[dict[str, Any]]:
    """cpu, ssd and remote tiers (a subset, top down), each with some of its optional keys."""
    media = draw(st.lists(st.sampled_from(["cpu", "ssd", "remote"]), min_size=1, max_size=3, unique=True))
    chain = []
    for medium in sorted(media, key=["cpu", "ssd", "remote"].index):
        tier: dict[str, Any] = {"medium": medium, "capacity_gb": draw(st.sampled_from([0.05, 1, 4, 64]))}
        if draw(st.booleans()):
            tier["eviction"] = draw(st.sampled_from(EVICTIONS))
        if medium == "remote" or draw(st.booleans()):  # (a remote tier needs it)
            tier["bandwidth_gbps"] = draw(st.sampled_from([0.001, 0.5, 25, 1e6]))
        if draw(st.booleans()):
            tier["latency_s"] = draw(st.sampled_from([0, 1e-4, 0.01, 2]))
        if medium == "remote" and draw(st.booleans()):
            tier["shared"] = draw(st.booleans())
        chain.append(tier)
    return chain


@st.composite
def tier_cases(draw) -> Case:
    """A scenario with KV tiers (and prefix reuse, so they are used), valid or with one bad key."""
    sc = small_scenario(draw(st.sampled_from([4, 6])))
    sc["workload"] = draw(st.sampled_from([
        {"kind": "chat", "chat": {"turns": {"dist": "fixed", "value": 2}},
         "output_len": {"dist": "fixed", "value": 4}},
        {"kind": "rag", "rag": {"passages": 4, "top_k": 1}, "output_len": {"dist": "fixed", "value": 4}},
        {"kind": "synthetic", "prompt_len": {"dist": "fixed", "value": 64},
         "output_len": {"dist": "fixed", "value": 4}, "n": 2}]))
    if sc["workload"].get("n"):
        sc["scheduler"] = {"max_num_seqs": 8}
    kv: dict[str, Any] = {"prefix_cache": "hash", "tiers": draw(tier_chain())}
    kv["num_gpu_blocks_override"] = draw(st.sampled_from([None, 64, 2000]))
    for key, values in (("tier_placement", ["exclusive", "inclusive"]),
                        ("tier_store", ["write_back", "write_through"]),
                        ("tier_load", ["blocking", "pipelined"]),
                        ("tier_chunk_tokens", [16, 32, 256]), ("tier_store_min_uses", [1, 2])):
        if draw(st.booleans()):
            kv[key] = draw(st.sampled_from(values))
    sc["kv"] = {k: v for k, v in kv.items() if v is not None}
    if draw(st.integers(0, 3)) == 0:  # a small fleet with the same tiers on every replica
        sc["parallelism"] = {"replicas": 2}
        sc["router"] = {"policy": draw(st.sampled_from(["prefix_aware", "store_aware", "round_robin"]))}
    if draw(st.integers(0, 5)) == 0:
        sc["scheduler"] = {**sc.get("scheduler", {}), "preemption_mode": "swap"}
    expect, how = "pass", "valid"
    mistake = draw(st.sampled_from([None, None, "tier", "tier", "chain", "shape"]))
    if mistake == "tier":
        key, value, expect = draw(st.sampled_from(TIER_BAD))
        sc["kv"]["tiers"][draw(st.integers(0, len(sc["kv"]["tiers"]) - 1))][key] = value
        how = f"tier {key}: {value!r}"
    elif mistake == "chain":
        key, value, expect = draw(st.sampled_from(CHAIN_BAD))
        sc["kv"][key] = value
        how = f"kv.{key}: {value!r}"
        if key == "tier_chunk_tokens" and expect == "any" and sc["kv"].get("tier_chunk_tokens"):
            expect = "any"
    elif mistake == "shape":
        how = draw(st.sampled_from(["order", "dup", "no-prefix-cache", "radix", "layer-groups", "cpu-shared",
                                    "ssd-shared", "no-capacity", "cpu-over-dram", "sparsity", "contiguous"]))
        expect = "fail"
        tiers = sc["kv"]["tiers"]
        if how == "order":
            sc["kv"]["tiers"] = [{"medium": "remote", "capacity_gb": 10}, {"medium": "cpu", "capacity_gb": 1}]
        elif how == "dup":
            sc["kv"]["tiers"] = [tiers[0], dict(tiers[0])]
        elif how == "no-prefix-cache":
            sc["kv"]["prefix_cache"] = "none"
        elif how == "radix":
            sc["kv"]["prefix_cache"] = "radix"
        elif how == "layer-groups":
            sc["model"] = draw(st.sampled_from(["gpt-oss-20b", "mistral-7b", "gemma-2-9b"]))
            sc["hardware"] = "h200"
        elif how in ("cpu-shared", "ssd-shared"):
            sc["kv"]["tiers"] = [{"medium": how[:3], "capacity_gb": 1, "shared": True}]
        elif how == "no-capacity":
            sc["kv"]["tiers"] = [{"medium": "cpu"}]
        elif how == "cpu-over-dram":
            sc["kv"]["tiers"] = [{"medium": "cpu", "capacity_gb": 1e8}]
        elif how == "sparsity":  # (token-level sparsity releases prompt blocks to the cache: allowed)
            sc["kv"]["sparsity"] = {"policy": "h2o"}
            expect = "any"
        else:
            sc["kv"]["layout"] = "contiguous:max"
    if expect == "pass" and sc.get("scheduler", {}).get("preemption_mode") == "swap":
        expect = "any"  # (swap with tiers: a mode of its own; not what this case checks)
    return Case("tiers", run_argv("s.yaml", "--no-plots"), {"s.yaml": to_yaml(sc)}, expect=expect, why=how,
                validate_first=True, outputs=("out/summary.json",) if expect == "pass" else ())
