"""kvsim/metrics/consistency_stats.py: the consistency checker's own statistics on hand-computed cases."""

from __future__ import annotations

import pytest

from kvsim.metrics import consistency_stats as stats


def test_statistics_on_the_docs_examples():
    # docs/metrics.md, Time weighting: values [1, 2, 3] held [1, 1, 2] s: mean 2.25, p50 2, p90 3
    assert stats.tw_mean([1, 2, 3], [1, 1, 2]) == 2.25
    assert stats.tw_quantile([1, 2, 3], [1, 1, 2], 0.5) == 2
    assert stats.tw_quantile([1, 2, 3], [1, 1, 2], 0.9) == 3
    assert stats.tw_mean([5, float("nan")], [0, 1]) is None  # zero weight and NaN pairs dropped
    # linear percentiles of [0.5, 1.0] (tests/metrics/test_summary.py's TTFTs)
    assert stats.pstats([1.0, 0.5, float("nan")]) == pytest.approx(
        {"mean": 0.75, "p50": 0.75, "p90": 0.95, "p99": 0.995})
    assert stats.pstats([]) == dict.fromkeys(("mean", "p50", "p90", "p99"))
