"""Chunked timeline figures: hand-computed tiny cases, and bit-for-bit agreement with stats.py over the whole
frame whatever the chunking."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import kvsim.metrics.recorder as recorder
from kvsim.metrics import timeline_figures as tf
from kvsim.metrics.recorder import TIMELINE_COLUMNS, IterationRow, Recorder
from kvsim.metrics.stats import time_weighted_mean, time_weighted_quantile, weighted_sum


def row(replica: int, t: float, running: int, dt: float = 1.0) -> IterationRow:
    values = dict.fromkeys(TIMELINE_COLUMNS, 0) | {"replica": replica, "iteration": 0, "t_s": t, "dt_s": dt,
                                                   "running_reqs": running, "kv_used_blocks": running}
    return IterationRow(**values)


def tables_of(rows: list[IterationRow], chunk_rows: int, monkeypatch):
    monkeypatch.setattr(recorder, "CHUNK_ROWS", chunk_rows)
    monkeypatch.setattr(recorder, "_CHUNK", 1)  # (flush every row: chunks of exactly chunk_rows rows)
    rec = Recorder()
    for r in rows:
        rec.iteration(r)
    return rec.take_tables()


def test_hand_computed_means_quantiles_and_holds(monkeypatch):
    # replica 0: rows at t 0, 1, 3 (holds 1, 2, then its dt 0.5); replica 1: rows at t 0, 4 (holds 4, 1)
    rows = [row(0, 0.0, 1), row(1, 0.0, 4), row(0, 1.0, 3), row(0, 3.0, 5, dt=0.5), row(1, 4.0, 2)]
    for chunk in (1, 2, 3, 100):
        tables = tables_of(rows, chunk, monkeypatch)
        assert tables.timeline_column("hold_s").tolist() == [1.0, 4.0, 2.0, 0.5, 1.0]
        mean = tf.ReplicaMeans(tables)
        # replica 0: (1*1 + 3*2 + 5*0.5) / 3.5 = 9.5 / 3.5; replica 1: (4*4 + 2*1) / 5 = 3.6
        got = mean(["running_reqs"], tf.column("running_reqs"))
        assert got == pytest.approx((9.5 / 3.5 + 3.6) / 2, abs=0)
        # weights by value: 1 -> 1, 2 -> 1, 3 -> 2, 4 -> 4, 5 -> 0.5 (total 8.5): CDF 1/8.5, 2/8.5, 4/8.5, ...
        assert tf.weighted_quantiles(tables, "running_reqs", (0.0, 0.3, 0.5, 0.99, 1.0)) == [1.0, 3.0, 4.0,
                                                                                           5.0, 5.0]
        assert tf.maximum(tables, ["running_reqs"]) == 5
        assert tf.total(tables, "running_reqs") == 15
        assert tf.weighted_sum(tables, "running_reqs") == 1 + 16 + 6 + 2.5 + 2


def test_chunked_figures_equal_the_whole_frame_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(7)
    n = 3000
    t = np.cumsum(rng.exponential(0.013, n))
    reps = rng.integers(0, 3, n)
    running = rng.integers(0, 300, n)
    running[rng.random(n) < 0.1] = 0
    dts = rng.exponential(0.01, n)
    rows = [row(int(r), float(x), int(k), float(d)) for r, x, k, d in zip(reps, t, running, dts, strict=True)]
    whole = tables_of(rows, 10**6, monkeypatch).timeline_frame()
    for chunk in (7, 64, 1000):
        tables = tables_of(rows, chunk, monkeypatch)
        assert tables.timeline.chunk_count > 1
        hold = tables.timeline_column("hold_s")
        assert hold.tobytes() == whole["hold_s"].to_numpy().tobytes()
        for q in (0.5, 0.9, 0.99):
            assert tf.weighted_quantiles(tables, "running_reqs", (q,)) == [
                time_weighted_quantile(whole["running_reqs"], whole["hold_s"], q)]
        expected = float(np.mean([time_weighted_mean(g["running_reqs"], g["hold_s"])
                                  for _, g in whole.groupby("replica", sort=True)]))
        assert tf.ReplicaMeans(tables)(["running_reqs"], tf.column("running_reqs")) == expected
        assert tf.weighted_sum(tables, "kv_used_blocks") == weighted_sum(
            whole["kv_used_blocks"].to_numpy(np.float64), whole["hold_s"].to_numpy())


def test_negative_weights_are_refused_as_stats_does(monkeypatch):
    tables = tables_of([row(0, 1.0, 1), row(0, 0.0, 2)], 100, monkeypatch)  # t goes back: hold -1
    with pytest.raises(ValueError, match="weights must be >= 0"):
        tf.ReplicaMeans(tables)(["running_reqs"], tf.column("running_reqs"))
    with pytest.raises(ValueError, match="weights must be >= 0"):
        tf.weighted_quantiles(tables, "running_reqs", (0.5,))


def test_empty_timeline(monkeypatch):
    tables = tables_of([], 100, monkeypatch)
    assert tf.weighted_quantiles(tables, "running_reqs", (0.5,)) == [None]
    assert tf.maximum(tables, ["running_reqs"]) is None
    assert tf.ReplicaMeans(tables)(["running_reqs"], tf.column("running_reqs")) is None
    assert isinstance(tables.timeline_frame(), pd.DataFrame) and len(tables.timeline_frame()) == 0
