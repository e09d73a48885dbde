"""The Recorder: named rows in, typed columns out; extra column groups registered up front."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from kvsim.metrics.recorder import (
    _CHUNK,
    REQUEST_COLUMNS,
    TIMELINE_COLUMNS,
    ColumnGroup,
    IterationRow,
    Recorder,
    RequestRow,
)


def busy(replica: int, it: int, t: float, **over) -> IterationRow:
    values = {name: 1 for name in TIMELINE_COLUMNS} | {"replica": replica, "iteration": it, "t_s": t,
                                                        "dt_s": 0.5} | over
    return IterationRow(**values)


def served(rid: int, **over) -> RequestRow:
    values = dict(rid=rid, replica=0, arrival_s=0.0, prompt_len=10, output_len=3, n=1, first_scheduled_s=0.0,
                  first_token_s=0.5, finish_s=1.5, preemptions=0, cached_tokens=0, rejected=0) | over
    return RequestRow(**values)


def test_columns_are_the_row_fields_in_order():
    assert list(TIMELINE_COLUMNS) == [f.name for f in fields(IterationRow)]
    assert list(REQUEST_COLUMNS) == [f.name for f in fields(RequestRow)]
    assert TIMELINE_COLUMNS["t_s"] == "d" and TIMELINE_COLUMNS["kv_free"] == "q"
    assert REQUEST_COLUMNS["finish_s"] == "d" and REQUEST_COLUMNS["rejected"] == "q"
    with pytest.raises(TypeError):  # keywords only: a row names every column
        IterationRow(*range(len(TIMELINE_COLUMNS)))


def test_idle_and_refused_rows():
    idle = IterationRow.idle(2, 7.5, kv_used_blocks=4, kv_token_states=50, kv_cached_blocks=1,
                             breakdown=(0, 14, 0, 100, 4))
    assert (idle.replica, idle.iteration, idle.t_s, idle.dt_s, idle.waiting) == (2, -1, 7.5, 0.0, 0)
    assert (idle.kv_internal_frag, idle.kv_free, idle.kv_unshared_blocks) == (14, 100, 4)
    refused = RequestRow.refused(3, 1, 2.0, 9000, 5, 1)
    assert refused.rejected == 1 and math.isnan(refused.first_token_s) and refused.cached_tokens == 0


def test_frames_keep_every_row_across_chunks():
    rec = Recorder()
    n = 3 * _CHUNK + 5
    for i in range(n):
        rec.iteration(busy(i % 2, i // 2, float(i)))
        rec.request(served(n - 1 - i))  # finishing out of rid order
    tl = rec.timeline_frame()
    assert len(tl) == n and list(tl.columns) == [*TIMELINE_COLUMNS, "hold_s"]
    assert tl["t_s"].tolist() == [float(i) for i in range(n)]
    assert tl.dtypes["iteration"] == "int64" and tl.dtypes["t_s"] == "float64"
    rq = rec.requests_frame()
    assert rq["rid"].tolist() == list(range(n))
    assert list(rq.columns) == [*REQUEST_COLUMNS, "ttft_s", "e2e_s", "tpot_s", "queue_s"]


def test_extra_groups_follow_the_derived_columns_with_their_defaults():
    rec = Recorder()
    rec.add_timeline_columns(ColumnGroup({"x_tokens": "q", "x_bytes": "d"}, default=0))
    rec.add_request_columns(ColumnGroup({"y_steps": "q", "y_mass": "d"}, default=math.nan))
    rec.iteration(busy(0, 0, 0.0), (5, 2.5))
    rec.iteration(IterationRow.idle(0, 1.0, 0, 0, 0, (0, 0, 0, 10, 0)))  # an idle row: defaults
    rec.request(served(1), (7, 0.9))
    rec.request(RequestRow.refused(0, 0, 0.0, 10, 3, 1), None)  # never decoded: NaN
    tl = rec.timeline_frame()
    assert list(tl.columns)[-3:] == ["hold_s", "x_tokens", "x_bytes"]
    assert tl["x_tokens"].tolist() == [5, 0] and tl.dtypes["x_tokens"] == "int64"
    assert tl["x_bytes"].tolist() == [2.5, 0.0]
    rq = rec.requests_frame()
    assert list(rq.columns)[-3:] == ["queue_s", "y_steps", "y_mass"]
    assert rq["rid"].tolist() == [0, 1]  # the extra values moved with their rows
    assert math.isnan(rq["y_steps"][0]) and rq["y_steps"][1] == 7
    assert rq.dtypes["y_steps"] == "float64"  # an int column that took NaN


def test_an_int_column_with_a_nan_default_stays_int_when_every_row_carries_it():
    rec = Recorder()
    rec.add_request_columns(ColumnGroup({"y_steps": "q"}, default=math.nan))
    rec.request(served(0), (3,))
    rec.request(served(1), (4,))
    rq = rec.requests_frame()
    assert rq.dtypes["y_steps"] == "int64" and rq["y_steps"].tolist() == [3, 4]


def test_groups_are_registered_before_the_first_row_and_once():
    rec = Recorder()
    with pytest.raises(ValueError, match="registered twice"):
        rec.add_timeline_columns(ColumnGroup({"t_s": "d"}))
    rec.add_timeline_columns(ColumnGroup({"x": "q"}))
    with pytest.raises(ValueError, match="registered twice"):
        rec.add_timeline_columns(ColumnGroup({"x": "q"}))
    rec.iteration(busy(0, 0, 0.0), (1,))
    with pytest.raises(RuntimeError, match="before the first row"):
        rec.add_timeline_columns(ColumnGroup({"z": "q"}))
    with pytest.raises(ValueError, match="1 registered"):
        rec.iteration(busy(0, 1, 1.0), (1,), (2,))
    plain = Recorder()
    with pytest.raises(ValueError, match="0 registered"):
        plain.request(served(0), (1,))
