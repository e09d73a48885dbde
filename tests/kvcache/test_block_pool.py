"""BlockPool: refcounts, O(1) free list, LIFO reuse, double-free detection, state only for blocks handed
out (a pool of any size costs nothing up front and hands out ids as a stack of every id would)."""

import time
import tracemalloc
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache import block_pool
from kvsim.kvcache.block_pool import CHUNK, BlockPool, NoFreeBlocks
from kvsim.kvcache.coordinator import KVCoordinator
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.prefix_hash import HashCachePool, PrefixHashKVManager
from kvsim.kvcache.radix import RadixKVManager, RadixPool
from kvsim.kvcache.radix_tree import RadixTree
from kvsim.specs.layers import LayerGroup
from kvsim.specs.pages import plan_pages
from kvsim.workload.request import Request


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


def test_a_block_freed_twice_is_caught_by_the_check():
    """Giving a block back writes nothing per block (a free block keeps rc 1), so a second release of a
    truly free block is not seen there: it lands on the free list twice, which the check catches."""
    m = PagedKVManager(4, 4)
    m.allocate(0, 8)
    table = list(m.tables[0])
    m.free(0)
    assert m.pool.rc[:2] == [1, 1] and m.pool.refcount[:2] == [0, 0]
    m.pool.release(table)
    with pytest.raises(AssertionError, match="on the free list twice"):
        m.check_invariants()


def test_releasing_or_increfing_a_cached_block_raises():
    """A cached block (rc 0, no table holds it) released again or incref'd: a double free."""
    pool = HashCachePool(4, 4)
    ids = pool.take_free(2)
    pool.incref(ids[1])  # (a second holder, so drop_refs reads the counts)
    pool.key_of[ids[0]] = 5
    pool.by_key[5] = ids[0]
    assert pool.release([ids[0]]) == [] and pool.rc[ids[0]] == 0 and pool.num_cached_free == 1
    with pytest.raises(ValueError, match=f"double free of block {ids[0]}"):
        pool.release([ids[0]])
    with pytest.raises(ValueError, match=f"incref of free block {ids[0]}"):
        pool.incref(ids[0])


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
    assert a.rc == b.rc == [1] * 6  # a free block keeps rc 1
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


def test_shared_counts_the_references_beyond_the_first():
    pool = BlockPool(4, 4)
    ids = pool.allocate_many(3)
    pool.incref(ids[0])
    pool.incref(ids[0])
    pool.incref(ids[2])
    assert pool.shared == 3
    assert pool.release(ids) == [ids[0], ids[2]] and pool.shared == 1
    assert pool.release([ids[0]]) == [ids[0]] and pool.shared == 0
    assert pool.release([ids[0], ids[2]]) == [] and pool.refcount == [0, 0, 0, 0]


# ---- the one-call allocation paths managers use (take, take_evicting, take_free) ------------------


def test_take_hands_out_ascending_ids_then_minus_one_changing_nothing():
    pool = BlockPool(3, 4)
    assert [pool.take(), pool.take(), pool.take()] == [0, 1, 2]
    assert pool.refcount == [1, 1, 1] and (pool.free_count, pool.num_free, pool.num_used) == (0, 0, 3)
    assert pool.take() == -1 and pool.take_evicting() == -1  # the plain pool caches nothing to evict
    assert pool.refcount == [1, 1, 1] and pool.free_ids() == []
    pool.release([1])
    assert pool.take() == 1 and pool.free_count == 0


def test_take_free_is_k_takes_in_one_call_or_none():
    a, b = BlockPool(6, 4), BlockPool(6, 4)
    for pool in (a, b):
        pool.release([pool.take(), pool.take(), pool.take()])  # free stack ends ..., 0, 1, 2
    assert a.take_free(4) == [b.take() for _ in range(4)] == [2, 1, 0, 3]
    assert a.refcount == b.refcount and a.free_ids() == b.free_ids() == [5, 4]
    assert a.take_free(3) is None and a.free_ids() == [5, 4] and a.free_count == 2
    assert a.take_free(0) == [] and a.take_free(2) == [4, 5] and a.free_count == 0


def test_take_free_reaches_never_used_ids_in_stack_order():
    with mock.patch.object(block_pool, "CHUNK", 2):
        pool, ref = BlockPool(7, 4), EagerPool(7)
        assert pool.take_free(5) == ref.allocate_many(5) == [0, 1, 2, 3, 4]
        assert pool.free_ids() == ref.free and pool.known_free_ids() == ref.free[-len(pool.known_free_ids()):]


def test_take_free_never_evicts_and_take_evicting_takes_the_victim():
    pool = HashCachePool(4, 4)
    ids = pool.allocate_many(4)
    for j, b in enumerate(ids[:2]):  # blocks 0 and 1 cache keys 100, 101
        pool.key_of[b] = 100 + j
        pool.by_key[100 + j] = b
    pool.release(ids)
    assert (pool.free_count, pool.num_free, pool.num_cached_free) == (2, 4, 2)
    assert pool.take_free(3) is None and pool.num_cached_free == 2  # cached blocks stay cached
    assert pool.take_free(2) == [3, 2]
    assert pool.take() == -1
    victim = pool.take_evicting()
    assert victim in (0, 1) and pool.key_of[victim] is None and victim not in pool.by_key.values()
    assert pool.refcount[victim] == 1 and pool.evictions == 1 and pool.free_count == 0
    other = pool.take_evicting()
    assert {victim, other} == {0, 1} and pool.by_key == {} and pool.num_free == 0
    assert pool.take_evicting() == -1 and pool.evictions == 2


def test_free_now_is_num_free_for_every_pool():
    hashed = HashCachePool(4, 4)
    ids = hashed.allocate_many(4)
    hashed.key_of[ids[0]] = 100
    hashed.by_key[100] = ids[0]
    hashed.release(ids)  # block 0 cached (evictable), the others free
    radix = RadixPool(5, 4, RadixTree("lru"))
    radix.allocate_many(2)
    for pool, free in ((BlockPool(3, 4), 3), (hashed, 4), (radix, 3)):
        assert pool.free_now() == pool.num_free == free
    assert (hashed.free_count, hashed.num_cached_free) == (3, 1)


def test_radix_take_evicting_frees_a_whole_leaf_and_takes_its_last_block():
    tree = RadixTree("lru")
    pool = RadixPool(6, 4, tree)
    ids = pool.allocate_many(4)
    node = tree.add_child(tree.root, [0], [3], ids[:3])  # one run of three pages
    for b in ids[:3]:
        pool.in_tree[b] = 1
    pool.release(ids)
    tree.unlock(node)
    assert (pool.free_count, pool.num_cached_free, pool.num_free) == (3, 3, 6)
    assert pool.take_free(3) == [3, 4, 5] and pool.take() == -1
    assert pool.take_evicting() == 2  # the leaf's blocks 0, 1, 2 go free; the last comes out
    assert (pool.evictions, pool.num_cached_free, pool.free_count) == (3, 0, 2)
    assert [pool.take(), pool.take(), pool.take(), pool.take_evicting()] == [1, 0, -1, -1]


def test_evict_and_put_free_keep_the_free_count():
    pool = HashCachePool(3, 4)
    ids = pool.allocate_many(3)
    pool.key_of[0] = 7
    pool.by_key[7] = 0
    pool.release(ids)
    with pytest.raises(NoFreeBlocks):
        pool.evict(2)  # one block cached
    pool.evict(1)
    assert pool.free_count == 3 and pool.num_cached_free == 0 and pool.known_free_ids() == [1, 2, 0]
    with pytest.raises(NoFreeBlocks):
        BlockPool(2, 4).evict(1)


@pytest.mark.parametrize(("num_blocks", "block_size"), [(-1, 16), (4, 0), (4, -3)])
def test_bad_sizes_raise(num_blocks, block_size):
    with pytest.raises(ValueError):
        BlockPool(num_blocks, block_size)


# ---- lazy state: memory follows the blocks handed out, the order is that of a stack of every id ---------


class EagerPool:
    """The pool as it was before its state became lazy: a stack of every id, a refcount per block."""

    def __init__(self, num_blocks: int) -> None:
        self.refcount = [0] * num_blocks
        self.free = list(range(num_blocks - 1, -1, -1))

    def allocate_many(self, k: int) -> list[int]:
        if k > len(self.free):
            raise NoFreeBlocks("block pool exhausted")
        ids = [self.free.pop() for _ in range(k)]
        for b in ids:
            self.refcount[b] = 1
        return ids

    def release(self, ids: list[int]) -> None:
        for b in ids:
            self.refcount[b] -= 1
            if self.refcount[b] == 0:
                self.free.append(b)


def test_a_pool_of_a_billion_blocks_takes_no_memory_up_front():
    tracemalloc.start()
    t0 = time.perf_counter()
    pool = BlockPool(10**9, 16)
    ids = [pool.allocate() for _ in range(3 * CHUNK)] + pool.allocate_many(2 * CHUNK + 7)
    pool.release(ids[::2])
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 * 2**20 and elapsed < 1.0
    assert ids == list(range(5 * CHUNK + 7))
    assert (pool.num_free, pool.num_used) == (10**9 - len(ids) // 2, len(ids) // 2)
    assert pool.known <= 6 * CHUNK + 7 and len(pool.refcount) == pool.known
    assert pool.allocate() == ids[::2][-1]  # released last, reused first


@pytest.mark.parametrize("cls", ["hash", "radix"])
def test_a_caching_pool_of_a_billion_blocks_takes_no_memory_up_front(cls):
    tracemalloc.start()
    if cls == "hash":
        pool = HashCachePool(10**9, 16)
    else:
        pool = RadixPool(10**9, 16, RadixTree("lru"))
    ids = pool.allocate_many(CHUNK + 1)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 * 2**20
    assert ids == list(range(CHUNK + 1)) and pool.num_free == 10**9 - CHUNK - 1
    fields = [pool.key_of, pool.last, pool.uses, pool.birth, pool.depth] if cls == "hash" else [pool.in_tree]
    assert all(len(f) == pool.known for f in fields)


OPS = st.lists(st.tuples(st.sampled_from(["one", "many", "take", "take_free", "release"]),
                         st.integers(0, 40)), max_size=60)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(OPS, st.sampled_from([1, 2, 3, 7, CHUNK]), st.integers(0, 50))
def test_lazy_pool_hands_out_ids_exactly_as_a_stack_of_every_id(ops, chunk, num_blocks):
    with mock.patch.object(block_pool, "CHUNK", chunk):
        pool, ref = BlockPool(num_blocks, 4), EagerPool(num_blocks)
        held: list[int] = []
        for op, n in ops:
            if op == "release":
                gone, held = held[n % 7:: 3], [b for i, b in enumerate(held) if i < n % 7 or (i - n % 7) % 3]
                pool.release(gone)
                ref.release(gone)
            elif op in ("take", "take_free"):
                k = 1 if op == "take" else n
                got = ([pool.take()] if op == "take" else pool.take_free(k))
                if k > len(ref.free):  # -1 / None, nothing changed
                    assert got == ([-1] if op == "take" else None)
                else:
                    assert got == ref.allocate_many(k)
                    held += got
            else:
                k = 1 if op == "one" else n
                if k > len(ref.free):
                    with pytest.raises(NoFreeBlocks):
                        pool.allocate() if op == "one" else pool.allocate_many(k)
                    continue
                got = [pool.allocate()] if op == "one" else pool.allocate_many(k)
                assert got == ref.allocate_many(k)
                held += got
            assert pool.free_ids() == ref.free
            assert pool.refcount + [0] * (num_blocks - pool.known) == ref.refcount
            assert (pool.num_free, pool.num_used, pool.free_count) == (
                len(ref.free), num_blocks - len(ref.free), len(ref.free))
            pool.known_free_ids()  # asserts the free count agrees with the stack


def _request(rid: int, prompt: int, content: int) -> Request:
    return Request(rid=rid, arrival_s=0.0, prompt_len=prompt, output_len=4,
                   segments=((content, prompt // 2), (100 + rid, prompt - prompt // 2)))


def _managers(kind: str, chunk: int):
    with mock.patch.object(block_pool, "CHUNK", chunk):
        if kind == "paged":
            return PagedKVManager(NUM_BLOCKS, 4, swap_capacity_blocks=40)
        if kind == "hash":
            return PrefixHashKVManager(NUM_BLOCKS, 4)
        if kind == "radix":
            return RadixKVManager(NUM_BLOCKS, 4)
        groups = (LayerGroup("full", (0,), 64.0), LayerGroup("sliding", (1,), 64.0, window=9))
        return KVCoordinator(plan_pages(groups, 4), NUM_BLOCKS, 40, prefix_cache=kind[len("coord-"):])


def _snapshot(m) -> tuple:
    pool = m.pool
    tables = [dict(g.tables) for g in m.groups] if isinstance(m, KVCoordinator) else dict(m.tables)
    return (tables, pool.refcount + [0] * (pool.num_blocks - pool.known), pool.free_ids(), m.num_free_blocks,
            m.used_blocks, m.cached_blocks, m.evictions)


NUM_BLOCKS = 60
MANAGER_OPS = st.lists(st.tuples(st.sampled_from(["admit", "grow", "fork", "free"]), st.integers(0, 9),
                                 st.integers(1, 40)), max_size=50)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(st.sampled_from(["paged", "hash", "radix", "coord-none", "coord-hash"]), MANAGER_OPS)
def test_managers_over_lazy_pools_match_the_fully_built_pool(kind, ops):
    """Every manager takes the same blocks whether the pool builds its state CHUNK blocks at a time or
    all at once, and its check_invariants (over the blocks with state only) holds."""
    with mock.patch.object(block_pool, "CHUNK", 1):
        lazy = _managers(kind, 1)
        full = _managers(kind, NUM_BLOCKS)
        live: list[int] = []
        for seq, (op, content, n) in enumerate(ops):
            for m in (lazy, full):
                if op == "admit":
                    r = _request(seq, n + 4, content % 3)
                    m.admit(seq, r, r.prompt_len, 4)
                    if not m.allocate(seq, r.prompt_len) and m.has(seq):
                        m.free(seq)  # the scheduler undoes an admission it could not place
                elif live and op == "grow":
                    s = live[content % len(live)]
                    m.allocate(s, m.capacity_tokens(s) + n % 9)
                elif live and op == "fork" and kind in ("paged", "radix", "coord-none"):
                    m.fork(live[content % len(live)], seq)
                elif live and op == "free":
                    m.free(live[content % len(live)])
                m.check_invariants()
            if op in ("admit", "fork") and lazy.has(seq):
                live.append(seq)
            elif live and op == "free":
                live.remove(live[content % len(live)])
            assert _snapshot(lazy) == _snapshot(full)


def _naive_drop_refs(rc: list[int], ids: list[int]) -> tuple[list[int], list[int]]:
    """drop_refs as a plain loop over every block (the reference the run-slicing version must match):
    rc 0 (cached) is a double free, rc 1 reaches 0 and is left at 1 (a free block's), more goes down by
    one; with no block above 1 nothing is read."""
    if all(r <= 1 for r in rc):
        return [], list(ids)
    kept, zeroed = [], []
    for b in ids:
        r = rc[b]
        if r < 1:
            raise ValueError(f"double free of block {b}")
        if r == 1:
            zeroed.append(b)
        else:
            rc[b] = r - 1
            kept.append(b)
    return kept, zeroed


def test_drop_refs_splits_runs_of_private_and_shared_blocks():
    pool = BlockPool(8, 4)
    ids = pool.allocate_many(8)
    for b, extra in ((1, 2), (2, 2), (5, 1), (7, 1)):
        for _ in range(extra):
            pool.incref(b)
    assert pool.drop_refs(ids) == ([1, 2, 5, 7], [0, 3, 4, 6])
    assert pool.rc == [1, 2, 2, 1, 1, 1, 1, 1] and pool.shared == 2  # (0, 3, 4, 6: the caller frees them)
    assert pool.drop_refs([7, 5]) == ([], [7, 5])
    assert pool.drop_refs([]) == ([], [])


@pytest.mark.parametrize("ids, bad", [([0, 3], 3), ([2, 2, 3], 3), ([1, 3, 2], 3)])
def test_drop_refs_raises_on_a_cached_block(ids, bad):
    """Blocks 0 and 1 held once, 2 twice, 3 cached (rc 0): the error names the cached block."""
    pool = BlockPool(4, 4)
    pool.allocate_many(4)
    pool.incref(2)
    pool.rc[3] = 0
    with pytest.raises(ValueError, match=f"double free of block {bad}"):
        pool.drop_refs(ids)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=12), st.data())
def test_drop_refs_matches_a_plain_loop(counts, data):
    """Random refcounts (0: cached) and id lists (repeats allowed): the same result, the same refcounts,
    and a double free raised at the same block with the same refcounts left behind."""
    ids = data.draw(st.lists(st.integers(0, len(counts) - 1), max_size=20))
    pool = BlockPool(len(counts), 4)
    pool.rc[:] = counts
    pool.shared = sum(c - 1 for c in counts if c > 1)
    ref = list(counts)
    try:
        want = _naive_drop_refs(ref, ids)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e)):
            pool.drop_refs(ids)
    else:
        assert pool.drop_refs(ids) == want
        assert pool.shared == sum(c - 1 for c in ref if c > 1)
    assert pool.rc == ref


def _cached_hash_pool(policy: str, releases: list[tuple[int, bool]], fresh: int,
                      again: tuple[int, ...] = ()) -> HashCachePool:
    """A hash pool of 16 blocks: batches of keyed blocks taken and released (touch or not), so some are
    cached (evictable, often at equal priorities), then `fresh` unkeyed blocks taken and released (truly
    free)."""
    pool = HashCachePool(16, 4, policy)
    key = 0
    for n, touch in releases:
        ids = pool.take_free(min(n, pool.free_count)) or []
        for j, b in enumerate(ids):
            key += 1
            pool.by_key[key] = b
            pool.key_of[b] = key
            pool.depth[b] = j % 2  # (few depths and one birth: priorities tie across batches)
            pool.last[b] = pool.birth[b] = 0
        pool.release(ids, touch)
    for i in again:  # cached blocks hit and released again: their old rows go stale
        live = sorted(pool.queue.live)
        if live:
            b = live[i % len(live)]
            pool.reuse(b)
            pool.release([b], i % 2 == 0)
    ids = pool.take_free(min(fresh, pool.free_count)) or []
    pool.release(ids)
    return pool


def _pool_state(pool: BlockPool) -> tuple:
    extra = (sorted(pool.queue.live), dict(pool.by_key), pool.evictions) if isinstance(pool, HashCachePool) \
        else ()
    return pool.refcount, pool.free_ids(), pool.free_count, pool.num_free, extra


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["lru", "lfu", "fifo", "length"]),
       st.lists(st.tuples(st.integers(1, 5), st.booleans()), max_size=8), st.integers(0, 4),
       st.integers(1, 18), st.lists(st.integers(0, 15), max_size=6))
def test_take_each_is_k_takes_each_evicting_when_none_is_free(policy, releases, fresh, k, again):
    import copy

    pool = _cached_hash_pool(policy, releases, fresh, tuple(again))
    one = copy.deepcopy(pool)
    before = _pool_state(pool)
    want = []
    if k <= one.num_free:
        for _ in range(k):
            b = one.take()
            want.append(b if b >= 0 else one.take_evicting())
    got = pool.take_each(k)
    if k > before[3]:
        assert got is None and _pool_state(pool) == before
    else:
        assert got == want and -1 not in want and _pool_state(pool) == _pool_state(one)


def test_radix_take_each_takes_a_leaf_block_by_block():
    """A radix pool's grow steps evict a whole leaf and take its blocks last first, leaving the rest free."""
    import copy

    m = RadixKVManager(8, 1)
    r = Request(rid=0, arrival_s=0.0, prompt_len=6, output_len=1, segments=((5, 6),))
    m.admit(0, r, 6, 1)
    m.allocate(0, 6)
    m.set_computed_tokens(0, 6)
    m.free(0)
    m.pool.take_free(2)  # the two never used: the pool has only the tree's 6 blocks left
    one = copy.deepcopy(m.pool)
    want = [one.take_evicting(), one.take(), one.take()]
    assert m.pool.take_each(3) == want == [5, 4, 3]
    assert _pool_state(m.pool) == _pool_state(one) and m.pool.free_ids() == [0, 1, 2]
