"""Check mode's pacing (kvsim/engine/check_pacing.py): full KV checks spaced by the entries the last one
read, a small state checked after every iteration, and a full check of the state the run ends in."""

from __future__ import annotations

import pytest

from kvsim.engine.check_pacing import CheckPacing
from kvsim.engine.simulation import Simulation
from kvsim.kvcache import factory
from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.scenario import load_scenario
from kvsim.workload.request import Request


def test_a_full_check_is_due_once_the_iterations_have_earned_its_cost():
    p = CheckPacing(credit=10)
    assert p.due()  # the first iteration: nothing read yet
    p.done(35)
    assert [p.due() for _ in range(4)] == [False, False, False, True]  # 40 entries earned >= 35
    p.done(10)
    assert [p.due() for _ in range(3)] == [True, True, True]  # a state within the credit: every time
    assert (p.iterations, p.full_checks) == (8, 2)


def test_managers_report_what_a_check_read():
    kv = PrefixHashKVManager(8, 16)
    kv.admit(0, Request(0, 0.0, 40, 2), 40, 2)
    kv.allocate(0, 40)  # 3 blocks handed out, referenced once each
    assert kv.check_invariants() == kv.pool.known + 3


def _sim(*overrides: str) -> Simulation:
    return Simulation(load_scenario(None, ["model=llama-3-8b", "hardware=h100-sxm", "kv.prefix_cache=hash",
                                           "kv.check_invariants=true", *overrides]))


def test_a_small_state_is_checked_after_every_iteration():
    s = _sim("kv.num_gpu_blocks_override=64", "simulation.requests=20", "workload.arrival.rate=50",
             "workload.prompt_len={dist: uniform, low: 16, high: 200}",
             "workload.output_len={dist: uniform, low: 4, high: 40}")
    s.run()
    p = s.replicas[0].pacing
    assert p.iterations > 20 and p.full_checks == p.iterations + 1  # and once more at the end


def test_a_large_state_is_checked_less_often_but_at_the_end():
    s = _sim("workload.kind=chat", "simulation.requests=150", "workload.arrival.rate=20")
    s.run()
    p = s.replicas[0].pacing
    # the pool's 4,096 blocks with state alone are 16 iterations' credit
    assert 2 <= p.full_checks <= p.iterations // 16 + 1 and p.cost >= 4096


def test_a_state_broken_after_the_last_iteration_is_caught_by_the_full_check(monkeypatch):
    class Leaky(PrefixHashKVManager):  # (compiled, the manager is an extension type: patched by a subclass)
        __slots__ = ()

        def free(self, seq):
            n = PrefixHashKVManager.free(self, seq)
            if not self.tables:  # the last request left: a block keeps a reference no table holds
                self.pool.rc[0] += 1
            return n

    monkeypatch.setattr(factory, "PrefixHashKVManager", Leaky)
    s = _sim("kv.num_gpu_blocks_override=64")
    s.build_requests = lambda: [Request(0, 0.0, 40, 3)]
    with pytest.raises(AssertionError, match="refcounts do not match block tables"):
        s.run()
