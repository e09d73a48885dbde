"""Re-read timing."""

from __future__ import annotations

from kvsim.kvcache.sparsity.tracker import reread_schedule


def test_reread_schedule_spreads_rereads_over_decode_steps():
    segs = ((1, 100), (2, 50), (3, 30), (2, 999))
    # 2 re-reads over 10 decode steps: ceil(10/3) = 4 and ceil(20/3) = 7; id 2 -> its first occurrence
    assert reread_schedule(segs, (3, 2), 10) == [(4, 150, 30), (7, 100, 50)]
    assert reread_schedule(segs, (9,), 10) == []          # not in the prompt
    assert reread_schedule(segs, (1,), 0) == []           # no decode step
    assert reread_schedule(segs, (1, 2, 3), 2) == [(1, 0, 100), (1, 100, 50), (2, 150, 30)]
