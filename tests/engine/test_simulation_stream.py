"""A run replays a RequestTable (each request built when it arrives or is released) exactly as it replays
the same requests as a list: the same rows, follow-ups included, and the recorder emptied into the
frames."""

from __future__ import annotations

import pandas as pd
import pytest

from kvsim.engine.simulation import Simulation
from kvsim.scenario import load_scenario
from kvsim.workload.request import RequestTable


@pytest.mark.parametrize("overrides", [
    ["workload.kind=chat", "simulation.requests=120", "workload.arrival.rate=8"],
    ["workload.kind=chat", "simulation.requests=90", "workload.arrival.process=closed_loop",
     "workload.arrival.users=4", "kv.prefix_cache=hash"],
    ["workload.kind=synthetic", "simulation.requests=100", "workload.arrival.process=closed_loop",
     "workload.arrival.users=3"],
    ["workload.kind=chat", "simulation.requests=150", "simulation.duration_s=6", "workload.arrival.rate=10"],
])
def test_a_table_runs_as_its_list(overrides):
    lazy = Simulation(load_scenario(None, overrides))
    stream = lazy.build_requests()
    assert isinstance(stream, RequestTable)
    listed = Simulation(load_scenario(None, overrides))
    listed.build_requests = lambda: list(stream)
    a, b = lazy.run(), listed.run()
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.timeline, b.timeline)
    assert any(r.after >= 0 for r in stream)  # follow-ups were exercised
    assert len(lazy.recorder.timeline_frame()) == 0  # the rows moved into the result


def test_requests_are_built_without_segments_where_nothing_reads_them():
    """Without a prefix cache or a token-level policy no request's segments are read: the run's table
    builds its requests without them (test_a_table_runs_as_its_list: the same rows as the list's)."""
    chat = ["workload.kind=chat", "simulation.requests=30"]
    plain = Simulation(load_scenario(None, chat))
    assert not plain._reads_content()
    assert Simulation(load_scenario(None, [*chat, "kv.prefix_cache=hash"]))._reads_content()
    assert Simulation(load_scenario(None, [*chat, "kv.sparsity.policy=h2o"]))._reads_content()
    assert plain.build_requests()[5].segments  # (build_requests itself keeps them: hitrate, compare)
