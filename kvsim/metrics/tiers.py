"""The `tiers` section of summary.json (KV tiers below the GPU, docs/tiers.md): prompt tokens by source,
per-tier counters and occupancy, link traffic and utilisation, the wait for loaded KV."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvsim.metrics.stats import percentiles, plain

if TYPE_CHECKING:
    import pandas as pd


def tiers_section(done: pd.DataFrame, timeline: pd.DataFrame, meta: dict[str, Any], makespan: float | None,
                  per_replica_mean: Callable[[pd.DataFrame, pd.Series], float | None]) -> dict[str, Any]:
    """From the completed requests' hit columns, the timeline's occupancy columns and the run's meta."""
    info = meta["tiers"]
    import pandas as pd  # (frames came in: pandas is loaded)

    media = list(info["tiers"])
    prompt = float(done["prompt_len"].sum()) if len(done) else 0.0
    by_source = {"gpu": int(done["hit_tokens_gpu"].sum()) if len(done) else 0}
    for m in media:
        by_source[m] = int(done[f"hit_tokens_{m}"].sum()) if len(done) else 0
    by_source["computed"] = int(prompt) - sum(by_source.values())
    per_tier = {}
    for m, t in info["tiers"].items():
        col = f"tier_{m}_blocks"
        cap = t["capacity_blocks"]
        occ = timeline[col] if col in timeline.columns else pd.Series(dtype=float)
        mean = per_replica_mean(timeline, occ) if len(occ) else None
        loaded = f"loaded_tokens_{m}"
        per_tier[m] = {
            **t,
            "loaded_tokens": int(done[loaded].sum()) if len(done) and loaded in done.columns else 0,
            "hit_rate_tokens": by_source[m] / prompt if prompt else None,
            "occupancy_mean": mean / cap if mean is not None and cap else None,
            "occupancy_max": plain(occ.max()) / cap if len(occ) and cap else None,
        }
    links = {}
    for name, e in info["links"].items():
        links[name] = {**e, "utilization": e["busy_s"] / makespan if makespan else None}
    tier_hit = done[[f"hit_tokens_{m}" for m in media]].sum(axis=1) > 0 if len(done) else None
    hit = done[tier_hit] if len(done) else done
    # hit tokens count the first admission only, load waits every admission (a request re-admitted after
    # preemption may load from a tier it missed at first): the wait figures cover both kinds of request
    waits = done["load_wait_s"][tier_hit | (done["load_wait_s"] > 0)] if len(done) else pd.Series(dtype=float)
    return {
        "placement": info["placement"], "store": info["store"], "load": info["load"],
        "chunk_blocks": info["chunk_blocks"], "store_min_uses": info["min_uses"],
        "prompt_tokens_by_source": by_source,
        "hit_rate_by_source": {k: (v / prompt if prompt else None) for k, v in by_source.items()},
        "per_tier": per_tier,
        "links": links,
        "dropped_blocks": info["dropped_blocks"],
        "requests_with_tier_hits": int(len(hit)),
        "load_wait_s": {"total": float(waits.sum()) if len(waits) else 0.0, **percentiles(waits)},
    }


def tiers_rows(section: dict[str, Any] | None, fmt, pct) -> list[tuple[str, str]]:
    """Console rows for the section (none when the run had no tiers)."""
    if not section:
        return []
    rates = section["hit_rate_by_source"]
    rows = [("prompt tokens by source", " / ".join(f"{k} {pct(v)}" for k, v in rates.items()))]
    for m, t in section["per_tier"].items():
        rows.append((f"tier {m}: occupancy mean / max",
                     f"{pct(t['occupancy_mean'])} / {pct(t['occupancy_max'])}"))
    for name, e in section["links"].items():
        rows.append((f"link {name}: GB moved / utilization",
                     f"{fmt(e['bytes'] / 1e9)} / {pct(e['utilization'])}"))
    rows.append(("tier load wait p50 / p99 (s)", f"{fmt(section['load_wait_s'].get('p50'))} / "
                                                 f"{fmt(section['load_wait_s'].get('p99'))}"))
    return rows
