"""The binary buddy allocator (kvsim/kvcache/buddy.py): hand-checked splits and merges, capacities that are
not powers of two, and a hypothesis property: any sequence of places and releases keeps the blocks tiling
the range with buddies merged, and agrees with a brute-force model of free slots."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache.buddy import BuddySpace, ceil_pow2


def test_ceil_pow2():
    assert [ceil_pow2(n) for n in (1, 2, 3, 4, 5, 100, 128, 129)] == [1, 2, 4, 4, 8, 128, 128, 256]


def test_split_and_merge_by_hand():
    b = BuddySpace(16)
    assert b.place(3) == 0                      # 16 -> 8 + 8 -> 4 + 4: [0, 4) taken
    assert b.holes() == [(4, 4), (8, 8)]
    assert b.place(4) == 4                      # the free 4 next to it
    assert b.place(1) == 8                      # 8 -> 4 -> 2 -> 1 + 1
    assert b.holes() == [(9, 1), (10, 2), (12, 4)]
    assert b.free_slots == 16 - 4 - 4 - 1
    b.release(4, 4)                             # its buddy [0, 4) is taken: no merge
    assert b.holes() == [(4, 4), (9, 1), (10, 2), (12, 4)]
    b.release(8, 1)                             # merges 1+1 -> 2, 2+2 -> 4, 4+4 -> 8
    assert b.holes() == [(4, 4), (8, 8)]
    b.release(0, 4)
    assert b.holes() == [(0, 16)] and b.free_slots == 16
    b.check([])


def test_a_capacity_that_is_not_a_power_of_two_is_cut_into_chunks():
    b = BuddySpace(24)                          # chunks [0, 16) and [16, 24)
    assert b.holes() == [(0, 16), (16, 8)] and b.max_hole() == 16
    assert b.place(8) == 16                     # the smallest order that holds 8
    assert b.place(8) == 0
    b.release(16, 8)
    b.release(0, 8)
    assert b.holes() == [(0, 16), (16, 8)]      # [8, 16) and [16, 24) are no buddies
    assert b.place(32) == -1 and b.free_slots == 24


def test_fits_all_and_external_fragmentation():
    b = BuddySpace(16)
    starts = [b.place(4) for _ in range(4)]
    b.release(starts[0], 4)
    b.release(starts[2], 4)                     # two free 4s, not buddies: 8 free, no 8-block
    assert b.free_slots == 8 and not b.fits_all(8, 1) and b.fits_all(3, 2) and not b.fits_all(4, 3)
    assert b.free_in_holes_below(5) == 8        # a 5-slot region needs an 8-block
    assert b.free_in_holes_below(4) == 0


def test_bad_releases_raise():
    b = BuddySpace(16)
    with pytest.raises(ValueError):
        b.release(2, 3)
    with pytest.raises(ValueError):
        b.release(4, 8)                         # not aligned to its size


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 200), st.lists(st.tuples(st.booleans(), st.integers(1, 64)), max_size=60))
def test_any_sequence_keeps_the_buddy_invariants(capacity, ops):
    b = BuddySpace(capacity)
    placed: list[tuple[int, int]] = []
    for is_place, n in ops:
        if is_place or not placed:
            size = ceil_pow2(n)
            could = b.fits_all(size, 1)
            start = b.place(size)
            assert (start >= 0) == could
            if start >= 0:
                assert start % size == 0
                placed.append((start, size))
        else:
            start, size = placed.pop(n % len(placed))
            b.release(start, size)
        b.check(placed)
        assert b.free_slots == capacity - sum(s for _, s in placed)
    for start, size in placed:
        b.release(start, size)
    b.check([])
    assert b.free_slots == capacity
