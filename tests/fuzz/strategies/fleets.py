"""Fleets (`fleet_cases`): `cluster.pools` (names, roles mixed / prefill / decode, data_parallel_size,
hardware, tensor_parallel_size, per-pool kv and scheduler), `cluster.kv_transfer` (mode, link,
bandwidth_gbps, latency_s: the NICs between P/D pools), `router` (policy, decode_policy, load_weight,
load_metric, store_weight) and `parallelism.replicas`, valid and with one bad value. Fleets are at most 3
replicas serving a few requests."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import Raw, run_argv, small_scenario, to_yaml
from .hardware import HW_BASE

ROUTERS = ("round_robin", "random", "least_loaded", "power_of_two", "session_affinity", "prefix_aware",
           "store_aware")

POOL_BAD: tuple[tuple[str, Any], ...] = (
    ("role", "prefil"), ("role", ""), ("role", None), ("role", 1), ("data_parallel_size", 0),
    ("data_parallel_size", -1), ("data_parallel_size", 1.5), ("data_parallel_size", True),
    ("data_parallel_size", 2000), ("data_parallel_size", Raw(".nan")), ("tensor_parallel_size", 0),
    ("tensor_parallel_size", 3), ("tensor_parallel_size", 2048), ("hardware", "nope"),
    ("hardware", "/etc/passwd"), ("hardware", {**HW_BASE, "memory_bytes": -1}), ("hardware", 5),
    ("name", ""), ("name", "x" * 65), ("name", 5), ("kv", {"block_size": 0}), ("kv", {"blok_size": 16}),
    ("kv", "hash"), ("scheduler", {"max_num_seqs": 0}), ("scheduler", [1]), ("replicas", 0),
    ("nonsense", 1), ("kv", {"gpu_memory_utilization": 0}), ("kv", {"dtype": "fp7"}),
)
TRANSFER_BAD: tuple[tuple[str, Any], ...] = (
    ("mode", "eager"), ("mode", None), ("link", "pcie"), ("link", ""), ("bandwidth_gbps", 0),
    ("bandwidth_gbps", 1e-300), ("bandwidth_gbps", -1), ("bandwidth_gbps", Raw(".inf")),
    ("bandwidth_gbps", 1e7), ("bandwidth_gbps", "fast"), ("latency_s", -1), ("latency_s", Raw(".nan")),
    ("latency_s", 1e10), ("latency_s", True), ("bandwidth", 10),
)
ROUTER_BAD: tuple[tuple[str, Any], ...] = (
    ("policy", "best"), ("policy", ""), ("policy", None), ("decode_policy", "x"), ("load_weight", -1),
    ("load_weight", 1e7), ("load_weight", Raw(".nan")), ("load_metric", "gpu"), ("store_weight", 2),
    ("store_weight", -0.5), ("store_weight", "half"), ("nonsense", 1),
)


@st.composite
def pools(draw) -> tuple[list[dict[str, Any]], bool]:
    """(pools, P/D): 1-2 mixed pools, or one prefill and one or two decode pools; 3 replicas at most."""
    pd = draw(st.booleans())
    if pd:
        shape = [{"role": "prefill"}, {"role": "decode"}]
        if draw(st.booleans()):
            shape.append({"role": "decode"})
    else:
        shape = [{"role": "mixed"} if draw(st.booleans()) else {}]
        if draw(st.booleans()):
            shape.append({})
    room = 3 - len(shape)
    for i, pool in enumerate(shape):
        if draw(st.booleans()):
            pool["name"] = draw(st.sampled_from(["p", "d", "h100", "[bold]x[/]", "pool-ä", "a b"])) + str(i)
        if room and draw(st.integers(0, 2)) == 0:
            pool["data_parallel_size"] = 2
            room -= 1
        if draw(st.integers(0, 3)) == 0:
            pool["hardware"] = draw(st.sampled_from(["h200", "a100-80gb", "h100-sxm", dict(HW_BASE)]))
        if draw(st.integers(0, 3)) == 0:
            pool["tensor_parallel_size"] = draw(st.sampled_from([1, 2]))
        if draw(st.integers(0, 3)) == 0:
            pool["kv"] = draw(st.sampled_from([{"gpu_memory_utilization": 0.5}, {"block_size": 16},
                                               {"num_gpu_blocks_override": 512}]))
        if draw(st.integers(0, 3)) == 0:
            pool["scheduler"] = {"max_num_seqs": draw(st.sampled_from([2, 64]))}
    return shape, pd


@st.composite
def fleet_cases(draw) -> Case:
    """A fleet scenario: `cluster.pools` (or parallelism.replicas), a router and, for P/D, the KV
    transfer; valid, or with one bad value in a pool, the transfer, the router or the fleet's shape."""
    sc = small_scenario(draw(st.sampled_from([3, 6])))
    expect = "pass"
    how = "valid"
    if draw(st.integers(0, 4)) == 0:
        sc["parallelism"] = {"replicas": draw(st.sampled_from([2, 3]))}
        pd = False
    else:
        shape, pd = draw(pools())
        sc["cluster"] = {"pools": shape}
        if pd or draw(st.integers(0, 3)) == 0:
            sc["cluster"]["kv_transfer"] = {
                "mode": draw(st.sampled_from(["after_prefill", "layerwise"])),
                "link": draw(st.sampled_from(["network", "nvlink"])),
                "bandwidth_gbps": draw(st.sampled_from([None, 0.001, 50, 1e6])),
                "latency_s": draw(st.sampled_from([0, 1e-5, 0.5]))}
    inline_hw = any(isinstance(p.get("hardware"), dict) for p in sc.get("cluster", {}).get("pools", []))
    if pd and inline_hw and not sc["cluster"].get("kv_transfer", {}).get("bandwidth_gbps"):
        expect = "any"  # (an inline profile without network_bandwidth needs the link's GB/s)
    sc["router"] = {"policy": draw(st.sampled_from(ROUTERS))}
    if pd:
        sc["router"]["decode_policy"] = draw(st.sampled_from(ROUTERS))
    if draw(st.booleans()):
        sc["router"].update(load_weight=draw(st.sampled_from([0, 1.0, 1e6])),
                            load_metric=draw(st.sampled_from(["queue", "kv"])),
                            store_weight=draw(st.sampled_from([0, 0.5, 1])))
    if draw(st.booleans()):
        sc["kv"] = {"prefix_cache": draw(st.sampled_from(["hash", "radix", "none"]))}
    if draw(st.integers(0, 3)) == 0:
        sc["workload"] = {"kind": "chat", "chat": {"turns": {"dist": "fixed", "value": 2}},
                          "output_len": {"dist": "fixed", "value": 4}}
        sc["simulation"]["requests"] = 4
    mistake = draw(st.sampled_from([None, None, "pool", "pool", "transfer", "router", "shape"]))
    if mistake == "pool" and "cluster" in sc:
        key, value = draw(st.sampled_from(POOL_BAD))
        sc["cluster"]["pools"][draw(st.integers(0, len(sc["cluster"]["pools"]) - 1))][key] = value
        how, expect = f"pool {key}: {value!r}", "fail"
    elif mistake == "transfer" and "cluster" in sc:
        key, value = draw(st.sampled_from(TRANSFER_BAD))
        sc["cluster"].setdefault("kv_transfer", {})[key] = value
        how, expect = f"kv_transfer {key}: {value!r}", "fail"
    elif mistake == "router":
        key, value = draw(st.sampled_from(ROUTER_BAD))
        sc["router"][key] = value
        how, expect = f"router {key}: {value!r}", "fail"
    elif mistake == "shape":
        how = draw(st.sampled_from(["empty", "dup-names", "decode-only", "prefill-only", "pd+mixed",
                                    "replicas+cluster", "too-many", "not-list", "pd-sparsity", "pd-n",
                                    "pd-beam", "pd-layer-groups", "tiers-differ"]))
        expect = "fail"
        cluster: dict[str, Any] = {}
        if how == "empty":
            cluster = {"pools": []}
        elif how == "dup-names":
            cluster = {"pools": [{"name": "a"}, {"name": "a"}]}
        elif how == "decode-only":  # (the fix-residual branch makes this an error; any until it lands)
            cluster = {"pools": [{"role": "decode"}]}
        elif how == "prefill-only":
            cluster = {"pools": [{"role": "prefill"}]}
        elif how == "pd+mixed":
            cluster = {"pools": [{"role": "prefill"}, {"role": "decode"}, {"role": "mixed"}]}
        elif how == "replicas+cluster":
            cluster = {"pools": [{}]}
            sc["parallelism"] = {"replicas": 2}
        elif how == "too-many":
            cluster = {"pools": [{"data_parallel_size": 1000}, {"data_parallel_size": 100}]}
        elif how == "not-list":
            cluster = {"pools": draw(st.sampled_from([{"role": "mixed"}, "mixed", 2]))}
        elif how == "pd-sparsity":
            cluster = {"pools": [{"role": "prefill"}, {"role": "decode"}]}
            sc["kv"] = {"sparsity": {"policy": "h2o"}}
        elif how in ("pd-n", "pd-beam"):
            cluster = {"pools": [{"role": "prefill"}, {"role": "decode"}]}
            sc["workload"]["n" if how == "pd-n" else "beam_width"] = 2
        elif how == "pd-layer-groups":
            cluster = {"pools": [{"role": "prefill"}, {"role": "decode"}]}
            sc["model"] = draw(st.sampled_from(["gpt-oss-20b", "gemma-2-9b", "nemotron-h-8b"]))
            sc["hardware"] = "h200"
        else:  # tiers on one pool only: one set of output columns needs the same media everywhere
            cluster = {"pools": [{"kv": {"prefix_cache": "hash",
                                         "tiers": [{"medium": "cpu", "capacity_gb": 4}]}}, {}]}
        sc["cluster"] = cluster
    return Case("fleet", run_argv("s.yaml", "--no-plots"), {"s.yaml": to_yaml(sc)}, expect=expect,
                why=f"{'P/D' if pd else 'fleet'}: {how}", validate_first=True,
                outputs=("out/summary.json",) if expect == "pass" else ())
