"""requests.parquet and timeline.parquet written a row group at a time: byte-identical to write_parquet of the
frames, across chunk and row-group boundaries; the column store's chunks and spill."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

import kvsim.metrics.parquet_out as parquet_out
import kvsim.metrics.recorder as recorder
from kvsim.metrics.column_store import ColumnStore
from kvsim.metrics.recorder import TIMELINE_COLUMNS, ColumnGroup, IterationRow, Recorder, RequestRow


def fill(rec: Recorder, n: int) -> None:
    rng = np.random.default_rng(3)
    for i in range(n):
        values = dict.fromkeys(TIMELINE_COLUMNS, 0) | {"replica": i % 2, "iteration": i, "t_s": i / 10,
                                                       "dt_s": 0.05, "kv_free": int(rng.integers(0, 70000))}
        rec.iteration(IterationRow(**values), (i % 5, 0.5 * i) if i % 3 else None)
        rid = (i * 7) % n  # out of rid order
        if i % 4 == 0:
            rec.request(RequestRow.refused(rid, 0, i / 10, 10, 5, 1), None)
        else:
            rec.request(RequestRow(rid=rid, replica=1, arrival_s=i / 10, prompt_len=10 + i,
                                   output_len=1 + i % 3, n=1, first_scheduled_s=i / 10 + 0.1,
                                   first_token_s=i / 10 + 0.2,
                                   finish_s=i / 10 + 1, preemptions=0, cached_tokens=0, rejected=0,
                                   session=i // 10), (i, 0.25 * i))


def write_frame(path, df: pd.DataFrame) -> None:
    """report.write_parquet with row groups of 300 rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    table = table.replace_schema_metadata(None)
    pq.write_table(table, path, compression="snappy", row_group_size=300)


def test_written_files_equal_write_parquet_of_the_frames(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder, "CHUNK_ROWS", 256)
    monkeypatch.setattr(parquet_out, "CHUNK_ROWS", 300)  # row groups across chunk boundaries
    for n in (0, 5, 1001):
        rec = Recorder()
        rec.add_timeline_columns(ColumnGroup({"x_count": "q", "x_mass": "d"}))
        rec.add_request_columns(ColumnGroup({"y_steps": "q", "y_mass": "d"}, default=math.nan))
        fill(rec, n)
        tables = rec.take_tables(slo={"ttft_s": {"p99": 0.3}})
        out = tmp_path / str(n)
        out.mkdir()
        parquet_out.write_tables(out, tables)
        ref = tmp_path / f"ref{n}"
        ref.mkdir()
        write_frame(ref / "requests.parquet", tables.requests_frame())
        write_frame(ref / "timeline.parquet", tables.timeline_frame())
        for name in ("requests.parquet", "timeline.parquet"):
            assert (out / name).read_bytes() == (ref / name).read_bytes(), (n, name)
        rq = tables.requests_frame()
        assert rq["rid"].tolist() == sorted(rq["rid"].tolist())
        if n:
            assert rq.dtypes["y_steps"] == "float64"  # refused rows took NaN
        assert rq.dtypes["meets_slo"] == "bool"


def test_regroup_cuts_exact_row_groups():
    chunks = [(3, {"a": np.arange(3)}), (0, {"a": np.arange(0)}), (5, {"a": np.arange(3, 8)})]
    got = [(rows, cols["a"].tolist()) for rows, cols in parquet_out.regroup(chunks, 4)]
    assert got == [(4, [0, 1, 2, 3]), (4, [4, 5, 6, 7])]
    assert [r for r, _ in parquet_out.regroup([(0, {"a": np.arange(0)})], 4)] == [0]


def test_column_store_widens_and_spills():
    store = ColumnStore({"a": "q", "b": "d"})
    store.add(2, {"a": np.array([1, 2], dtype=np.int8), "b": np.array([0.5, 1.5])})
    store.add(3, {"a": None, "b": np.array([2.5, 3.5, 4.5])})
    store.add(1, {"a": np.array([70000], dtype=np.int32), "b": np.array([9.0])})
    assert len(store) == 6 and store.chunk_count == 3
    assert store.column("a").tolist() == [1, 2, 0, 0, 0, 70000] and store.column("a").dtype == np.int64
    assert store.column("a", compact=True).dtype == np.int32
    assert store.column("b").tolist() == [0.5, 1.5, 2.5, 3.5, 4.5, 9.0]
    folder = store._dir
    assert folder is not None and len(list(Path(folder).iterdir())) == 2  # the chunks after the first
    del store
    assert not Path(folder).exists()  # removed with the store
