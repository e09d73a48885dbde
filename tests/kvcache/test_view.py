"""kvsim/kvcache/view.py: a KVView answers "how much of this request would hit here" exactly as the next
admission does, and asking changes nothing (refcounts, the eviction queue, the radix tree's shape)."""

from __future__ import annotations

import pytest

from kvsim.kvcache.coordinator import KVCoordinator
from kvsim.kvcache.hashing import ContentMemo
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.kvcache.radix import RadixKVManager
from kvsim.kvcache.view import KVView
from kvsim.specs.layers import LayerGroup
from kvsim.specs.pages import plan_pages
from kvsim.workload.request import Request


def req(rid, segs, out=4):
    return Request(rid=rid, arrival_s=0.0, prompt_len=sum(n for _, n in segs), output_len=out,
                   segments=tuple(segs))


def hybrid():
    groups = (LayerGroup("full", (0,), 64.0), LayerGroup("sliding", (1,), 64.0, window=9))
    return KVCoordinator(plan_pages(groups, 4), 64, 0, prefix_cache="hash")


def shape(node):
    return (tuple(node.starts), tuple(node.counts), tuple(node.blocks), node.lock, node.last,
            sorted(shape(c) for c in node.children.values()))


def state(kv):
    """What a peek must leave as it was."""
    pool = kv.pool
    queue = sorted(pool.queue.items()) if hasattr(pool, "queue") else None
    tree = shape(kv.tree.root) if hasattr(kv, "tree") else None
    return list(pool.refcount), queue, list(getattr(pool, "last", [])), tree


def _with_first_cached(make):
    """A manager from make() whose request 0 (21 tokens of content 1) ran and was freed: cached."""
    kv = make()
    first = req(0, [(1, 21)])
    kv.admit(0, first, first.prompt_len, 4)
    kv.allocate(0, first.prompt_len)
    kv.free(0)
    return kv


@pytest.mark.parametrize("make", [lambda: PrefixHashKVManager(64, 4), lambda: RadixKVManager(64, 4), hybrid])
def test_view_hit_equals_the_admission_and_changes_nothing(make):
    kv = _with_first_cached(make)
    view = KVView(kv)
    probe = req(1, [(1, 17), (2, 6)])  # shares 17 tokens: 4 full blocks
    before = state(kv)
    peeked = view.hit_tokens(probe)
    assert state(kv) == before
    assert peeked == kv.admit(1, probe, probe.prompt_len, 4).tokens == 16


def test_view_of_a_manager_without_cache():
    kv = PagedKVManager(10, 4)
    kv.allocate(0, 9)
    view = KVView(kv)
    assert (view.num_blocks, view.free_blocks, view.used_blocks, view.usage) == (10, 7, 3, 0.3)
    assert view.hit_tokens(req(1, [(1, 8)])) == 0


@pytest.mark.parametrize("make", [lambda: PrefixHashKVManager(64, 4), lambda: RadixKVManager(64, 4), hybrid,
                                  lambda: PagedKVManager(64, 4)])
def test_local_hit_tokens_are_the_hit_where_all_is_on_the_gpu(make):
    kv = _with_first_cached(make)
    view = KVView(kv)
    for probe in (req(1, [(1, 17), (2, 6)]), req(2, [(1, 21)]), req(3, [(3, 9)]), req(4, [(1, 1)])):
        before = state(kv)
        local = view.local_hit_tokens(probe)
        assert state(kv) == before
        if isinstance(kv, PrefixHashKVManager):  # (no tiers below the GPU: its own answer)
            assert local == view.hit_tokens(probe)
            assert view.hit(probe).by_tier == ((("gpu", local),) if local else ())
        else:  # (the router asks `hit`)
            assert local is None


def test_a_fleet_shared_memo_hint_from_another_replica_peeks_as_the_admission_there():
    """Replicas of a fleet share one ContentMemo: a follow-up's hint (the table its parent held on replica a)
    names blocks of a's pool; a peek on replica b (the same prefix cached under other block ids) must
    find what b's admission finds, and a's peek what a's admission finds."""
    memo = ContentMemo(4, chained=True, size=8)
    a = PrefixHashKVManager(64, 4, memo=memo)
    b = PrefixHashKVManager(64, 4, memo=memo)
    other = req(5, [(9, 12)])  # a's first blocks hold other content: the parent's land elsewhere on a
    a.admit(5, other, other.prompt_len, 4)
    a.allocate(5, other.prompt_len)
    for kv in (b, a):
        parent = req(0, [(1, 21)])
        kv.admit(0, parent, parent.prompt_len, 4)
        kv.allocate(0, parent.prompt_len)
        kv.free(0)  # (a, freed last, keeps its table as the content's hint)
    follow = Request(rid=1, arrival_s=0.0, prompt_len=27, output_len=4, segments=((1, 21), (2, 6)), after=0)
    assert memo.get(follow).hint is not None
    peeked_b = KVView(b).local_hit_tokens(follow)
    peeked_a = KVView(a).local_hit_tokens(follow)
    assert peeked_b == b.admit(1, follow, follow.prompt_len, 4).tokens == 20
    assert peeked_a == a.admit(1, follow, follow.prompt_len, 4).tokens == 20
