"""StackedTiers (kvsim/kvcache/tiers_stack.py): an exclusive lru / fifo chain held as one line of keys gives
the stores, victims, hits and counters of the per-tier policies."""

from __future__ import annotations

import copy
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache.tiers import Tier, TierChain
from kvsim.kvcache.tiers_stack import StackedTiers


def _state(chain: TierChain) -> tuple:
    return (chain.dropped, chain.occupancy(), [(t.keys(), len(t), t.stores, t.loads, t.evictions, t.peak,
                                                t.capacity_blocks) for t in chain.tiers])


def _chains(caps: list[int], policy: str) -> list[TierChain]:
    """Stacked (squeezing and trimming at once, and with the default slack), inline queues, per-tier."""
    out = []
    for stacked, queues in ((True, True), (True, True), (False, True), (False, False)):
        tiers = [Tier(m, c, policy) for m, c in zip(("cpu", "ssd", "remote"), caps, strict=False)]
        chain = TierChain(tiers, stacked=stacked)
        chain._queues = chain._queues and queues
        out.append(chain)
    assert out[0]._stack is not None and out[2]._stack is None
    out[0]._stack.slack = 0
    return out


OPS = st.lists(st.tuples(st.sampled_from(["offer", "offer", "load", "resize", "match"]),
                         st.lists(st.integers(0, 20), max_size=8, unique=True)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(OPS, st.lists(st.integers(0, 5), min_size=1, max_size=3), st.sampled_from(["lru", "fifo"]))
def test_the_stacked_chain_agrees_with_the_tier_policies(ops, caps, policy):
    chains = _chains(caps, policy)
    for op, keys in ops:
        results = []
        for chain in chains:
            if op == "offer":
                results.append(chain.offer(keys))
            elif op == "load":
                idx = chain.match(keys, 0, len(keys))
                chain.load(keys[:len(idx)], idx)
                results.append(idx)
            elif op == "match":
                results.append((chain.match(keys, 1, len(keys)), [chain.find(k) for k in keys],
                                [[k in t for t in chain.tiers] for k in keys]))
            else:  # swap lends the first tier's memory and gives it back
                chain.resize(0, max(caps[0] - len(keys), 0) if len(keys) % 2 else caps[0] + len(keys))
                results.append(None)
            chain.check()
        assert all(r == results[0] for r in results)
        states = [_state(c) for c in chains]
        assert all(s == states[0] for s in states)


RUNS = st.lists(st.tuples(st.sampled_from(["offer", "offer", "load", "resize", "match"]), st.integers(0, 24),
                          st.integers(1, 8)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(RUNS, st.lists(st.integers(0, 6), min_size=1, max_size=3), st.sampled_from(["lru", "fifo"]))
def test_runs_stored_tail_first_match_as_the_tier_policies_do(ops, caps, policy):
    """A prompt's blocks go down tail first and are matched head first (StackedTiers.match follows the
    line instead of looking each key up): the same hits with holes, drops and resizes between."""
    chains = _chains(caps, policy)
    for op, a, n in ops:
        keys = list(range(a, a + n))
        results = []
        for chain in chains:
            if op == "offer":
                results.append(chain.offer(keys[::-1]))
            elif op == "load":
                idx = chain.match(keys, 0, len(keys))
                chain.load(keys[:len(idx)], idx)
                results.append(idx)
            elif op == "match":
                results.append((chain.match(keys, 0, len(keys)), chain.match(keys, 1, len(keys) - 1)))
            else:
                chain.resize(0, max(caps[0] - n, 0) if n % 2 else caps[0] + n)
                results.append(None)
            chain.check()
        assert all(r == results[0] for r in results)
        states = [_state(c) for c in chains]
        assert all(s == states[0] for s in states)


def test_holes_are_squeezed_and_the_dropped_prefix_cut():
    s = StackedTiers([3, 4], slack=0)
    s.offer(list(range(7)))
    assert (s.keys(0), s.keys(1), s.dropped) == ([4, 5, 6], [0, 1, 2, 3], 0)
    s.offer(list(range(7, 20)))
    assert (s.keys(0), s.keys(1), s.dropped) == ([17, 18, 19], [13, 14, 15, 16], 13)
    assert s.base == 13 and s.line == list(range(13, 20))  # the 13 dropped keys were cut off
    s.load([14, 15, 18], [1, 1, 0])
    assert s.line == [13, None, None, 16, 17, None, 19]
    s.load([13], [1])
    assert s.line == [16, 17, 19] and list(s.starts) == [1, 0] and s.pos == {16: 0, 17: 1, 19: 2}
    s.check()
    assert s.match([16, 17, 19, 9], 0, 4) == [1, 0, 0] and s.occupancy() == (2, 1)
    assert (list(s.stores), list(s.evictions), list(s.loads), list(s.peaks)) == \
        ([20, 17], [17, 13], [1, 3], [3, 4])


def test_a_stacked_chain_copies_and_pickles():
    chain = TierChain([Tier("cpu", 2), Tier("ssd", 3)])
    chain.offer(list(range(6)))
    chain.load([4], [0])
    for how in (copy.deepcopy, lambda c: pickle.loads(pickle.dumps(c))):
        other = how(chain)
        assert _state(other) == _state(chain)
        for c in (chain, other):
            c.offer([7, 8, 9])
        assert _state(other) == _state(chain) and other.tiers[0].keys() == [8, 9]
        other.check()
