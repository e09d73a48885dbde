"""Keep: explicit retained positions, the heavy / recency-tail split, expected kept tokens in a range."""

from __future__ import annotations

import numpy as np
import pytest

from kvsim.kvcache.sparsity.keep import (
    Keep,
    full_keep,
    kept_in_range,
    max_pool,
    retained_mask,
    split_outside,
    spread_hitters,
)


def positions(mask: np.ndarray) -> list[int]:
    return np.nonzero(mask)[0].tolist()


def test_retained_mask_picks_top_scores_outside():
    scores = np.array([9, 9, 1, 7, 0, 3, 8, 2, 2, 2], dtype=float)
    # sinks 0, 1; window 7..9; the two best of positions 2..6 are 6 (8) and 3 (7)
    assert positions(retained_mask(Keep(2, 3, 2), 10, 2, scores)) == [0, 1, 3, 6, 7, 8, 9]


def test_retained_mask_ties_go_to_the_recent_position():
    scores = np.ones(10)
    assert positions(retained_mask(Keep(2, 2, 1), 10, 2, scores)) == [0, 1, 7, 8, 9]


def test_retained_mask_without_outside_needs_no_scores():
    assert positions(retained_mask(Keep(4, 3, 0), 12, 4)) == [0, 1, 2, 3, 9, 10, 11]
    with pytest.raises(ValueError):
        retained_mask(Keep(4, 3, 1), 12, 4)


def test_full_keep():
    assert full_keep(10, 4) == Keep(4, 6, 0) and full_keep(3, 4) == Keep(3, 0, 0)
    assert full_keep(10, 4).total == 10


def test_split_outside():
    # L = 404, s = 4, N = 400, H = floor(0.05 * 400) = 20; window 100 -> outside region 300 holds
    # 20 * 300 / 400 = 15 heavy hitters: 15 of 40 kept outside tokens are spread, 25 form the tail
    assert split_outside(Keep(4, 100, 40), 404, 4, 0.05) == pytest.approx((15.0, 25.0))
    assert split_outside(Keep(4, 100, 10), 404, 4, 0.05) == pytest.approx((10.0, 0.0))
    assert split_outside(Keep(4, 100, 0), 404, 4, 0.05) == (0.0, 0.0)


def test_kept_in_range():
    keep = Keep(4, 100, 40)  # L = 404: window [304, 404), tail [279, 304), 15 heavies over [4, 279)
    assert kept_in_range(keep, 404, 4, 0, 4, 0.05) == 4
    assert kept_in_range(keep, 404, 4, 300, 320, 0.05) == 20
    assert kept_in_range(keep, 404, 4, 279, 304, 0.05) == pytest.approx(25)
    assert kept_in_range(keep, 404, 4, 4, 279, 0.05) == pytest.approx(15)
    assert kept_in_range(keep, 404, 4, 100, 155, 0.05) == pytest.approx(55 * 15 / 275)
    assert kept_in_range(keep, 404, 4, 0, 404, 0.05) == pytest.approx(keep.total)


def test_max_pool_hand_computed():
    scores = np.array([0, 0, 1, 0, 0, 0, 2], dtype=float)
    assert max_pool(scores, 3).tolist() == [0, 1, 1, 1, 0, 2, 2]
    assert max_pool(scores, 5).tolist() == [1, 1, 1, 1, 2, 2, 2]
    assert max_pool(scores, 1).tolist() == scores.tolist()


def test_pooled_split_takes_runs_around_heavy_hitters():
    # L = 404, window 100: 15 heavy hitters in the 300-position region. Pool 5, outside 40: 8 runs of 5
    # (40 spread tokens, no tail); outside 100: all 15 runs (75 tokens) and a 25-token tail.
    assert split_outside(Keep(4, 100, 40, 5), 404, 4, 0.05) == pytest.approx((40.0, 0.0))
    assert split_outside(Keep(4, 100, 100, 5), 404, 4, 0.05) == pytest.approx((75.0, 25.0))
    assert spread_hitters(Keep(4, 100, 40, 5), 40.0) == 8 and spread_hitters(Keep(4, 100, 40), 15.0) == 15
