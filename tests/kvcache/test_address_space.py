"""First-fit and best-fit placement, hole merging and the cached queries of AddressSpace, on hand-made hole
patterns."""

from __future__ import annotations

import pytest

from kvsim.kvcache.address_space import AddressSpace


def holes_10_5_8(placement: str) -> AddressSpace:
    """50 slots; regions A=[0,10) B=[10,20) C=[20,25) D=[25,40) E=[40,48) F=[48,50); then A, C, E freed:
    holes (0, 10), (20, 5), (40, 8)."""
    s = AddressSpace(50, placement)
    assert [s.place(n) for n in (10, 10, 5, 15, 8, 2)] == [0, 10, 20, 25, 40, 48]
    assert s.holes() == [] and s.free_slots == 0
    for start, size in ((0, 10), (20, 5), (40, 8)):
        s.release(start, size)
    assert s.holes() == [(0, 10), (20, 5), (40, 8)]
    return s


def test_first_fit_takes_lowest_address_that_fits():
    s = holes_10_5_8("first_fit")
    assert s.find(6) == 0 and s.find(5) == 0 and s.find(9) == 0
    assert s.place(6) == 0
    assert s.holes() == [(6, 4), (20, 5), (40, 8)]
    assert s.place(5) == 20  # the 4-slot remainder at 6 is too small
    assert s.find(11) == -1


def test_best_fit_takes_smallest_hole_that_fits():
    s = holes_10_5_8("best_fit")
    assert s.find(6) == 40     # 8 is the smallest hole >= 6
    assert s.find(5) == 20     # exact fit
    assert s.find(9) == 0
    assert s.place(6) == 40
    assert s.holes() == [(0, 10), (20, 5), (46, 2)]
    assert s.place(11) == -1 and s.free_slots == 17


def test_release_merges_with_both_neighbours():
    s = holes_10_5_8("first_fit")
    s.release(10, 10)  # B sits between holes (0, 10) and (20, 5)
    assert s.holes() == [(0, 25), (40, 8)]
    s.release(25, 15)  # D joins (0, 25) and (40, 8)
    assert s.holes() == [(0, 48)]
    s.release(48, 2)
    assert s.holes() == [(0, 50)] and s.free_slots == 50
    s.check([])


def test_cached_queries_follow_changes():
    s = holes_10_5_8("first_fit")
    assert s.max_hole() == 10
    assert s.free_in_holes_below(8) == 5          # only the 5-slot hole is smaller than 8
    assert s.free_in_holes_below(11) == 23        # every hole
    assert s.free_in_holes_below(5) == 0
    s.place(10)
    assert s.max_hole() == 8 and s.free_in_holes_below(11) == 13


def test_fits_all_simulates_placement():
    s = holes_10_5_8("first_fit")
    # 5 + 5 from the 10-slot hole, then the 5-slot hole
    assert s.fits_all(5, 3) and s.fits_all(5, 4)  # the fourth goes into the 8-slot hole
    assert not s.fits_all(6, 3)  # 10 -> one region, 8 -> one, the 5 is too small (18 <= 23 free)
    assert s.fits_all(6, 2) and s.fits_all(10, 1) and not s.fits_all(11, 1)
    assert s.holes() == [(0, 10), (20, 5), (40, 8)]  # nothing placed
    b = holes_10_5_8("best_fit")
    # best fit puts 4 in the 5-slot hole, then 4 + 4 in the 8, then 4 + 4 in the 10
    assert b.fits_all(4, 5) and not b.fits_all(4, 6)


def test_check_and_bad_input():
    s = AddressSpace(20)
    a = s.place(5)
    b = s.place(5)
    s.check([(a, 5), (b, 5)])
    with pytest.raises(AssertionError):
        s.check([(a, 5)])  # a region missing leaves a gap
    with pytest.raises(ValueError):
        s.release(18, 5)
    with pytest.raises(ValueError):
        s.find(0)
    with pytest.raises(ValueError):
        AddressSpace(10, "worst_fit")
    assert AddressSpace(0).place(1) == -1
