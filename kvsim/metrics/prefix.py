"""The console rows of summary.json's `prefix_cache` section (definitions in docs/metrics.md; the section
itself is computed from the run's columns in core_sections.py)."""

from __future__ import annotations

from typing import Any


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
