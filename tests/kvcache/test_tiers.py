"""kvsim/kvcache/tiers.py: a tier's eviction orders, the exclusive and inclusive chains, chunk matching, the
store filter, and (hypothesis) the chain's invariants: no block in two exclusive tiers, every tier within
capacity, counters that add up."""

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


@settings(max_examples=80, deadline=None)
@given(OPS, st.booleans(), st.integers(0, 3), st.integers(1, 4), st.sampled_from(["lru", "lfu", "fifo"]))
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
    if exclusive:  # every block stored into a tier is still there, was loaded out of it, or was evicted
        for t in chain.tiers:
            assert t.stores == len(t) + t.loads + t.evictions
