"""hash_pool's per-run functions against naive references."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache.hash_pool import match

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
