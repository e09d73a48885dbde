"""kvsim/kvcache/tiers.py: a tier's eviction orders (ARC and S3-FIFO traced by hand), the exclusive and
inclusive chains, chunk matching, the store filter, and (hypothesis) the chain's invariants: no block in two
exclusive tiers, every tier within capacity, counters that add up, ARC's and S3-FIFO's ghost bounds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache.tiers import Tier, TierChain


def test_lru_fifo_lfu_victims():
    for policy, expected in (("lru", "b"), ("fifo", "a"), ("lfu", "b")):
        t = Tier("cpu", 2, policy)
        t.put("a")
        t.put("b")
        t.hit("a", take=False)  # a refreshed (lru), counted once more (lfu), no change (fifo)
        assert t.put("c") == [expected], policy
        assert len(t) == 2 and t.evictions == 1 and t.stores == 3


def _arc_state(t):
    q = t.strategy
    return list(q.t1), list(q.t2), list(q.b1), list(q.b2), q.p


def test_arc_hand_traced_c2():
    # c = 2, p = 0. Victims from ARC (FAST '03, Fig. 4):
    # put a, b   IV-B, |L1|+|L2| < c: T1 = [a, b]
    # hit a      I: T1 = [b], T2 = [a]
    # put c      IV-B, total 2 >= c: REPLACE, |T1| = 1 > p = 0 -> b to B1. T1 = [c], T2 = [a], B1 = [b]
    # put b      II (B1): p = 0 + 1 = 1; REPLACE, |T1| = 1 not > 1 -> a to B2. T1 = [c], T2 = [b], B2 = [a]
    # put a      III (B2): p = 1 - 1 = 0; REPLACE, |T1| = 1 > 0 -> c to B1. T2 = [b, a], B1 = [c]
    # put d      IV-B, total 3 >= c: REPLACE, T1 empty -> b to B2. T1 = [d], T2 = [a], B1 = [c], B2 = [b]
    t = Tier("cpu", 2, "arc")
    assert t.put("a") == [] and t.put("b") == []
    t.hit("a", take=False)
    assert _arc_state(t) == (["b"], ["a"], [], [], 0.0)
    assert t.put("c") == ["b"]
    assert _arc_state(t) == (["c"], ["a"], ["b"], [], 0.0)
    assert t.put("b") == ["a"]
    assert _arc_state(t) == (["c"], ["b"], [], ["a"], 1.0)
    assert t.put("a") == ["c"]
    assert _arc_state(t) == ([], ["b", "a"], ["c"], [], 0.0)
    assert t.put("d") == ["b"]
    assert _arc_state(t) == (["d"], ["a"], ["c"], ["b"], 0.0)
    assert t.keys() == ["d", "a"] and "b" not in t and "c" not in t
    assert (t.stores, t.evictions, t.loads, t.peak) == (6, 4, 1, 2)


def test_arc_p_adapts_by_the_ghost_ratio_and_b2_hits_replace_at_p():
    # c = 3. put a, b, c; hit a, b, c: T2 = [a, b, c]
    # put d      IV-B, total 3: REPLACE, T1 empty -> a to B2. T1 = [d], T2 = [b, c], B2 = [a]
    # hit d      T1 = [], T2 = [b, c, d]
    # put e      IV-B: REPLACE, T1 empty -> b to B2. T1 = [e], T2 = [c, d], B2 = [a, b]
    # put f      IV-B, total 5: REPLACE, |T1| = 1 > p = 0 -> e to B1. T1 = [f], B1 = [e]
    # put e      II: |B1| = 1 < |B2| = 2, p = 0 + 2/1 = 2; REPLACE, |T1| = 1 not > 2 -> c to B2.
    #            T1 = [f], T2 = [d, e], B1 = [], B2 = [a, b, c]
    # put a      III: |B2| = 3 >= |B1|, p = 2 - 1 = 1; REPLACE on a B2 hit with |T1| = 1 = p -> f to B1.
    #            T1 = [], T2 = [d, e, a], B1 = [f], B2 = [b, c]
    # put g      IV-B, |L1| = 1 < c, total 6 = 2c: drop B2's LRU b; REPLACE, T1 empty -> d to B2.
    t = Tier("cpu", 3, "arc")
    for k in "abc":
        t.put(k)
    for k in "abc":
        t.hit(k, take=False)
    assert t.put("d") == ["a"]
    t.hit("d", take=False)
    assert t.put("e") == ["b"] and t.put("f") == ["e"]
    assert _arc_state(t) == (["f"], ["c", "d"], ["e"], ["a", "b"], 0.0)
    assert t.put("e") == ["c"]
    assert _arc_state(t) == (["f"], ["d", "e"], [], ["a", "b", "c"], 2.0)
    assert t.put("a") == ["f"]
    assert _arc_state(t) == ([], ["d", "e", "a"], ["f"], ["b", "c"], 1.0)
    assert t.put("g") == ["d"]
    assert _arc_state(t) == (["g"], ["e", "a"], ["f"], ["c", "d"], 1.0)


def test_arc_scan_and_takes_leave_no_ghosts():
    # c = 2. put a, b, c: IV-A, |T1| + |B1| = 2 = c and |T1| = c -> T1's LRU a leaves, no ghost.
    # take b (promoted): T1 = [c]; put d: |L1| = 1, total 1 < c, no REPLACE: T1 = [c, d]
    t = Tier("cpu", 2, "arc")
    assert t.put("a") == [] and t.put("b") == [] and t.put("c") == ["a"]
    t.hit("b", take=True)
    assert t.put("d") == []
    assert _arc_state(t) == (["c", "d"], [], [], [], 0.0)
    t.put("c")  # a store of a held key is a hit: to T2
    assert _arc_state(t) == (["d"], ["c"], [], [], 0.0)
    t.remove("c")
    assert t.keys() == ["d"] and len(t) == 1


def test_s3fifo_hand_traced_c4():
    # c = 4: |S| share ceil(0.4) = 1, M's 3, G holds 3. Paper's Algorithm 1 (S -> M needs freq > 1).
    # put a, b, c, d   S = [a, b, c, d]; hit a twice (freq 2), b once (freq 1)
    # put e    full, |S| >= 1: evictS: a (2 > 1) to M; b (1) to G, evicted. S = [c, d, e], M = [a]
    # put f    evictS: c to G. S = [d, e, f], G = [b, c]
    # put b    evictS: d to G; b is in G -> head of M (freq 0). S = [e, f], M = [a, b], G = [c, d]
    # hit b 4 times (capped at 3); put g: evictS: e to G. S = [f, g], G = [c, d, e]
    # hit f, g twice; put h: evictS: f to M = [a2, b3, f2]; g to M, 4 > 3 = M full: evictM reinserts
    #   a2 b3 f2 g2 -> a1 b2 f1 g1 -> a0 b1 f0 g0, then a (0) leaves. S empty, not full: h into S.
    # put i    evictS: h to G (G over 3: c drops). S = [i], M = [b1, f0, g0], G = [d, e, h]
    t = Tier("cpu", 4, "s3fifo")
    for k in "abcd":
        assert t.put(k) == []
    t.hit("a", take=False)
    t.hit("a", take=False)
    t.hit("b", take=False)
    assert t.put("e") == ["b"]
    q = t.strategy
    assert (dict(q.s), dict(q.m), list(q.g)) == ({"c": 0, "d": 0, "e": 0}, {"a": 2}, ["b"])
    assert t.put("f") == ["c"] and t.put("b") == ["d"]
    assert (list(q.s), dict(q.m), list(q.g)) == (["e", "f"], {"a": 2, "b": 0}, ["c", "d"])
    for _ in range(4):
        t.hit("b", take=False)
    assert q.m["b"] == 3
    assert t.put("g") == ["e"]
    for k in "fgfg":
        t.hit(k, take=False)
    assert t.put("h") == ["a"]
    assert (list(q.s), list(q.m.items()), list(q.g)) == (["h"], [("b", 1), ("f", 0), ("g", 0)],
                                                         ["c", "d", "e"])
    assert t.put("i") == ["h"]
    assert (list(q.s), list(q.g)) == (["i"], ["d", "e", "h"])
    assert t.keys() == ["i", "b", "f", "g"] and len(t) == 4 and t.evictions == 6


def test_s3fifo_one_hit_wonders_leave_through_s_without_touching_m():
    # c = 10: S's share 1, M's 9. 0..9 fill S; 0..4 hit twice. put 10: evictS moves 0..4 (freq 2) to M and
    # 5 (freq 0) leaves for G. Then a scan of 100 new keys: each evicts S's oldest (6, 7, ..., 10, 100, ...),
    # freq 0, to G; M's keys and counters never change.
    t = Tier("cpu", 10, "s3fifo")
    for k in range(10):
        t.put(k)
    for k in list(range(5)) * 2:
        t.hit(k, take=False)
    victims = t.put(10)
    for k in range(100, 200):
        victims += t.put(k)
    assert victims == [5, 6, 7, 8, 9, 10] + list(range(100, 195))
    assert dict(t.strategy.m) == dict.fromkeys(range(5), 2) and list(t.strategy.s) == list(range(195, 200))
    assert list(t.strategy.g) == list(range(186, 195))  # G keeps M's share (9) of the latest


def test_s3fifo_takes_leave_no_ghost_and_a_ghost_hit_enters_m():
    # c = 4. put a, b, c, d; take b (promoted, no ghost): S = [a, c, d]; put e: not full, S = [a, c, d, e]
    # put f: evictS, a (freq 0) to G. put a: evictS, c to G; a is in G -> M = [a], G = [c]
    t = Tier("cpu", 4, "s3fifo")
    for k in "abcd":
        t.put(k)
    t.hit("b", take=True)  # promoted: no ghost
    assert t.put("e") == [] and list(t.strategy.g) == []
    assert t.put("f") == ["a"] and list(t.strategy.g) == ["a"]
    assert t.put("a") == ["c"]
    assert list(t.strategy.m) == ["a"] and "c" not in t and list(t.strategy.g) == ["c"]


def test_exclusive_chain_moves_victims_down_and_hits_leave():
    chain = TierChain([Tier("cpu", 2), Tier("ssd", 2)], exclusive=True)
    chain.offer(["a", "b", "c"])          # cpu holds b, c; a went down to ssd
    assert (chain.tiers[0].keys(), chain.tiers[1].keys()) == (["b", "c"], ["a"])
    assert chain.match(["a", "b", "x"], 0, 3) == [1, 0]   # a from ssd, b from cpu, then a miss
    chain.load(["a", "b"], [1, 0])
    assert ("a" in chain.tiers[1], "b" in chain.tiers[0]) == (False, False)  # promoted to the GPU
    chain.offer(["d", "e", "f", "g"])    # cpu d.. -> c, d, e go down; ssd holds 2, one drops out
    chain.check()
    assert chain.dropped == 1 and len(chain.tiers[0]) == 2 and len(chain.tiers[1]) == 2


def test_inclusive_chain_stores_everywhere_and_hits_stay():
    chain = TierChain([Tier("cpu", 1), Tier("ssd", 3)], exclusive=False)
    chain.offer(["a", "b"])
    assert chain.tiers[0].keys() == ["b"] and chain.tiers[1].keys() == ["a", "b"]
    assert chain.match(["a", "b"], 0, 2) == [1, 0]
    chain.load(["a", "b"], [1, 0])
    assert "a" in chain.tiers[1] and "b" in chain.tiers[0]


def test_chunks_match_whole_chunks_only_and_the_filter_waits_for_the_nth_offer():
    chain = TierChain([Tier("cpu", 10)], chunk_blocks=2)
    chain.offer(["k0", "k1", "k2"])
    assert chain.match(["k0", "k1", "k2", "k3"], 0, 4) == [0, 0]  # k2's chunk is incomplete
    assert chain.match(["k0", "k1", "k2", "k3"], 1, 4) == [0]     # from block 1: up to block 2
    f = TierChain([Tier("cpu", 10)], min_uses=2)
    assert f.offer(["a"]) == 0 and f.offer(["a"]) == 1 and "a" in f.tiers[0]


KEYS = st.lists(st.integers(0, 12), max_size=4, unique=True)  # a prompt's block keys are distinct
OPS = st.lists(st.tuples(st.sampled_from(["offer", "load"]), KEYS), max_size=40)


def _ghost_bounds(t):
    q, c = t.strategy, t.capacity_blocks
    if t.policy == "arc" and c > 0:
        assert len(q.t1) + len(q.b1) <= c and len(q.t1) + len(q.t2) + len(q.b1) + len(q.b2) <= 2 * c
        assert 0 <= q.p <= c and not (set(q.t1) | set(q.t2)) & (set(q.b1) | set(q.b2))
    elif t.policy == "s3fifo" and c > 0:
        assert len(q.g) <= q.m_cap and not (set(q.s) | set(q.m)) & set(q.g)
        assert all(0 <= f <= 3 for f in (*q.s.values(), *q.m.values()))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["put", "hit", "take"]), st.integers(0, 15)), max_size=80),
       st.integers(1, 12), st.sampled_from(["arc", "s3fifo"]))
def test_random_ops_keep_arc_and_s3fifo_bounds(ops, cap, policy):
    t = Tier("cpu", cap, policy)
    taken = 0
    for op, k in ops:
        if op == "put":
            before = set(t.keys())
            out = t.put(k)
            assert k in t and not set(out) & set(t.keys()) and set(out) <= before
        elif k in t:
            t.hit(k, take=op == "take")
            taken += op == "take"
        assert len(t) <= cap and len(t.keys()) == len(t)
        _ghost_bounds(t)
    assert t.stores == len(t) + t.evictions + taken


@settings(max_examples=80, deadline=None)
@given(OPS, st.booleans(), st.integers(0, 3), st.integers(1, 4),
       st.sampled_from(["lru", "lfu", "fifo", "arc", "s3fifo"]))
def test_random_operations_keep_the_chain_invariants(ops, exclusive, cap0, cap1, policy):
    chain = TierChain([Tier("cpu", cap0, policy), Tier("ssd", cap1, policy)], exclusive=exclusive)
    for op, keys in ops:
        if op == "offer":
            chain.offer(keys)
        else:
            idx = chain.match(keys, 0, len(keys))
            chain.load(keys[:len(idx)], idx)
        chain.check()
        for t in chain.tiers:
            assert len(t) <= max(t.capacity_blocks, 0) and t.peak <= max(t.capacity_blocks, 0)
        for t in chain.tiers:
            _ghost_bounds(t)
    if exclusive:  # every block stored into a tier is still there, was loaded out of it, or was evicted
        for t in chain.tiers:
            assert t.stores == len(t) + t.loads + t.evictions


def test_resize_pushes_victims_down_and_gives_the_room_back():
    chain = TierChain([Tier("cpu", 3), Tier("ssd", 1)], exclusive=True)
    chain.offer(["a", "b", "c"])
    chain.resize(0, 1)  # two swapped blocks borrow cpu memory: a then b go down; b pushes a out of the ssd
    assert chain.tiers[0].keys() == ["c"] and chain.tiers[1].keys() == ["b"] and chain.dropped == 1
    chain.check()
    chain.resize(0, 3)             # swapped blocks came back
    chain.offer(["d", "e"])
    assert chain.tiers[0].keys() == ["c", "d", "e"]
    assert not TierChain([Tier("cpu", 3, "arc")]).tiers[0].resizable


def _chain_state(chain: TierChain) -> tuple:
    return (chain.dropped, [(t.keys(), t.stores, t.loads, t.evictions, t.peak, t.capacity_blocks)
                            for t in chain.tiers])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["offer", "load", "resize"]),
                          st.lists(st.integers(0, 12), max_size=6, unique=True)), max_size=30),
       st.integers(0, 3), st.integers(0, 4), st.sampled_from(["lru", "fifo"]), st.booleans())
def test_inline_queue_paths_agree_with_the_per_tier_calls(ops, cap0, cap1, policy, shared):
    """A chain of lru / fifo tiers stores, matches and loads inline (TierChain._offer_queues, load); the
    same operations through Tier.put / hit (the general path) leave every tier and counter the same."""
    chains = []
    for inline in (True, False):
        chain = TierChain([Tier("cpu", cap0, policy), Tier("ssd", cap1, policy, shared=shared)],
                          stacked=False)  # (a stacked chain: tests/kvcache/test_tiers_stack.py)
        chain._queues = inline
        chains.append(chain)
    for op, keys in ops:
        for chain in chains:
            if op == "offer":
                chain.offer(keys)
            elif op == "load":
                idx = chain.match(keys, 0, len(keys))
                chain.load(keys[:len(idx)], idx)
            else:  # a shared tier may hold a key the other replica's chain stores again (no store)
                if shared:
                    chain.tiers[1].put(keys[0] if keys else 99)
                chain.resize(0, len(keys))
        assert _chain_state(chains[0]) == _chain_state(chains[1])
