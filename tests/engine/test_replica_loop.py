"""kvsim/engine/replica.py: the replica's loop turn (_advance) outside the event loop: with no work it
schedules nothing and changes nothing; the process's steps are otherwise those of exact stepping
(tests/engine/test_exact_stepping.py)."""

from __future__ import annotations

from pathlib import Path

from kvsim.engine.simulation import Simulation
from kvsim.scenario import load_scenario

WORKLOADS = Path(__file__).parents[2] / "workloads"


def test_a_turn_without_work_schedules_nothing():
    sim = Simulation(load_scenario(WORKLOADS / "chat.yaml", ["simulation.requests=40"]))
    sim.run()
    for rep in sim.replicas:
        iterations = rep.sched.iterations
        assert not rep.sched.has_work()
        assert rep._advance(sim.env._now, False) is None
        assert rep.sched.iterations == iterations
