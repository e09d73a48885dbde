"""kvsim/metrics/frames.py on the hand-filled recorder of conftest.py and hand-built frames."""

import math

import pandas as pd

from kvsim.metrics.frames import (
    completed,
    completed_mask,
    makespan_s,
    replica_capacities,
    row_capacity,
    with_hold,
)


def test_with_hold_matches_recorder(recorder):
    tl = recorder.timeline_frame()
    derived = with_hold(tl.drop(columns="hold_s"))
    assert derived["hold_s"].tolist() == [1.0, 0.5, 0.5, 1.0]
    assert with_hold(tl) is tl


def test_completed_and_makespan(frames):
    requests, _ = frames
    # rid 2 has no finish_s, rid 3 was rejected
    assert completed_mask(requests).tolist() == [True, True, False, False]
    assert completed(requests)["rid"].tolist() == [0, 1]
    assert makespan_s(requests) == 2.0  # last completion (2.0) minus first arrival (0.0)


def test_makespan_none_when_nothing_finished():
    df = pd.DataFrame({"arrival_s": [1.0], "finish_s": [float("nan")]})
    assert makespan_s(df) is None
    assert completed_mask(df).tolist() == [False]  # no `rejected` column: none rejected


def test_replica_capacities_fall_back_to_the_pool_then_the_run():
    replicas = [{"index": 0, "pool": "a", "capacity_blocks": 100, "block_size": 32},
                {"index": 1, "pool": "a", "capacity_blocks": 200},
                {"index": 2, "pool": "b", "capacity_blocks": 0}]
    caps = replica_capacities(replicas, [{"name": "a", "block_size": 16}], 8)
    assert caps[0] == (100.0, 32.0) and caps[1] == (200.0, 16.0)
    assert math.isnan(caps[2][0]) and caps[2][1] == 8.0
    blocks, sizes = row_capacity(pd.DataFrame({"replica": [1, 0, 5]}), caps)
    assert blocks.tolist()[:2] == [200.0, 100.0] and sizes.tolist()[:2] == [16.0, 32.0]
    assert math.isnan(blocks.iloc[2]) and math.isnan(sizes.iloc[2])
