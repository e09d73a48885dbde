"""The recorder columns and run totals of KV tiers (kvsim/kvcache/tiers.py): per request, the prompt tokens
each source served and the wait for loaded KV; per iteration, each tier's occupancy; the meta key `tiers`.
docs/tiers.md defines them."""

from __future__ import annotations

from typing import Any

from kvsim.engine.group import Group
from kvsim.metrics.recorder import ColumnGroup, Recorder


def request_columns(media: list[str]) -> dict[str, str]:
    """hit_tokens_gpu, hit_tokens_<medium> per tier (prompt tokens its first admission found there),
    load_wait_s (seconds its prefill waited for KV from the tiers), loaded_tokens_<medium> per tier (prompt
    tokens loaded from it over all its admissions on every replica)."""
    cols = {"hit_tokens_gpu": "q"}
    cols.update({f"hit_tokens_{m}": "q" for m in media})
    cols["load_wait_s"] = "d"
    cols.update({f"loaded_tokens_{m}": "q" for m in media})
    return cols


def timeline_columns(media: list[str]) -> dict[str, str]:
    """tier_<medium>_blocks: blocks the tier holds after the iteration was scheduled."""
    return {f"tier_{m}_blocks": "q" for m in media}


def register_columns(recorder: Recorder, media: list[str]) -> None:
    """Add the tiers' per-request and per-iteration columns (before the run; refused requests get 0)."""
    recorder.add_request_columns(ColumnGroup(request_columns(media), default=0))
    recorder.add_timeline_columns(ColumnGroup(timeline_columns(media), default=0))


def request_values(g: Group, media: list[str]) -> tuple:
    """The request's values in request_columns order."""
    by = dict(g.hit_by_tier)
    loaded = g.tier_loaded or {}
    return (by.get("gpu", 0), *(by.get(m, 0) for m in media), g.load_wait_s,
            *(loaded.get(m, 0) for m in media))


def timeline_values(chain) -> tuple:
    """Blocks each tier of a replica's chain holds, in tier order."""
    return chain.occupancy()


def run_totals(kv_cfg, chains: list, links: list, bytes_per_block: float) -> dict[str, Any]:
    """The `tiers` entry of the run's meta: settings, per-tier counters and per-link traffic, summed over
    replicas (bytes: blocks x the replica's bytes per block); a shared tier (one store in every chain)
    counted once, with `shared: true`."""
    tiers = {}
    for i, t in enumerate(kv_cfg.tiers):
        ts = list({id(c.tiers[i]): c.tiers[i] for c in chains}.values())
        tiers[t.medium] = {
            "capacity_blocks": ts[0].capacity_blocks,
            "capacity_bytes": ts[0].capacity_blocks * bytes_per_block,
            "eviction": t.eviction,
            "stores": sum(x.stores for x in ts),
            "loads": sum(x.loads for x in ts),
            "evictions": sum(x.evictions for x in ts),
            "peak_blocks": max(x.peak for x in ts),
            "bytes_stored": sum(x.stores for x in ts) * bytes_per_block,
            "bytes_loaded": sum(x.loads for x in ts) * bytes_per_block,
        }
        if t.shared:
            tiers[t.medium]["shared"] = True
    by_link: dict[str, dict[str, float]] = {}
    for lk in links:
        for link in lk.links():
            e = by_link.setdefault(link.name, {"bytes": 0.0, "busy_s": 0.0, "transfers": 0})
            e["bytes"] += link.bytes
            e["busy_s"] += link.busy_s
            e["transfers"] += link.transfers
    return {
        "placement": kv_cfg.tier_placement, "store": kv_cfg.tier_store, "load": kv_cfg.tier_load,
        "chunk_blocks": chains[0].chunk_blocks, "min_uses": kv_cfg.tier_store_min_uses,
        "tiers": tiers, "links": by_link, "dropped_blocks": sum(c.dropped for c in chains),
    }
