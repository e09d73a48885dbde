"""The `prefix_cache` section of summary.json and its console rows (definitions in docs/metrics.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd



def prefix_cache_section(done: pd.DataFrame, timeline: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
    """Hit rates over completed requests, evictions and prefill tokens saved / computed.

    hit_rate_tokens = sum(cached_tokens) / sum(prompt_len); hit_rate_blocks = sum(cached_tokens /
    block_size) / sum(ceil(prompt_len / block_size)); evictions: cached blocks evicted, all replicas;
    prefill_tokens_saved = sum(cached_tokens); prefill_tokens_computed = sum of the timeline's
    prefill_tokens (recomputation after preemption included).
    """
    prompt = int(done["prompt_len"].sum()) if len(done) else 0
    cached = int(done["cached_tokens"].sum()) if len(done) else 0
    bs = meta.get("block_size")
    blocks = int((-(-done["prompt_len"] // bs)).sum()) if len(done) and bs else 0
    return {
        "policy": meta.get("prefix_cache"),
        "hit_rate_tokens": cached / prompt if prompt > 0 else None,
        "hit_rate_blocks": cached / bs / blocks if blocks > 0 else None,
        "evictions": int(meta.get("prefix_cache_evictions") or 0),
        "prefill_tokens_saved": cached,
        "prefill_tokens_computed": int(timeline["prefill_tokens"].sum()) if len(timeline) else 0,
    }


def prefix_cache_rows(section: dict[str, Any], pct) -> list[tuple[str, str]]:
    """Console rows, shown only when a prefix cache is on."""
    if section.get("policy") in (None, "none"):
        return []
    return [
        ("prefix cache hit rate tokens / blocks",
         f"{pct(section['hit_rate_tokens'])} / {pct(section['hit_rate_blocks'])}"),
        ("prefill tokens saved / computed",
         f"{section['prefill_tokens_saved']:,} / {section['prefill_tokens_computed']:,}"),
        ("prefix cache evictions (blocks)", f"{section['evictions']:,}"),
    ]
