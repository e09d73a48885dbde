"""A kernel table as numpy columns, for the cost model's construction without pandas.

Building a kernel cost model selects rows of its tables (`df[df["dtype"] == "bfloat16"]`), reads columns
(`df["m"].to_numpy()`, `.unique()`) and builds grids from them: those few operations are here, on numpy
arrays read from the Parquet file's pyarrow table, so a run never imports pandas (a quarter of a short
run's start-up). Any other DataFrame attribute (`groupby`, `assign`, `iloc`, `copy`, ...) is pandas' own,
on the frame pandas would have held: the whole table converted once, the same rows (with their labels)
and columns taken. Values, dtypes and row order are those of `pyarrow.Table.to_pandas()`, so every
selection gives the rows the DataFrame would, in the same order. The arrays are read-only: a `Columns` is
never changed, so one can be shared (kvsim/specs/kernel_tables.py caches a table per process).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class _Source:
    """One table's columns as read-only numpy arrays (each converted on first use) and, when an
    operation needs it, its pandas frame (`read_frame()`'s, or the pyarrow table's)."""

    __slots__ = ("table", "names", "arrays", "read_frame", "_frame")

    def __init__(self, table, names: tuple[str, ...], read_frame: Callable[[], Any] | None) -> None:
        self.table, self.names, self.read_frame = table, names, read_frame
        self.arrays: dict[str, np.ndarray] = {}
        self._frame = None

    def array(self, name: str) -> np.ndarray:
        arr = self.arrays.get(name)
        if arr is None:
            chunks = [_numpy(c) for c in self.table.column(name).chunks]
            arr = chunks[0] if len(chunks) == 1 else np.concatenate(chunks) if chunks else self.frame()[
                name].to_numpy()
            arr.flags.writeable = False
            self.arrays[name] = arr
        return arr

    def frame(self):
        if self._frame is None:
            frame = self.read_frame() if self.read_frame is not None else self.table.to_pandas()
            self._frame = frame[list(self.names)]
        return self._frame


_FIXED = {"int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint64": np.uint64,
          "uint32": np.uint32, "uint16": np.uint16, "uint8": np.uint8, "double": np.float64,
          "float": np.float32}


def _numpy(chunk) -> np.ndarray:
    """One pyarrow array as the numpy array pandas would hold: numbers from the buffer, strings read as a
    dictionary (`strings_as_dictionary`) as an object array of str; anything else (nulls, other types)
    through pyarrow's own conversion (which imports pandas)."""
    if chunk.null_count == 0:
        kind = _FIXED.get(str(chunk.type))
        if kind is not None:
            size = np.dtype(kind).itemsize
            return np.frombuffer(chunk.buffers()[1], dtype=kind, count=len(chunk),
                                 offset=chunk.offset * size)
        if hasattr(chunk, "dictionary") and str(chunk.dictionary.type) in ("string", "large_string"):
            values = np.array(chunk.dictionary.to_pylist() + [""], dtype=object)[:-1]
            return values[_numpy(chunk.indices)]
    return np.asarray(chunk.to_pandas().to_numpy()) if hasattr(chunk, "dictionary") else np.asarray(
        chunk.to_numpy(zero_copy_only=False))


def strings_as_dictionary(schema) -> list[str]:
    """The string columns of a pyarrow schema: ParquetFile's `read_dictionary` for `Columns`."""
    return [f.name for f in schema if str(f.type) in ("string", "large_string")]


class Column(np.ndarray):
    """A column: a numpy array with the pandas.Series methods the cost models call on table columns
    (`unique` in order of first appearance, `nunique`, `isin`, `to_numpy`); any other Series attribute is
    pandas' own, on the column as a Series."""

    def unique(self) -> np.ndarray:
        values = np.asarray(self)
        _, first = np.unique(values, return_index=True)
        return values[np.sort(first)]

    def nunique(self) -> int:
        return len(np.unique(np.asarray(self)))

    def isin(self, values) -> np.ndarray:
        return np.isin(np.asarray(self), list(values))

    def to_numpy(self, dtype=None) -> np.ndarray:
        return np.asarray(self, dtype=dtype)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # (numpy's own probes, e.g. np.ma's `_mask`: no pandas for those)
            raise AttributeError(name)
        import pandas as pd

        return getattr(pd.Series(np.asarray(self)), name)


class Columns:
    """A kernel table's rows (module docstring): `len`, `columns`, `df[name]` (a `Column`), `df[mask]`
    and `df[[names]]` here; every other attribute is the pandas DataFrame's."""

    __slots__ = ("_source", "_names", "_rows", "_cols")

    def __init__(self, source: _Source, names: tuple[str, ...], rows: np.ndarray | None = None) -> None:
        self._source, self._names, self._rows = source, names, rows
        self._cols: dict[str, Column] = {}

    @classmethod
    def from_arrow(cls, table, names: tuple[str, ...], read_frame: Callable[[], Any] | None = None
                   ) -> Columns:
        """The columns `names` (in that order) of a pyarrow Table; `read_frame`: the DataFrame pandas
        would hold (the table's own conversion without it: its dictionary columns would be categorical)."""
        return cls(_Source(table, tuple(names), read_frame), tuple(names))

    @property
    def columns(self) -> tuple[str, ...]:
        return self._names

    def __len__(self) -> int:
        return self._source.table.num_rows if self._rows is None else len(self._rows)

    def __iter__(self):
        return iter(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __getitem__(self, key):
        if isinstance(key, str):
            col = self._cols.get(key)
            if col is None:
                if key not in self._names:
                    raise KeyError(key)
                arr = self._source.array(key)
                col = self._cols[key] = (arr if self._rows is None else arr[self._rows]).view(Column)
            return col
        if isinstance(key, list) and all(isinstance(k, str) for k in key):
            missing = [k for k in key if k not in self._names]
            if missing:
                raise KeyError(f"{missing} not in index")
            return Columns(self._source, tuple(key), self._rows)
        mask = np.asarray(key)
        if mask.dtype != bool or mask.shape != (len(self),):
            return self.frame()[key]
        picked = np.flatnonzero(mask)
        return Columns(self._source, self._names, picked if self._rows is None else self._rows[picked])

    def frame(self):
        """The pandas DataFrame of these rows and columns (the labels the table's rows had)."""
        full = self._source.frame()
        out = full if self._rows is None else full.iloc[self._rows]
        return out[list(self._names)] if self._names != self._source.names else out.copy()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.frame(), name)
