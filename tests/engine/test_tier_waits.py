"""TierWaits (kvsim/engine/tier_waits.py): a hit below the GPU waits for its load; a GPU hit does not."""

from __future__ import annotations

from kvsim.engine.group import Group
from kvsim.engine.tier_waits import TierWaits, next_load_s
from kvsim.workload.request import Request


def _group() -> Group:
    return Group(req=Request(0, 0.0, 10, 10), order=0, seqs=[0], output=10, prompt=10)


def test_arrival_calls_the_loader_only_for_kv_below_the_gpu():
    calls = []

    def loader(now, by_tier):
        calls.append(by_tier)
        return now + 0.25

    t = TierWaits(loader)
    g = _group()
    assert t.arrival(1.0, g, ()) == 1.0 and t.arrival(1.0, g, (("gpu", 32),)) == 1.0
    assert not calls and g.load_wait_s == 0.0
    assert t.arrival(1.0, g, (("gpu", 16), ("cpu", 32))) == 1.25
    assert t.arrival(2.0, g, (("ssd", 16),)) == 2.25
    assert calls == [(("gpu", 16), ("cpu", 32)), (("ssd", 16),)] and g.load_wait_s == 0.5
    # the tokens loaded, per tier, over both admissions (a GPU hit loads nothing)
    assert g.tier_loaded == {"cpu": 32, "ssd": 16}
    t.arrival(3.0, g, (("cpu", 48),))
    assert g.tier_loaded == {"cpu": 80, "ssd": 16}


def test_next_load_s_is_the_first_arrival_still_ahead():
    a, b, c = _group(), _group(), _group()
    a.ready_s, b.ready_s, c.ready_s = 5.0, 3.0, 1.0
    assert next_load_s([a, b, c], 2.0) == 3.0
    assert next_load_s([c], 2.0) is None
