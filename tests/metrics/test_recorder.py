"""The Recorder: named rows in, typed columns out; extra column groups registered up front."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest

from kvsim.metrics.recorder import (
    _CHUNK,
    REQUEST_COLUMNS,
    TIMELINE_COLUMNS,
    ColumnGroup,
    IntColumn,
    IterationRow,
    Recorder,
    RequestRow,
    append_timeline,
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


def test_int_columns_start_as_a_count_and_widen_as_values_need():
    col = IntColumn()
    col.extend([0, 0, 0])
    assert col.typecode is None and len(col) == 3 and col.numpy().tolist() == [0, 0, 0]
    col.extend([1, -128])
    assert col.typecode == "b"
    col.extend([5, 40_000, 7])  # 40,000 needs int32: the 5 that went in before it is not doubled
    assert col.typecode == "i" and len(col) == 8
    col.extend([2**40])
    assert col.typecode == "q"
    assert col.numpy().tolist() == [0, 0, 0, 1, -128, 5, 40_000, 7, 2**40]
    assert col.numpy().dtype == "int64"
    with pytest.raises(OverflowError):
        col.extend([2**63])


def test_a_column_that_stays_small_is_stored_small():
    rec = Recorder()
    for i in range(2 * _CHUNK):
        rec.iteration(busy(0, i, float(i), preempted=0, waiting=300, kv_free=70_000,
                           kv_used_blocks=3 * 2**31))
    rec._timeline.flush()
    store = rec._timeline.store
    assert store["preempted"].typecode is None  # all zeros: no storage
    assert store["replica"].typecode is None
    assert store["num_seqs"].typecode == "b" and store["waiting"].typecode == "h"
    assert store["kv_free"].typecode == "i" and store["kv_used_blocks"].typecode == "q"
    tl = rec.timeline_frame()
    assert (tl.dtypes.drop(["t_s", "dt_s", "hold_s"]) == "int64").all()
    assert tl["kv_used_blocks"].tolist() == [3 * 2**31] * (2 * _CHUNK)
    assert tl["waiting"].tolist() == [300] * (2 * _CHUNK) and tl["preempted"].sum() == 0


def test_frames_can_be_rebuilt_and_rows_may_follow():
    rec = Recorder()
    rec.iteration(busy(0, 0, 0.0))
    first = rec.timeline_frame()
    first.loc[0, "waiting"] = 99  # the frame is a copy: the recorder's rows do not change
    rec.iteration(busy(0, 1, 0.5))
    again = rec.timeline_frame()
    assert again["waiting"].tolist() == [1, 1] and again["hold_s"].tolist() == [0.5, 0.5]


def test_take_frames_equals_the_frames_and_empties_the_recorder():
    def filled() -> Recorder:
        rec = Recorder()
        rec.add_request_columns(ColumnGroup({"y_steps": "q", "y_mass": "d"}, default=math.nan))
        rec.add_timeline_columns(ColumnGroup({"x_tokens": "q"}))
        for i in range(3 * _CHUNK + 1):
            rec.iteration(busy(i % 3, i, float(i), kv_free=i * 1000), (i,))
            if i % 2:
                rec.request(served(100 - i, preemptions=i % 4), (i, 0.5 * i))
            else:
                rec.request(RequestRow.refused(100 - i, 0, 1.0, 10, 3, 1), None)
        return rec

    rq, tl = filled().requests_frame(), filled().timeline_frame()
    rec = filled()
    taken_rq, taken_tl = rec.take_frames()
    pd.testing.assert_frame_equal(taken_rq, rq)
    pd.testing.assert_frame_equal(taken_tl, tl)
    assert taken_rq["rid"].is_monotonic_increasing and taken_rq.dtypes["y_steps"] == "float64"
    empty_rq, empty_tl = rec.take_frames()
    assert len(empty_rq) == 0 and len(empty_tl) == 0
    assert list(empty_rq.columns) == list(rq.columns) and list(empty_tl.columns) == list(tl.columns)
    rec.iteration(busy(0, 0, 2.0), (4,))  # the recorder goes on after a take
    assert rec.timeline_frame()["x_tokens"].tolist() == [4]


def test_sealed_chunks_keep_their_narrow_storage_and_spill_after_the_first(monkeypatch):
    import kvsim.metrics.recorder as recorder

    monkeypatch.setattr(recorder, "CHUNK_ROWS", 100)  # (not a multiple of _CHUNK: no flush crosses a seal)
    rec = Recorder()
    n = 2 * 100 + 3
    for i in range(n):
        rec.iteration(busy(0, i, float(i)))
    tables = rec.take_tables()
    store = tables.timeline
    assert store.chunk_count == 3 and len(store) == n
    rows, cols = next(store.chunks(["iteration", "swapped", "t_s"]))
    assert rows == 100 and cols["iteration"].dtype == np.int8 and cols["t_s"].dtype == np.float64
    assert isinstance(store._chunks[1][1], str)  # on disk
    tl = tables.timeline_frame()
    assert tl["iteration"].tolist() == list(range(n)) and tl.dtypes["iteration"] == "int64"
    assert tl["hold_s"].tolist() == [1.0] * (n - 1) + [0.5]


def test_values_rows_are_the_rows_of_their_fields():
    """iteration_values / request_values (the engine's path: a tuple in column order, no row object) give
    the rows iteration / request give; a tuple of the wrong length is refused."""
    by_row, by_values = Recorder(), Recorder()
    for rec in (by_row, by_values):
        rec.add_timeline_columns(ColumnGroup({"x": "q"}))
    for i in range(2 * _CHUNK + 3):
        row, req = busy(i % 2, i, 0.25 * i, kv_free=i * 1000), served(i, finish_s=2.0 + i)
        by_row.iteration(row, (i,) if i % 2 else None)
        by_values.iteration_values(tuple(getattr(row, f.name) for f in fields(row)), (i,) if i % 2 else None)
        by_row.request(req)
        by_values.request_values(tuple(getattr(req, f.name) for f in fields(req)))
    pd.testing.assert_frame_equal(by_row.timeline_frame(), by_values.timeline_frame())
    pd.testing.assert_frame_equal(by_row.requests_frame(), by_values.requests_frame())
    with pytest.raises(ValueError, match="values for"):
        Recorder().request_values((1, 2, 3))


def test_append_timeline_rows_are_the_rows_of_their_fields():
    """append_timeline (the engine's per-iteration path: the values as arguments, C values when compiled)
    gives the rows iteration gives, exact (ints past 2**53, negative zero, an int time), across flushes;
    with a registered group it falls back to append_values' path (the group's default)."""
    for group in (False, True):
        by_row, by_args = Recorder(), Recorder()
        if group:
            for rec in (by_row, by_args):
                rec.add_timeline_columns(ColumnGroup({"x": "q"}))
        for i in range(2 * _CHUNK + 3):
            row = busy(i % 2, i, -0.0 if i == 3 else 0.25 * i, kv_free=i * 1000, kv_used_blocks=2**60 + i)
            if i == 5:
                row.t_s = 5  # (an int time: packed as the float)
            by_row.iteration(row)
            append_timeline(by_args._timeline, *(getattr(row, f.name) for f in fields(row)))
        pd.testing.assert_frame_equal(by_row.timeline_frame(), by_args.timeline_frame())
        assert by_args.timeline_frame()["kv_used_blocks"].iloc[-1] == 2**60 + 2 * _CHUNK + 2


def test_packed_rows_keep_their_values_and_groups_across_seals_that_are_no_multiple_of_a_flush(monkeypatch):
    """Rows wait packed (int64 / float64) and move into the columns up to _CHUNK at a time; a flush stops at
    a seal (CHUNK_ROWS need not be a multiple of _CHUNK), so a registered group's values stay with their
    rows, and every value comes back exact (ints past 2**53, NaN, negative zero)."""
    import kvsim.metrics.recorder as recorder

    monkeypatch.setattr(recorder, "CHUNK_ROWS", 37)
    monkeypatch.setattr(recorder, "_CHUNK", 10)
    rec = Recorder()
    rec.add_timeline_columns(ColumnGroup({"x": "q"}))
    n = 100
    for i in range(n):
        rec.iteration(busy(0, i, -0.0 if i == 3 else float(i), kv_used_blocks=2**60 + i), (i * 3,))
    tl = rec.timeline_frame()
    assert tl["x"].tolist() == [i * 3 for i in range(n)] and tl["iteration"].tolist() == list(range(n))
    assert tl["kv_used_blocks"].tolist() == [2**60 + i for i in range(n)]
    assert math.copysign(1.0, tl["t_s"][3]) == -1.0
    with pytest.raises(TypeError, match="column 'waiting' .int. got 1.5"):
        rec.iteration(busy(0, 0, 0.0, waiting=1.5))
    with pytest.raises(OverflowError, match="int column 'waiting' value 9223372036854775808 out of int64"):
        rec.iteration(busy(0, 0, 0.0, waiting=2**63))
    assert rec.timeline_frame()["iteration"].tolist() == list(range(n))  # a refused row appends nothing


def test_group_values_keep_their_rows_whichever_way_they_are_appended(monkeypatch):
    """Group values given as exact ints / floats are packed with their row (compiled), the others (None:
    the default, numpy numbers, groups left out) appended one by one; either way each value stays in its
    row, in order, across flushes and seals, stored as the array's append would store it."""
    import kvsim.metrics.recorder as recorder

    monkeypatch.setattr(recorder, "CHUNK_ROWS", 23)
    monkeypatch.setattr(recorder, "_CHUNK", 7)
    rec = Recorder()
    rec.add_timeline_columns(ColumnGroup({"a": "q", "b": "d"}, default=0))
    rec.add_timeline_columns(ColumnGroup({"c": "q", "d": "d"}, default=math.nan))
    want: dict[str, list] = {"a": [], "b": [], "c": [], "d": []}
    n = 80
    for i in range(n):
        if i % 11 == 5:
            extra: tuple = (None, None)
            got = (0, 0.0, math.nan, math.nan)
        elif i % 13 == 7:
            extra = ((np.int64(i), np.float64(i / 4)),)
            got = (i, i / 4, math.nan, math.nan)
        elif i % 17 == 3:
            extra = ()
            got = (0, 0.0, math.nan, math.nan)
        else:
            extra = ((i - 40, i if i % 2 else i / 8),
                     (2**60 + i if i % 3 else i, -0.0 if i == 4 else i * 1.5))
            got = (i - 40, float(i) if i % 2 else i / 8, float(2**60 + i if i % 3 else i),
                   -0.0 if i == 4 else i * 1.5)
        rec.iteration(busy(0, i, float(i)), *extra)
        for k, v in zip(want, got, strict=True):
            want[k].append(v)
        if i == 50:
            mid = rec.timeline_frame()
            assert mid["a"].tolist() == want["a"] and len(mid) == 51
    tl = rec.timeline_frame()
    assert tl["iteration"].tolist() == list(range(n))
    assert tl.dtypes["a"] == "int64" and tl.dtypes["c"] == "float64" and tl.dtypes["b"] == "float64"
    for k in want:
        np.testing.assert_array_equal(tl[k].to_numpy(), np.array(want[k], dtype=tl.dtypes[k]))
    assert math.copysign(1.0, tl["d"][4]) == -1.0
    with pytest.raises(TypeError):
        rec.iteration(busy(0, 0, 0.0), (1.5, 0.0))
