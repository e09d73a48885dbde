"""hash_pool's per-run functions against naive references."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache.hash_pool import HashCachePool, match, match_hold, settle, settle_drop, settle_run

N = 10


def _naive_match(by_key: dict, keys: list, m: int) -> list[int]:
    out = []
    for k in keys[:m]:
        if k not in by_key:
            break
        out.append(by_key[k])
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=N, unique=True), st.lists(st.integers(0, 12), max_size=N),
       st.integers(0, N), st.none() | st.lists(st.integers(0, N + 4), max_size=N + 2), st.booleans())
def test_match_is_the_key_map_looked_up_whatever_the_hint(cached, keys, m, hint, own_hint):
    """Blocks 0 .. N-1, block i caching key cached[i]; the hint is any guess (ids beyond the pool's
    included: a fleet's shared memo), or the blocks themselves (a request admitted again)."""
    key_of: list = [None] * N
    by_key = {}
    for b, k in enumerate(cached):
        key_of[b] = k
        by_key[k] = b
    m = min(m, len(keys))
    want = _naive_match(by_key, keys, m)
    if own_hint and hint is not None:
        hint = want + hint
    assert match(by_key, key_of, keys, m, hint) == want
    if hint is not None:
        assert match(by_key, key_of, keys, m, list(hint)) == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.booleans(), min_size=N, max_size=N), st.lists(st.integers(0, 20), min_size=N, max_size=N),
       st.permutations(range(N)), st.integers(0, N), st.integers(1, 50))
def test_settle_run_is_settle_and_add_runs_depth_check(keyed, depths, order, n, now):
    """settle_run = settle (touching) plus the check BlockQueue.add_run makes: cached depths ascending."""
    zeroed = list(order[:n])
    key_of = [b if k else None for b, k in enumerate(keyed)]
    state = [[1] * N, [7] * N, [5] * N]
    rc1, filed1, last1 = (list(x) for x in state)
    free1, cached1 = settle(key_of, rc1, filed1, last1, zeroed, now)
    ds = [depths[b] for b in cached1]
    want = all(a < b for a, b in zip(ds, ds[1:], strict=False))
    rc2, filed2, last2 = (list(x) for x in state)
    free2, cached2, ascending = settle_run(key_of, rc2, filed2, last2, depths, zeroed, now)
    assert (free2, cached2, ascending) == (free1, cached1, want)
    assert (rc2, filed2, last2) == (rc1, filed1, last1)


_KEYS = [0, 1, -1, 7, 255, 256, 2**30 - 1, 2**30, -(2**30), 2**31 + 5, 2**60 + 3, 2**62, -(2**62) - 9,
         2**63 - 1, -(2**63), 12345678901234567]
"""Keys of 0 to 3 digits (30-bit), both signs: match_hold compares exact ints by their digits."""


def _fresh(k: int) -> int:
    """An int equal to k but (beyond CPython's small ints) another object: a key made again."""
    return int(str(k))


def _pool(key_of: list, rc: list[int], count: int) -> HashCachePool:
    pool = HashCachePool(len(key_of), 16, "lru")
    pool.key_of[:] = [None if k is None else _fresh(k) for k in key_of]
    pool.by_key = {k: b for b, k in enumerate(pool.key_of) if k is not None}
    pool.rc[:] = rc
    pool.queue.count = count
    return pool


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_KEYS), min_size=N, max_size=N),
       st.lists(st.booleans(), min_size=N, max_size=N),
       st.lists(st.sampled_from([0, 1, 2, 3, 254, 255, 256, 300]), min_size=N, max_size=N),
       st.lists(st.sampled_from(_KEYS), max_size=N), st.integers(0, N),
       st.none() | st.lists(st.integers(0, N + 4), max_size=N + 2), st.booleans())
def test_match_hold_is_match_then_hold(values, keyed, rc, keys, m, hint, own_hint):
    """Keys equal to the cached ones but other int objects (made again: the usual admission), of any size
    and sign, refcounts beyond the small ints: match_hold finds and holds what match and hold do."""
    key_of: list = []
    for v, on in zip(values, keyed, strict=True):
        key_of.append(v if on and v not in key_of else None)
    m = min(m, len(keys))
    a = _pool(key_of, rc, 50)
    b = _pool(key_of, rc, 50)
    keys = [_fresh(k) for k in keys]
    want = match(b.by_key, b.key_of, keys, m, None)
    if own_hint and hint is not None:
        hint = want + hint
    want_shared = b.hold(want)
    table, shared = match_hold(a, keys, m, None if hint is None else list(hint))
    assert (table, shared) == (want, want_shared)
    assert (a.rc, a.shared, a.queue.count) == (b.rc, b.shared, b.queue.count)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.booleans(), min_size=N, max_size=N), st.lists(st.integers(0, 20), min_size=N, max_size=N),
       st.lists(st.sampled_from([1, 1, 1, 2, 3, 256, 257, 300]), min_size=N, max_size=N),
       st.permutations(range(N)), st.integers(0, N), st.integers(1, 500))
def test_settle_drop_is_drop_refs_then_settle_run(keyed, depths, rc, order, n, now):
    """settle_drop = drop_refs then settle_run of the blocks at 0 (refcounts past the small ints too)."""
    ids = list(order[:n])
    pools = []
    for _ in range(2):
        pool = HashCachePool(N, 16, "lru")
        pool.key_of[:] = [b if k else None for b, k in enumerate(keyed)]
        pool.depth[:] = depths
        pool.rc[:] = rc
        pool.shared = sum(r - 1 for r in rc)
        pools.append(pool)
    a, b = pools
    kept, zeroed = b.drop_refs(ids)
    free, cached, ascending = settle_run(b.key_of, b.rc, b.filed, b.last, b.depth, zeroed, now)
    assert settle_drop(a, ids, now) == (kept, free, cached, ascending)
    assert (a.rc, a.filed, a.last, a.shared) == (b.rc, b.filed, b.last, b.shared)
