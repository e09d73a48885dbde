"""radix_tree.LeafQueue evicts in eviction.EvictionQueue's order (entries filed one at a time)."""

import random

import pytest

from kvsim.kvcache.eviction import EVICTION_POLICIES, EvictionQueue
from kvsim.kvcache.radix_tree import LeafQueue, RadixNode


@pytest.mark.parametrize("policy", sorted(EVICTION_POLICIES))
def test_leaf_queue_matches_eviction_queue(policy):
    rng = random.Random(7)
    nodes = [RadixNode([i], [1], [i], None, rng.randrange(1 << 20), {}, 0, 0, 1, rng.randrange(50))
             for i in range(60)]
    ours, ref = LeafQueue(policy), EvictionQueue(policy)
    for step in range(3000):
        op = rng.random()
        node = rng.choice(nodes)
        if op < 0.5:
            node.last = step // rng.choice((1, 3, 7))
            node.uses += rng.randrange(2)
            ours.add(node)
            ref.add(node, node.last, node.uses, node.birth, node.depth)
        elif op < 0.7:
            ours.discard(node)
            ref.discard(node)
        elif len(ref):
            assert ours.pop() is ref.pop()
        assert len(ours) == len(ref) and (node in ours) == (node in ref)
    assert sorted(map(id, ours.items())) == sorted(map(id, ref.items()))
    while len(ref):
        assert ours.pop() is ref.pop()
    with pytest.raises(IndexError):
        ours.pop()
