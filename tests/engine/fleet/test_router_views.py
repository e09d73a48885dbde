"""Routing only reads: two identical KV managers get the same operations, every router routes on views of
the first between them, and the two stay indistinguishable (hits, pool counts, evictions, tiers)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import registry
from kvsim.engine.fleet.replica_view import ReplicaView
from kvsim.engine.fleet.router import LOAD_METRICS, build_router
from kvsim.kvcache.factory import build_kv_manager
from kvsim.scenario import KVConfig, TierConfig
from kvsim.workload.request import Request

BLOCK = 4
CONFIGS = {
    "hash": KVConfig(block_size=BLOCK, prefix_cache="hash"),
    "radix": KVConfig(block_size=BLOCK, prefix_cache="radix"),
    "hash+cpu": KVConfig(block_size=BLOCK, prefix_cache="hash",
                         tiers=[TierConfig(medium="cpu", capacity_gb=6)]),
    "hash+cpu+remote": KVConfig(
        block_size=BLOCK, prefix_cache="hash", tier_placement="inclusive", tier_store="write_through",
        tiers=[TierConfig(medium="cpu", capacity_gb=3), TierConfig(medium="remote", capacity_gb=12,
                                                                    bandwidth_gbps=10.0)]),
}


def manager(name):
    # bytes_per_block 1e9: a tier of capacity_gb G holds G blocks
    return build_kv_manager(CONFIGS[name], 8, 2, 4096, bytes_per_block=1e9)


class StubSched:
    """What a ReplicaView reads of a scheduler."""

    def __init__(self, kv, waiting: int, running: list[int]) -> None:
        self.kv = kv
        self.waiting = [None] * waiting
        self.running = list(running)
        self.swapped: list[int] = []
        self.lora = None


def state(kv):
    tiers = kv.tiers.tiers if getattr(kv, "tiers", None) is not None else []
    return (kv.used_blocks, kv.num_free_blocks, kv.cached_blocks, kv.evictions,
            [list(t.keys()) for t in tiers])


def request(rid, segs, out=4, session=-1):
    return Request(rid=rid, arrival_s=0.0, prompt_len=sum(n for _, n in segs), output_len=out,
                   segments=tuple(segs), session=session)


segments = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 16)), min_size=1, max_size=3)
operation = st.one_of(
    st.tuples(st.just("admit"), segments, st.integers(0, 8)),
    st.tuples(st.just("grow"), st.integers(0, 15), st.integers(1, 9)),
    st.tuples(st.just("free"), st.integers(0, 15)),
)


@pytest.mark.parametrize("config", list(CONFIGS))
@settings(max_examples=50, deadline=None)
@given(ops=st.lists(st.tuples(operation, segments), max_size=25),
       waiting=st.lists(st.integers(0, 3), min_size=3, max_size=3),
       final=st.lists(segments, min_size=1, max_size=3))
def test_routing_changes_no_cache(config, ops, waiting, final):
    a, b = manager(config), manager(config)
    routers = [build_router(n, seed=1, load_metric=m, load_weight=0.5) for n in registry.ROUTERS
               for m in LOAD_METRICS]
    live: dict[int, int] = {}  # seq -> tokens allocated
    probe_rid = 10_000  # probes never share a rid with an admitted request (managers memoise by rid)

    def route_all(r):
        running = list(live)
        views = [ReplicaView(i, "p", "mixed", StubSched(a, w, running[i:])) for i, w in enumerate(waiting)]
        for router in routers:
            assert 0 <= router.route(r, views) < len(views)

    for seq, ((kind, *args), probe) in enumerate(ops):
        probe_rid += 1
        route_all(request(probe_rid, probe, session=probe_rid % 3))
        if kind == "admit":
            segs, out = args
            r = request(seq, segs, out, session=seq % 2)
            route_all(r)
            hit = a.admit(seq, r, r.prompt_len, out)
            assert b.admit(seq, r, r.prompt_len, out) == hit
            ok = a.allocate(seq, r.prompt_len)
            assert b.allocate(seq, r.prompt_len) == ok
            if ok:
                live[seq] = r.prompt_len
            else:  # not admitted: undo the admission
                a.free(seq)
                b.free(seq)
        elif live:
            s = list(live)[args[0] % len(live)]
            if kind == "grow":
                n = live[s] + args[1]
                ok = a.allocate(s, n)
                assert b.allocate(s, n) == ok
                if ok:
                    live[s] = n
            else:
                assert a.free(s) == b.free(s)
                del live[s]
        assert state(a) == state(b)

    a.check_invariants()
    for k, segs in enumerate(final):
        r = request(20_000 + k, segs)
        route_all(r)
        assert a.admit(r.rid, r, r.prompt_len, 4) == b.admit(r.rid, r, r.prompt_len, 4)
        assert a.allocate(r.rid, r.prompt_len) == b.allocate(r.rid, r.prompt_len)
        assert state(a) == state(b)


def test_routers_read_the_tiers_below_the_gpu_and_change_nothing():
    kv, empty = manager("hash+cpu+remote"), manager("hash+cpu+remote")
    first = request(0, [(0, 20)])  # 4 full blocks, stored through to cpu and remote
    kv.admit(0, first, 20, 4)
    kv.allocate(0, 20)
    kv.free(0)
    other = request(1, [(1, 30)])  # 8 blocks: evicts the first prompt's from the GPU; cpu keeps the last 3
    kv.admit(1, other, 30, 4)
    kv.allocate(1, 30)
    kv.free(1)
    probe = request(2, [(0, 20)])
    before = state(kv)
    views = [ReplicaView(0, "p", "mixed", StubSched(kv, 1, [])),
             ReplicaView(1, "p", "mixed", StubSched(empty, 0, []))]
    peeked = views[0].kv.hit(probe)
    assert peeked.by_tier == (("remote", 16),)
    # load_frac 1, 0; prefix_aware: 0 - 0.25 < 0; store_aware: 0.5 x 16 / 20 - 0.25 = 0.15 > 0
    assert build_router("prefix_aware", seed=0, load_weight=0.25).route(probe, views) == 1
    assert build_router("store_aware", seed=0, load_weight=0.25).route(probe, views) == 0
    for name in registry.ROUTERS:
        build_router(name, seed=0).route(probe, views)
    assert state(kv) == before
    assert kv.admit(2, probe, 20, 4) == peeked
