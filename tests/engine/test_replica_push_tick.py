"""kvsim/engine/replica.py: `_push_tick`, the replica's heappush into the clock's ticks heap, leaves the heap
exactly as heapq.heappush does (ties on time broken by the rest of the entry)."""

from __future__ import annotations

import random
from heapq import heappop, heappush

from kvsim.engine.replica import _push_tick


def test_push_tick_matches_heappush():
    rng = random.Random(7)
    ours: list = []
    ref: list = []
    eid = 0
    for _ in range(3000):
        if ref and rng.random() < 0.45:
            assert heappop(ours) == heappop(ref)
            continue
        t = float(rng.choice((0.5, 1.0, 1.5, rng.random() * 4)))  # (repeated times: ties)
        item = (t, rng.choice((0, 1)), eid, object())
        eid += 1
        _push_tick(ours, item)
        heappush(ref, item)
        assert ours == ref
