"""kvsim/engine/block_growth.py: the iterations heap's push and pop (C loops when compiled) keep the list
exactly as heapq does."""

from __future__ import annotations

import heapq
import random

from kvsim.engine.block_growth import _its_pop, _its_push


def test_its_push_and_pop_keep_the_heap_as_heapq_does():
    rng = random.Random(7)
    for _ in range(200):
        ours: list[int] = []
        ref: list[int] = []
        for _ in range(rng.randrange(1, 60)):
            if ref and rng.random() < 0.4:
                assert _its_pop(ours) == heapq.heappop(ref)
            else:
                x = rng.randrange(-5, 10**12) if rng.random() < 0.5 else rng.randrange(20)
                _its_push(ours, x)
                heapq.heappush(ref, x)
            assert ours == ref
        while ref:
            assert _its_pop(ours) == heapq.heappop(ref)
            assert ours == ref
