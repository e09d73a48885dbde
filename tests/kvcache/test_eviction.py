"""Eviction policies: key order by hand, the lazy heap, and the order blocks leave a hash cache."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.errors import KvsimError
from kvsim.kvcache.eviction import BATCH_ROWS, EVICTION_POLICIES, EvictionQueue, get_policy
from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.workload.request import Request

# entries: name -> (last, uses, birth, depth)
ENTRIES = {"a": (5, 1, 1, 0), "b": (3, 4, 2, 2), "c": (3, 2, 0, 1), "d": (9, 1, 3, 3)}


@pytest.mark.parametrize("policy, order", [
    ("lru", ["b", "c", "a", "d"]),     # last 3, 3 (b deeper first), 5, 9
    ("lfu", ["a", "d", "c", "b"]),     # uses 1 (last 5), 1 (last 9), 2, 4
    ("fifo", ["c", "a", "b", "d"]),    # birth 0, 1, 2, 3
    ("length", ["d", "b", "c", "a"]),  # depth 3, 2, 1, 0
])
def test_policy_order(policy, order):
    q = EvictionQueue(policy)
    for name, fields in ENTRIES.items():
        q.add(name, *fields)
    assert [q.pop() for _ in range(4)] == order
    with pytest.raises(IndexError):
        q.pop()


def test_keys_are_functions_in_a_registry():
    assert set(EVICTION_POLICIES) == {"lru", "lfu", "fifo", "length"}
    assert get_policy("lru")(3, 0, 0, 2) < get_policy("lru")(3, 0, 0, 1) < get_policy("lru")(4, 0, 0, 9)
    with pytest.raises(KvsimError, match="kv.eviction: unknown policy 'mru'"):
        get_policy("mru")


def test_discard_and_re_add_are_lazy():
    q = EvictionQueue("lru")
    q.add(1, 1, 1, 1, 0)
    q.add(2, 2, 1, 2, 0)
    q.discard(1)
    assert len(q) == 1 and 1 not in q
    q.add(1, 7, 1, 1, 0)  # back, now most recent
    assert q.pop_many(2) == [2, 1]


def test_compaction_keeps_order_and_bounds_memory():
    q = EvictionQueue("lru")
    for t in range(1000):
        q.add(t % 10, t, 1, 0, 0)  # re-adds leave stale rows behind
    assert len(q) == 10 and len(q._heap) <= 2 * 10 + 64 + 1
    assert q.pop_many(10) == list(range(10))


def seg_req(rid, segs, out=1):
    prompt = sum(n for _, n in segs)
    return Request(rid=rid, arrival_s=0.0, prompt_len=prompt, output_len=out, segments=tuple(segs))


def run_and_free(m, seq, req):
    cached = m.admit(seq, req, req.prompt_len, req.output_len).tokens
    assert m.allocate(seq, req.prompt_len)
    m.free(seq)
    return cached


@pytest.mark.parametrize("policy, survivor", [
    ("lru", "B"),      # A released first, then B; A's blocks go
    ("fifo", "B"),     # A cached first
    ("lfu", "A"),      # A was hit once more than B
    ("length", None),  # deepest blocks go first, whoever owns them
])
def test_hash_cache_eviction_order(policy, survivor):
    """Pool of 6 blocks of 4 tokens. A (8 tokens + 1) and B (8 tokens + 1) leave 2 cached full blocks
    each; A is reused once before B is freed. A 4-block request then needs 2 evictions."""
    m = PrefixHashKVManager(6, 4, eviction=policy)
    a = seg_req(0, [(1, 9)])
    b = seg_req(1, [(2, 9)])
    run_and_free(m, 0, a)
    assert run_and_free(m, 1, seg_req(2, [(1, 9)])) == 8  # A's prefix hit: uses 2
    run_and_free(m, 2, b)
    assert m.cached_blocks == 4 and m.num_free_blocks == 6 and m.used_blocks == 0
    assert m.allocate(3, 16)  # 4 blocks: 2 free + 2 evicted
    assert m.evictions == 2
    m.check_invariants()
    left = {"A": m.admit(10, seg_req(5, [(1, 9)]), 9, 1).tokens,
            "B": m.admit(11, seg_req(6, [(2, 9)]), 9, 1).tokens}
    if survivor is None:
        assert left == {"A": 4, "B": 4}  # each lost its second (deeper) block
    else:
        assert left[survivor] == 8 and left["AB".replace(survivor, "")] == 0


def test_queue_matches_a_sorted_reference():
    """Random batches, discards and pops against a plain dict: pops always return the live entries with
    the smallest keys (distinct keys: last = a fresh time per entry)."""
    import random

    rnd = random.Random(7)
    q = EvictionQueue("lru")
    ref: dict[int, int] = {}
    last = [0] * 400
    zeros = [0] * 400
    t = 0
    for _ in range(3000):
        op = rnd.random()
        if op < 0.4:
            items = rnd.sample(range(400), rnd.randint(1, 6))
            for b in items:
                t += 1
                last[b] = t
                ref[b] = t
            q.add_many(items, last, zeros, zeros, zeros)
        elif op < 0.6 and ref:
            b = rnd.choice(sorted(ref))
            q.discard(b)
            del ref[b]
        elif ref:
            k = rnd.randint(1, min(3, len(ref)))
            want = sorted(ref, key=ref.get)[:k]
            assert q.pop_many(k) == want
            for b in want:
                del ref[b]
        assert len(q) == len(ref)


def test_fifo_has_batch_rows():
    assert set(BATCH_ROWS) == {EVICTION_POLICIES["fifo"]}
    assert BATCH_ROWS[EVICTION_POLICIES["fifo"]]([1], [0, 5], [0, 1], [0, 2], [0, 3]) == \
        [((2 << 24) | ((1 << 24) - 1 - 3), 1, 1)]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(EVICTION_POLICIES)),
       st.lists(st.tuples(st.integers(0, (1 << 40) - 1), st.integers(1, 1000), st.integers(0, (1 << 40) - 1),
                          st.integers(0, (1 << 24) - 1)), min_size=1, max_size=8))
def test_batch_rows_equal_the_key_function(policy, entries):
    """add_many's rows are the key function's, inlined or not."""
    last, uses, birth, depth = (list(col) for col in zip(*entries, strict=True))
    items = list(range(len(entries)))
    key = EVICTION_POLICIES[policy]
    q = EvictionQueue(policy)
    q.add_many(items, last, uses, birth, depth)
    assert sorted(q._heap[0][2], reverse=True) == q._heap[0][2] == \
        sorted(((key(last[b], uses[b], birth[b], depth[b]), b, b) for b in items), reverse=True)


def test_a_policy_without_batch_rows_uses_its_key_function(monkeypatch):
    monkeypatch.setitem(EVICTION_POLICIES, "newest", lambda last, uses, birth, depth: -last)
    q = EvictionQueue("newest")
    q.add_many([0, 1, 2], [4, 9, 6], [1, 1, 1], [0, 0, 0], [0, 0, 0])
    assert q.pop_many(3) == [1, 2, 0]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(EVICTION_POLICIES)),
       st.lists(st.tuples(st.sampled_from(["add", "discard", "pop"]),
                          st.lists(st.integers(0, 11), min_size=1, max_size=5, unique=True),
                          st.integers(0, 3)), max_size=30))
def test_pop_many_is_pop_one_repeated(policy, ops):
    """Batches (each its own time, so no two live entries tie), discards and pops on two queues: every
    pop_many(k) gives what k pop_one calls give on the other, and both keep the same live entries. (With
    ties between batches the two may differ: the grow steps' evictions, HashCachePool._evict_taken, pop
    one at a time as take_evicting does.)"""
    a, b = EvictionQueue(policy), EvictionQueue(policy)
    last, uses, birth, depth = [0] * 12, [1] * 12, [0] * 12, [0] * 12
    for n, (op, items, t) in enumerate(ops):
        if op == "add":
            for j, x in enumerate(items):
                last[x], birth[x], depth[x], uses[x] = n, n, j, 1 + (x + t) % 2
            a.add_many(items, last, uses, birth, depth)
            b.add_many(items, last, uses, birth, depth)
        elif op == "discard":
            for x in items:
                a.discard(x)
                b.discard(x)
        else:
            k = min(len(items), len(a))
            assert a.pop_many(k) == [b.pop_one() for _ in range(k)]
        assert a.live.keys() == b.live.keys()
