"""HandOff (kvsim/engine/fleet/handoff.py): the held KV's accounting; the scheduler's sums count it."""

from __future__ import annotations

from kvsim.engine.fleet.handoff import HandOff
from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.kvcache.paged import PagedKVManager
from kvsim.workload.request import Request


def test_hold_and_release_by_hand():
    h = HandOff(sends=True)
    assert h.active and not HandOff().active and HandOff(receive=lambda *a: 0.0).active
    h.hold(3, 40, 3)
    h.hold(5, 17, 2)
    assert (h.tokens, h.blocks, h.held) == (57, 5, {3: (40, 3), 5: (17, 2)})
    h.release(3)
    assert (h.tokens, h.blocks, h.held) == (17, 2, {5: (17, 2)})


def test_a_prefill_replica_holds_a_finished_prefill_until_release():
    kv = PagedKVManager(16, 16)
    s = Scheduler(SchedulerLimits(4, 64, True, "recompute", 0, 1.0), kv, handoff=HandOff(sends=True))
    assert s.calls_out()
    g = Group(req=Request(0, 0.0, 40, 8), order=0, seqs=[0], output=8, prompt=40)
    s.add(g)
    s.schedule(0.0)
    assert s.complete(1.0) == [g]  # handed off: it leaves the batch like a finished group
    assert not s.running and s.handoff.held == {0: (40, 3)} and kv.used_blocks == 3
    assert s.token_slots() == 40 and s.unshared_blocks() == 3 and s.context_sums().seqs == 1
    assert g.prefill_done_s == 1.0 and g.last_chunk_s == 0.0
    s.release(0)
    assert kv.used_blocks == 0 and s.token_slots() == 0 and not s.handoff.held
