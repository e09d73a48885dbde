"""requests.parquet and timeline.parquet written from RunTables (kvsim/metrics/run_tables.py) one row group
at a time, each chunk cast to the frames' int64 / float64 / bool columns: the same file pyarrow's
write_table makes of the whole frame (report.write_parquet: no index, no metadata, snappy, row groups of
CHUNK_ROWS rows, NaN written as null as Table.from_pandas does), without the frame."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from kvsim.metrics.column_store import CHUNK_ROWS, KINDS
from kvsim.metrics.run_tables import RunTables


def write_tables(folder: Path, tables: RunTables) -> None:
    """folder/requests.parquet and folder/timeline.parquet."""
    write_chunks(folder / "requests.parquet", tables.request_names,
                 [KINDS[tables.request_kind(k)] for k in tables.request_names],
                 tables.request_groups(CHUNK_ROWS))
    write_chunks(folder / "timeline.parquet", tables.timeline_names,
                 [KINDS[tables.timeline_kind(k)] for k in tables.timeline_names],
                 _timeline_groups(tables))


def _timeline_groups(tables: RunTables) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    return regroup(tables.timeline_chunks(tables.timeline_names), CHUNK_ROWS)


def regroup(chunks: Iterable[tuple[int, dict[str, np.ndarray]]], size: int
            ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """The rows of `chunks` again, in runs of exactly `size` rows (the last one shorter; one empty run
    when there are no rows)."""
    held: list[dict[str, np.ndarray]] = []
    count = 0
    sent = False
    for rows, cols in chunks:
        start = 0
        while start < rows:
            take = min(size - count, rows - start)
            held.append({k: v[start:start + take] for k, v in cols.items()})
            count += take
            start += take
            if count == size:
                yield count, _joined(held)
                held, count, sent = [], 0, True
        if not held and not sent and rows == 0:
            held.append(cols)
    if count or not sent:
        yield count, _joined(held)


def _joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if len(parts) == 1:
        return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def write_chunks(path: Path, names: list[str], dtypes: list[np.dtype],
                 groups: Iterable[tuple[int, dict[str, np.ndarray]]]) -> None:
    """One Parquet file of columns `names` (numpy dtypes `dtypes`), a row group per item of `groups`."""
    # pyarrow imported here, where it is used: a run's start-up stays without it
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([pa.field(k, pa.from_numpy_dtype(d)) for k, d in zip(names, dtypes, strict=True)])
    with pq.ParquetWriter(path, schema, compression="snappy") as writer:
        for rows, cols in groups:
            arrays = [_arrow(pa, cols[k].astype(d, copy=False), schema.field(k).type)
                      for k, d in zip(names, dtypes, strict=True)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema), row_group_size=max(rows, 1))


def _arrow(pa, values: np.ndarray, kind):
    """pa.array(values, type=kind, from_pandas=True) (NaN as null) from the array's own buffers: pa.array
    imports pandas (its check for pandas objects), a tenth of a short run."""
    if values.dtype == np.bool_:
        data = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(data)], null_count=0)
    if values.dtype.kind not in "iuf":
        return pa.array(values, type=kind, from_pandas=True)
    values = np.ascontiguousarray(values)
    validity, nulls = None, 0
    if values.dtype.kind == "f":
        missing = np.isnan(values)
        nulls = int(np.count_nonzero(missing))
        if nulls:
            validity = pa.py_buffer(np.packbits(~missing, bitorder="little"))
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(values)], null_count=nulls)
