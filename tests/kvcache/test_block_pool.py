"""BlockPool: refcounts, O(1) free list, LIFO reuse, double-free detection."""

import pytest

from kvsim.kvcache.block_pool import BlockPool, NoFreeBlocks


def test_fresh_pool_is_all_free():
    pool = BlockPool(4, 16)
    assert (pool.num_blocks, pool.block_size) == (4, 16)
    assert (pool.num_free, pool.num_used) == (4, 0)
    assert pool.refcount == [0, 0, 0, 0]


def test_allocate_hands_out_ids_in_ascending_order_with_refcount_one():
    pool = BlockPool(3, 16)
    assert [pool.allocate() for _ in range(3)] == [0, 1, 2]
    assert pool.refcount == [1, 1, 1]
    assert (pool.num_free, pool.num_used) == (0, 3)


def test_allocate_from_empty_pool_raises():
    pool = BlockPool(1, 16)
    pool.allocate()
    with pytest.raises(NoFreeBlocks):
        pool.allocate()
    with pytest.raises(NoFreeBlocks):
        BlockPool(0, 16).allocate()


def test_free_is_lifo():
    pool = BlockPool(4, 16)
    a, b, c = pool.allocate(), pool.allocate(), pool.allocate()
    assert pool.decref(a) is True
    assert pool.decref(c) is True
    assert pool.decref(b) is True
    # last freed (b) comes back first, then c, then a; the never-used block 3 comes last
    assert [pool.allocate() for _ in range(4)] == [b, c, a, 3]


def test_incref_decref_counts_and_frees_only_at_zero():
    pool = BlockPool(2, 4)
    b = pool.allocate()
    pool.incref(b)
    pool.incref(b)
    assert pool.refcount[b] == 3
    assert pool.decref(b) is False
    assert pool.decref(b) is False
    assert pool.num_free == 1
    assert pool.decref(b) is True
    assert pool.num_free == 2
    assert pool.refcount[b] == 0


def test_double_free_raises_and_leaves_pool_unchanged():
    pool = BlockPool(2, 4)
    b = pool.allocate()
    pool.decref(b)
    free_before = pool.free_ids()
    with pytest.raises(ValueError, match="double free"):
        pool.decref(b)
    assert pool.refcount[b] == 0
    assert pool.free_ids() == free_before


def test_incref_of_free_block_raises():
    pool = BlockPool(2, 4)
    with pytest.raises(ValueError, match="free block"):
        pool.incref(0)


def test_free_ids_is_a_copy():
    pool = BlockPool(2, 4)
    ids = pool.free_ids()
    ids.clear()
    assert pool.num_free == 2


def test_allocate_many_matches_repeated_allocate():
    a, b = BlockPool(6, 4), BlockPool(6, 4)
    for pool in (a, b):
        for x in (pool.allocate(), pool.allocate(), pool.allocate()):
            pool.decref(x)  # free stack now ends ..., 0, 1, 2
    assert a.allocate_many(4) == [b.allocate() for _ in range(4)] == [2, 1, 0, 3]
    assert a.refcount == b.refcount == [1, 1, 1, 1, 0, 0]
    assert a.free_ids() == b.free_ids()
    assert a.allocate_many(0) == []
    assert a.allocate_many(2) == [4, 5]
    assert a.num_free == 0


def test_allocate_many_short_raises_and_changes_nothing():
    pool = BlockPool(3, 4)
    pool.allocate()
    with pytest.raises(NoFreeBlocks):
        pool.allocate_many(3)
    assert (pool.num_free, pool.refcount) == (2, [1, 0, 0])


def test_release_returns_kept_blocks_in_order():
    pool = BlockPool(4, 4)
    ids = pool.allocate_many(4)
    pool.incref(1)
    pool.incref(3)
    assert pool.release(ids) == [1, 3]
    assert pool.refcount == [0, 1, 0, 1]
    assert pool.free_ids() == [0, 2]
    assert pool.allocate() == 2  # LIFO: released last, reused first


def test_release_of_a_free_block_raises():
    pool = BlockPool(2, 4)
    b = pool.allocate()
    pool.release([b])
    with pytest.raises(ValueError, match="double free"):
        pool.release([b])
    assert pool.refcount == [0, 0]


@pytest.mark.parametrize(("num_blocks", "block_size"), [(-1, 16), (4, 0), (4, -3)])
def test_bad_sizes_raise(num_blocks, block_size):
    with pytest.raises(ValueError):
        BlockPool(num_blocks, block_size)
