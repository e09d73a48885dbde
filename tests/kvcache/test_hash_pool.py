"""hash_pool's per-run functions against naive references."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache.hash_pool import match, settle, settle_run

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
