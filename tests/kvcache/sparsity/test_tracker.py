"""Re-read timing and the per-request row."""

from __future__ import annotations

import math

from kvsim.kvcache.sparsity.tracker import REQUEST_COLUMNS, RequestStats, reread_schedule


def test_reread_schedule_spreads_rereads_over_decode_steps():
    segs = ((1, 100), (2, 50), (3, 30), (2, 999))
    # 2 re-reads over 10 decode steps: ceil(10/3) = 4 and ceil(20/3) = 7; id 2 -> its first occurrence
    assert reread_schedule(segs, (3, 2), 10) == [(4, 150, 30), (7, 100, 50)]
    assert reread_schedule(segs, (9,), 10) == []          # not in the prompt
    assert reread_schedule(segs, (1,), 0) == []           # no decode step
    assert reread_schedule(segs, (1, 2, 3), 2) == [(1, 0, 100), (1, 100, 50), (2, 150, 30)]


def test_row():
    rs = RequestStats(decode_steps=4, full_sum=400, kept_sum=100.0, mass_sum=3.6, full_tokens=103,
                      kept_tokens=25.0, fired=1, reread_tokens=50, lost_tokens=20.0)
    row = dict(zip(REQUEST_COLUMNS, rs.row(), strict=True))
    assert row["sparsity_kept_fraction"] == 0.25 and math.isclose(row["sparsity_mass"], 0.9)
    assert row["sparsity_reread_lost_tokens"] == 20.0
    empty = dict(zip(REQUEST_COLUMNS, RequestStats().row(), strict=True))
    assert math.isnan(empty["sparsity_mass"]) and empty["sparsity_decode_steps"] == 0
