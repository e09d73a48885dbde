"""The prefix_cache section of summary.json on conftest.py's hand-filled recorder."""

import pytest

from kvsim.metrics.prefix import prefix_cache_rows
from kvsim.metrics.summary import build_summary, summary_table_rows


def test_prefix_cache_section(frames, meta):
    meta = {**meta, "prefix_cache": "hash", "prefix_cache_evictions": 7}
    pc = build_summary(*frames, meta)["prefix_cache"]
    # completed requests: rid 0 (prompt 100, cached 0) and rid 1 (prompt 50, cached 16); block size 4
    assert pc["policy"] == "hash"
    assert pc["hit_rate_tokens"] == pytest.approx(16 / 150)
    assert pc["hit_rate_blocks"] == pytest.approx((16 / 4) / (25 + 13))  # ceil(100/4) + ceil(50/4)
    assert pc["evictions"] == 7
    assert pc["prefill_tokens_saved"] == 16
    assert pc["prefill_tokens_computed"] == 100 + 50 + 0 + 200  # the timeline's prefill_tokens


def test_rows_only_when_a_cache_is_on(frames, meta):
    off = build_summary(*frames, meta)
    assert off["prefix_cache"]["policy"] is None and off["prefix_cache"]["evictions"] == 0
    assert not any(label.startswith("prefix cache") for label, _ in summary_table_rows(off))
    on = build_summary(*frames, {**meta, "prefix_cache": "radix", "prefix_cache_evictions": 3})
    rows = dict(prefix_cache_rows(on["prefix_cache"], lambda x: f"{100 * x:.1f}%"))
    assert rows["prefix cache hit rate tokens / blocks"] == "10.7% / 10.5%"
    assert rows["prefill tokens saved / computed"] == "16 / 350"
    assert rows["prefix cache evictions (blocks)"] == "3"
