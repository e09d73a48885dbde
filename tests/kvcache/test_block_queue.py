"""BlockQueue (the hash cache's eviction queue) against a sorted reference of the live blocks."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from queue_model import QueueModel

N = 12


OPS = st.lists(st.tuples(st.sampled_from(["release", "untouched", "revive", "hit", "pop"]),
                         st.lists(st.integers(0, N - 1), min_size=1, max_size=6, unique=True),
                         st.integers(0, 4)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["lru", "lfu", "length"]), OPS)
def test_pops_follow_the_policy_over_releases_hits_and_evictions(policy, ops):
    m = QueueModel(policy, N)
    for op, blocks, k in ops:
        if op == "release":  # blocks held (rc 1) let go: filed as a run of one release
            blocks = [b for b in blocks if m.rc[b] == 1]
            if blocks:
                m.release(blocks, True, k)
        elif op == "untouched":  # hit blocks let go again, keeping their last use (an undone admission)
            cached = [b for b in blocks if m.rc[b] == 0]
            for b in cached:
                m.hit(b)
            if cached:
                m.release(cached, False, k)
        elif op == "revive":  # an admission hits cached blocks and is undone
            cached = [b for b in blocks if m.rc[b] == 0]
            if cached:
                if policy == "lfu":  # (its priority reads uses: HashCachePool files them anew)
                    for b in cached:
                        m.hit(b)
                    m.release(cached, False, k)
                else:
                    m.undo(cached)
        elif op == "hit":
            for b in blocks:
                if m.rc[b] == 0:
                    m.hit(b)
        else:
            n = min(k, len(m.q))
            want = m.want()[:n]
            assert m.pop(n) == want
        assert len(m.q) == sum(1 for r in m.rc if r == 0)
        assert sorted(m.q.items()) == sorted(m.want())
    want = m.want()
    assert m.pop(len(m.q)) == want


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["lru", "lfu", "length"]), OPS, st.integers(1, N))
def test_pop_many_is_pop_many_of_one_repeated(policy, ops, k):
    a, b = QueueModel(policy, N), QueueModel(policy, N)
    for op, blocks, t in ops:
        if op in ("release", "untouched"):
            blocks = [x for x in blocks if a.rc[x] == 1]
            if blocks:
                a.release(blocks, True, t)
                b.release(blocks, True, t)
        elif op == "hit":
            for x in blocks:
                if a.rc[x] == 0:
                    a.hit(x)
                    b.hit(x)
    k = min(k, len(a.q))
    assert a.pop(k) == [b.pop(1)[0] for _ in range(k)]


def test_a_run_of_one_release_pops_deepest_first_and_stale_rows_are_compacted():
    m = QueueModel("lru", N)
    m.release(list(range(8)), True, 0)
    m.release([8, 9], True, 0)
    for b in (7, 6):
        m.hit(b)
    assert m.pop(3) == [5, 4, 3]
    for _ in range(40):  # hits and releases of one block: stale rows pile up, compaction bounds them
        m.hit(8)
        m.release([8], True, 0)
    assert m.q._rows <= 2 * len(m.q) + 64
    assert m.pop(len(m.q)) == [2, 1, 0, 9, 8]
    with pytest.raises(IndexError):
        m.q.pop_many(1)


def test_an_undone_admission_revives_rows_still_queued_and_refiles_the_rest():
    m = QueueModel("lru", N)
    m.release(list(range(6)), True, 0)  # one batch: 5 4 3 2 1 0 pop in that order
    m.release([6, 7], True, 0)
    for b in (4, 1):
        m.hit(b)
    assert m.pop(2) == [5, 3]  # 4's row (held) is popped past: its filed goes to 0
    assert m.filed[4] == 0 and m.filed[1] != 0
    rows = m.q._rows
    m.clock += 1
    m.rc[4] = m.rc[1] = 0
    m.q.revive([4, 1], m.clock)  # the admission that held them undone: 1 live in its row again, 4 filed anew
    assert m.q._rows == rows + 1 and len(m.q) == 6
    assert m.want() == [4, 2, 1, 0, 7, 6]
    assert m.pop(len(m.q)) == [4, 2, 1, 0, 7, 6]
