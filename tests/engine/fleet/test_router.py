"""kvsim/engine/fleet/router.py: each router's rule on hand-built replica views (fake queues, fake caches)."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import registry
from kvsim.engine.fleet.replica_view import ReplicaView
from kvsim.engine.fleet.router import ROUTER_CLASSES, _Rotation, build_router
from kvsim.kvcache.view import Hit
from kvsim.scenario import DEFAULT_ROUTER, RouterConfig
from kvsim.workload.request import Request


class FakeKV:
    """A KV manager as a view sees it: a pool of `num_blocks`, `used` of them referenced, and a fixed
    hit for every request."""

    def __init__(self, num_blocks: int = 100, used: int = 0, by_tier: tuple = ()) -> None:
        self.num_blocks = num_blocks
        self.used_blocks = used
        self.num_free_blocks = num_blocks - used
        self.hit = Hit(sum(n for _, n in by_tier), tuple(by_tier))

    def peek_hit(self, req, prompt_tokens: int) -> Hit:
        return self.hit


class FakeSched:
    def __init__(self, kv, waiting: int, running: int, swapped: int = 0) -> None:
        self.kv = kv
        self.waiting = [None] * waiting
        self.running = [None] * running
        self.swapped = [None] * swapped


def view(index, load=0, *, used=0, by_tier=(), swapped=0):
    return ReplicaView(index, "pool", "mixed", FakeSched(FakeKV(100, used, by_tier), load, 0, swapped))


def fleet(*loads):
    return [view(i, x) for i, x in enumerate(loads)]


def req(rid, prompt=100, session=-1):
    return Request(rid=rid, arrival_s=0.0, prompt_len=prompt, output_len=8, session=session)


def routes(router, replicas, n, **kw):
    return [router.route(req(i, **kw), replicas) for i in range(n)]


def test_router_classes_match_the_registry_and_unknown_names_fail():
    assert set(ROUTER_CLASSES) == set(registry.ROUTERS)
    for name in registry.ROUTERS:
        assert build_router(name, seed=1).name == name
    with pytest.raises(ValueError, match="unknown router"):
        build_router("fastest", seed=1)
    with pytest.raises(ValueError, match="load metric"):
        build_router("least_loaded", seed=1, load_metric="latency")


def test_the_default_routers_are_one_router_config():
    # a scenario without `router` and build_router without options run scenario.DEFAULT_ROUTER
    assert DEFAULT_ROUTER == RouterConfig() and DEFAULT_ROUTER.policy in registry.ROUTERS
    opts = inspect.signature(build_router).parameters
    assert {k: opts[k].default for k in ("load_weight", "load_metric", "store_weight")} == \
        DEFAULT_ROUTER.model_dump(include={"load_weight", "load_metric", "store_weight"})
    assert (DEFAULT_ROUTER.policy, DEFAULT_ROUTER.decode_policy) == ("round_robin", "least_loaded")


def test_round_robin_cycles_modulo_the_candidates():
    rr = build_router("round_robin", seed=0)
    assert routes(rr, fleet(5, 0, 9), 7) == [0, 1, 2, 0, 1, 2, 0]
    assert rr.route(req(7), fleet(0, 0)) == 7 % 2  # modulo len(replicas) at each call


def test_random_is_deterministic_by_seed():
    replicas = fleet(0, 0, 0, 0)
    a = routes(build_router("random", seed=3), replicas, 60)
    b = routes(build_router("random", seed=3), replicas, 60)
    c = routes(build_router("random", seed=4), replicas, 60)
    assert a == b != c
    assert set(a) == {0, 1, 2, 3}


def test_least_loaded_picks_the_minimum_and_ties_rotate():
    ll = build_router("least_loaded", seed=0)
    assert ll.route(req(0), fleet(3, 1, 2)) == 1
    idle = fleet(0, 0, 0)
    assert routes(ll, idle, 4) == [2, 0, 1, 2]  # the first tied position after the last chosen (1)
    assert ll.route(req(9), fleet(1, 0, 5, 0)) == 3  # tied 1 and 3; last chosen 2
    assert ll.route(req(9), fleet(1, 0, 5, 0)) == 1


def test_least_loaded_counts_swapped_requests_and_reads_kv_usage():
    ll = build_router("least_loaded", seed=0)
    assert ll.route(req(0), [view(0, 1, swapped=2), view(1, 2)]) == 1
    kv = build_router("least_loaded", seed=0, load_metric="kv")
    assert kv.route(req(0), [view(0, 0, used=60), view(1, 9, used=10), view(2, 0, used=30)]) == 1


def test_power_of_two_takes_the_lower_of_two_draws():
    p2 = build_router("power_of_two", seed=5)
    assert routes(p2, fleet(4, 1), 20) == [1] * 20  # two replicas: both drawn every time
    assert routes(p2, fleet(7), 3) == [0, 0, 0]
    got = routes(build_router("power_of_two", seed=5), fleet(0, 5, 9), 300)
    assert got.count(2) == 0  # the most loaded never beats the other draw
    assert 150 < got.count(0) < 250  # chosen whenever drawn: 2/3 of the calls
    assert got == routes(build_router("power_of_two", seed=5), fleet(0, 5, 9), 300)
    assert got != routes(build_router("power_of_two", seed=6), fleet(0, 5, 9), 300)


def test_power_of_two_tie_takes_the_first_draw_and_reads_kv_usage():
    got = routes(build_router("power_of_two", seed=2), fleet(0, 0, 0), 300)
    assert all(50 < got.count(p) < 150 for p in range(3))
    kv = build_router("power_of_two", seed=2, load_metric="kv")
    assert kv.route(req(0), [view(0, 0, used=50), view(1, 10, used=5)]) == 1


def test_session_affinity_sticks_per_session_and_per_agent_episode():
    sa = build_router("session_affinity", seed=0)
    replicas = fleet(0, 0, 0)
    chat = sa.route(req(0, session=7), replicas)
    agent = sa.route(req(1, session=8), replicas)  # an agent episode: its requests carry the episode id
    assert (chat, agent) == (0, 1)
    busy = fleet(9, 9, 0)  # later requests stay even when their replica is the busiest
    assert [sa.route(req(i, session=7), busy) for i in range(2, 5)] == [0, 0, 0]
    assert [sa.route(req(i, session=8), busy) for i in range(5, 8)] == [1, 1, 1]
    assert sa.route(req(8, session=9), busy) == 2  # a new session goes to the least loaded


def test_session_affinity_remembers_indices_and_chooses_anew_without_its_replica():
    sa = build_router("session_affinity", seed=0)
    replicas = fleet(5, 5, 0, 5)
    assert sa.route(req(0, session=3), replicas) == 2
    shuffled = [replicas[3], replicas[2], replicas[0]]
    assert sa.route(req(1, session=3), shuffled) == 1  # the position of replica index 2
    without = [replicas[0], replicas[1]]  # replica 2 gone: the least loaded (tie rotates), remembered
    first = sa.route(req(2, session=3), without)
    assert sa.route(req(3, session=3), replicas) == first


def test_session_affinity_without_a_session_routes_each_request_anew():
    sa = build_router("session_affinity", seed=0)
    assert routes(sa, fleet(0, 0, 0), 4) == [0, 1, 2, 0]  # key = rid: least_loaded, ties rotating



def test_prefix_aware_prefers_the_cached_prefix_at_equal_load():
    pa = build_router("prefix_aware", seed=0)
    replicas = [view(0, 2), view(1, 2, by_tier=(("gpu", 48), ("cpu", 16))),
                view(2, 2, by_tier=(("gpu", 32),))]
    # load_frac 1 everywhere; overlap 0, 0.64, 0.32
    assert pa.route(req(0), replicas) == 1


def test_prefix_aware_trades_the_prefix_against_load():
    replicas = [view(0, 8, by_tier=(("gpu", 80),)), view(1, 2), view(2, 4)]
    # load_frac 1, 0.25, 0.5; overlap 0.8, 0, 0
    # load_weight 1: scores -0.2, -0.25, -0.5 -> 0
    assert build_router("prefix_aware", seed=0).route(req(0), replicas) == 0
    # load_weight 2: scores 0.8 - 2 = -1.2, -0.5, -1.0 -> 1
    assert build_router("prefix_aware", seed=0, load_weight=2.0).route(req(0), replicas) == 1
    # load_weight 0: the prefix alone
    assert build_router("prefix_aware", seed=0, load_weight=0.0).route(req(0), replicas) == 0


def test_prefix_aware_kv_metric_uses_kv_usage_as_the_load_fraction():
    replicas = [view(0, 0, used=90, by_tier=(("gpu", 50),)), view(1, 0, used=20)]
    pa = build_router("prefix_aware", seed=0, load_metric="kv")
    assert pa.route(req(0), replicas) == 1  # 0.5 - 0.9 = -0.4 < 0 - 0.2
    pa = build_router("prefix_aware", seed=0, load_metric="kv", load_weight=0.5)
    assert pa.route(req(0), replicas) == 0  # 0.5 - 0.45 = 0.05 > -0.1


def test_prefix_aware_ties_go_to_the_lower_load_then_rotate():
    pa = build_router("prefix_aware", seed=0)
    # scores: 0.5 - 1 = -0.5 (load 4), 0 - 0.5 = -0.5 (load 2), 0 - 1 = -1 (load 4) -> tie, lower load
    replicas = [view(0, 4, by_tier=(("gpu", 50),)), view(1, 2), view(2, 4)]
    assert pa.route(req(0), replicas) == 1
    idle = fleet(0, 0, 0)
    assert routes(pa, idle, 3) == [2, 0, 1]  # all tied: the first after the last chosen (1)
    assert pa.route(req(0, prompt=0), replicas) == 1  # empty prompt: overlap 0, load decides


def test_prefix_aware_ignores_the_shared_store_and_store_aware_weighs_it():
    remote = (("remote", 64),)
    replicas = [view(0, 1, by_tier=remote), view(1, 1, by_tier=(("gpu", 32),))]
    # prefix_aware: overlap 0, 0.32
    assert build_router("prefix_aware", seed=0).route(req(0), replicas) == 1
    # store_aware, weight 0.75: 0.75 x 0.64 = 0.48 > 0.32; weight 0.25: 0.16 < 0.32
    assert build_router("store_aware", seed=0, store_weight=0.75).route(req(0), replicas) == 0
    assert build_router("store_aware", seed=0, store_weight=0.25).route(req(0), replicas) == 1
    # local tiers count in full, beside the store's tokens: (16 + 0.5 x 48) / 100 = 0.4 > 0.32
    mixed = [view(0, 1, by_tier=(("gpu", 16), ("remote", 48))), replicas[1]]
    assert build_router("store_aware", seed=0).route(req(0), mixed) == 0
    assert build_router("prefix_aware", seed=0).route(req(0), mixed) == 1


def test_store_aware_lets_load_decide_when_every_replica_sees_the_store():
    remote = (("remote", 80),)
    replicas = [view(0, 6, by_tier=remote), view(1, 3, by_tier=remote), view(2, 5, by_tier=remote)]
    assert build_router("store_aware", seed=0).route(req(0), replicas) == 1


def _score_all(router, r, replicas):
    """prefix_aware's rule scoring every replica (the router stops peeking early: same choice)."""
    loads = [v.kv_usage if router.metric == "kv" else v.load for v in replicas]
    top = max(loads)
    fracs = loads if router.metric == "kv" else [x / top if top > 0 else 0.0 for x in loads]
    scores = [router._overlap(r, v) - router.load_weight * f for v, f in zip(replicas, fracs, strict=True)]
    best = max(scores)
    tied = [p for p, s in enumerate(scores) if s >= best - 1e-9]
    low = min(loads[p] for p in tied)
    return [p for p in tied if loads[p] == low]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 99), st.integers(0, 99), st.integers(0, 90)),
                min_size=1, max_size=8),
       st.sampled_from(["prefix_aware", "store_aware"]), st.sampled_from(["queue", "kv"]),
       st.sampled_from([0.0, 0.01, 0.5, 1.0, 3.0, 100.0]))
def test_prefix_aware_peeking_the_least_loaded_first_chooses_as_scoring_all(reps, policy, metric, weight):
    replicas = [view(i, load, used=used, by_tier=(("gpu", gpu), ("remote", remote)))
                for i, (load, gpu, remote, used) in enumerate(reps)]
    router = build_router(policy, seed=0, load_metric=metric, load_weight=weight)
    rotation = _Rotation()
    for rid in range(3):
        r = req(rid, prompt=200)
        assert router.route(r, replicas) == rotation.pick(_score_all(router, r, replicas))
