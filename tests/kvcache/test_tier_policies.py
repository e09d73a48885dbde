"""kvsim/kvcache/tier_policies.py: the registry (every name a TierPolicy class, its descriptions the
TIER_EVICTION the schema lists), each policy's victim order on a tiny hand case through the interface alone,
`held` kept exact, and resize (lru / lfu / fifo only)."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import registry
from kvsim.kvcache.tier_policies import TIER_POLICIES, TierPolicy
from kvsim.kvcache.tiers import TIER_EVICTION, Tier, TierChain


def test_registry_maps_every_name_to_its_class_in_the_schema_order():
    assert list(TIER_POLICIES) == ["lru", "lfu", "fifo", "arc", "s3fifo"]
    for name, cls in TIER_POLICIES.items():
        assert issubclass(cls, TierPolicy) and cls.name == name and TIER_EVICTION[name] == cls.description
    assert [cls.resizable for cls in TIER_POLICIES.values()] == [True, True, True, False, False]
    assert registry.TIER_EVICTION is TIER_EVICTION  # the schema's choices and `kvsim policies`
    rows = [(k, v) for key, k, v in registry.all_policies() if key == "kv.tiers[].eviction"]
    assert rows == list(TIER_EVICTION.items())


def _run(policy: str, capacity: int, ops: str) -> list:
    """Apply ops ('+k' insert or touch, '*k' touch, '-k' remove) through the interface; the victims."""
    p = TIER_POLICIES[policy](capacity)
    victims: list = []
    for op in ops.split():
        kind, key = op[0], op[1:]
        if kind == "+" and key not in p.held:
            victims += p.insert(key)
        elif kind in "+*":
            p.touch(key)
        else:
            p.remove(key)
        assert len(p.held) <= capacity and sorted(p.keys()) == sorted(p.held)
    return victims


# c = 3, store a b c, hit a twice and b once, store d e f:
#   lru     order c a b (b hit last) -> victims c, a, b        fifo  a, b, c (hits do not refresh)
#   lfu     hits a2 b1 c0: c, then d (0 hits, older than e), then e
#   arc     a, b to T2, c in T1 (p = 0): d evicts T1's c to B1, e evicts d (|T1| = 1 > p), f evicts e
#   s3fifo  S's share 1: d: a (freq 2) moves to M, b (freq 1) leaves for G; e evicts c; f evicts d
CASES = {
    "lru": ["c", "a", "b"],
    "fifo": ["a", "b", "c"],
    "lfu": ["c", "d", "e"],
    "arc": ["c", "d", "e"],
    "s3fifo": ["b", "c", "d"],
}


@pytest.mark.parametrize("policy", list(CASES))
def test_victim_order_on_a_hand_case(policy):
    assert _run(policy, 3, "+a +b +c *a *a *b +d +e +f") == CASES[policy]


def test_a_removed_key_is_no_victim_and_a_restore_is_a_touch():
    assert _run("lru", 2, "+a +b -a +c +d") == ["b"]
    assert _run("lru", 2, "+a +b +a +c") == ["b"]  # storing a again refreshed it
    assert _run("lfu", 2, "+a *a -a +b +c +d") == ["b"]  # a's stale heap rows are skipped


@pytest.mark.parametrize("policy", ["lru", "lfu", "fifo"])
def test_resize_evicts_in_victim_order_down_to_the_new_capacity(policy):
    p = TIER_POLICIES[policy](4)
    for k in "abcd":
        p.insert(k)
    p.touch("a")
    expected = {"lru": ["b", "c"], "fifo": ["a", "b"], "lfu": ["b", "c"]}[policy]
    assert p.resize(2) == expected and len(p.held) == 2 and p.capacity == 2
    assert p.resize(5) == [] and p.insert("x") == []


@pytest.mark.parametrize("policy", ["arc", "s3fifo"])
def test_arc_and_s3fifo_are_not_resized(policy):
    with pytest.raises(ValueError, match="not resized"):
        TIER_POLICIES[policy](4).resize(2)
    chain = TierChain([Tier("cpu", 4, policy)])
    assert not chain.tiers[0].resizable
    with pytest.raises(ValueError, match="tier cpu"):
        chain.resize(0, 2)


def test_tier_builds_its_policy_from_the_registry():
    t = Tier("ssd", 3, "s3fifo")
    assert isinstance(t.strategy, TIER_POLICIES["s3fifo"]) and t.strategy.capacity == 3
    with pytest.raises(ValueError, match="unknown tier eviction"):
        Tier("cpu", 3, "mru")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("+*-r"), st.integers(0, 20)), max_size=300), st.integers(1, 8),
       st.sampled_from(["lru", "fifo"]))
def test_lru_and_fifo_queues_agree_with_an_ordered_dict(ops, capacity, policy):
    """FifoPolicy / LruPolicy keep their order in a deque with stale copies (taken out or refreshed keys):
    victims, keys() and held agree with an OrderedDict that moves and deletes, through the compactions."""
    p = TIER_POLICIES[policy](capacity)
    ref: OrderedDict = OrderedDict()
    for op, key in ops:
        if op == "+" and key not in ref:
            expected = []
            while len(ref) >= p.capacity:
                expected.append(ref.popitem(last=False)[0])
            ref[key] = None
            assert p.insert(key) == expected
        elif op in "+*" and key in ref:
            if policy == "lru":
                ref.move_to_end(key)
            p.touch(key)
        elif op == "-" and key in ref:
            del ref[key]
            p.remove(key)
        elif op == "r":
            cap = key % 9
            expected = [ref.popitem(last=False)[0] for _ in range(max(0, len(ref) - cap))]
            assert p.resize(cap) == expected
            if cap == 0:
                p.resize(capacity)
        assert p.keys() == list(ref) and set(p.held) == set(ref)
        assert len(p.order) <= 2 * len(ref) + 65


def test_lru_refreshes_leave_the_queue_bounded():
    p = TIER_POLICIES["lru"](3)
    for k in "abc":
        p.insert(k)
    for _ in range(1000):
        p.touch("a")
        p.touch("b")
    assert len(p.order) <= 2 * 3 + 65 and p.keys() == ["c", "a", "b"] and p.insert("d") == ["c"]
