"""kvsim/engine/replica.py: with a paged KV manager, Replica._step works out the token states and the
breakdown itself (PagedKVManager's formulas, no ContextSums or breakdown tuple); the rows must be those the
manager's own token_states / breakdown give."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvsim.engine.fleet.cluster as cluster
from kvsim.engine.replica import Replica
from kvsim.engine.simulation import Simulation
from kvsim.scenario import load_scenario

WORKLOADS = Path(__file__).parents[2] / "workloads"


def _run(monkeypatch, name: str, general: bool, extra: tuple[str, ...] = ()):
    """(each replica's _paged as built, the timeline); general: every replica takes the general path."""
    paged = []

    def build(*args, **kwargs):
        r = Replica(*args, **kwargs)
        paged.append(r._paged)
        if general:
            r._paged = False  # the manager's token_states and breakdown, as for any other manager
        return r

    monkeypatch.setattr(cluster, "Replica", build)
    sim = Simulation(load_scenario(WORKLOADS / name, ["simulation.requests=150", *extra]))
    return paged, sim.run().timeline


@pytest.mark.parametrize("name,extra", [("chat.yaml", ()), ("fleet_chat.yaml", ()),
                                        ("agentic.yaml", ()), ("sparsity_chat.yaml", ())])
def test_paged_shortcut_writes_the_managers_rows(monkeypatch, name, extra):
    paged, fast = _run(monkeypatch, name, False, extra)
    _, general = _run(monkeypatch, name, True, extra)
    assert paged and all(paged)
    assert list(fast.columns) == list(general.columns)
    assert fast.equals(general)


def test_other_managers_take_the_general_path(monkeypatch):
    paged, _ = _run(monkeypatch, "long_context.yaml", False)
    assert paged and not any(paged)  # (a KVCoordinator: its own token_states and breakdown)
