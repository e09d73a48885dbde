"""A finished table of the recorder (requests or timeline) as compact typed columns in chunks of CHUNK_ROWS
rows, so a long run's tables are never held widened, nor all in memory.

Each chunk holds a column in the narrowest type its values took (an int column that stayed 0 holds
nothing at all); chunks after the first stay on disk, in a temporary folder removed with the store, and are
read back one at a time. `column()` widens one column of every chunk into one int64 / float64 array;
`chunks()` yields the chunks in row order. Imports nothing from the rest of kvsim.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator

import numpy as np

CHUNK_ROWS = 1 << 20
"""Rows per chunk: pyarrow's default Parquet row group (1,048,576 rows), so a chunk is a row group."""

KINDS = {"q": np.dtype(np.int64), "d": np.dtype(np.float64), "?": np.dtype(np.bool_)}
"""A column's kind (as the frames hold it) -> numpy dtype."""


class ColumnStore:
    """Columns `kinds` (name -> 'q' int64, 'd' float64, '?' bool, in table order) in row chunks: the first
    in memory, the later ones spilled to a temporary folder (removed when the store is collected)."""

    __slots__ = ("kinds", "rows", "_chunks", "_dir", "_keep", "__weakref__")

    def __init__(self, kinds: dict[str, str]) -> None:
        self.kinds = dict(kinds)
        self.rows = 0
        self._chunks: list[tuple[int, dict[str, np.ndarray | None] | str]] = []
        self._dir: str | None = None
        self._keep: ColumnStore | None = None

    def share(self, other: ColumnStore) -> None:
        """Start with other's chunks (read, never changed; other's files live as long as this store)."""
        self._chunks = list(other._chunks)
        self.rows = other.rows
        self._keep = other

    def __len__(self) -> int:
        return self.rows

    @property
    def chunk_count(self) -> int:
        return len(self._chunks)

    def add(self, rows: int, columns: dict[str, np.ndarray | None], spill: bool = True) -> None:
        """Append a chunk of `rows` rows: name -> 1-d array of any numeric dtype (None: all zeros).
        spill: a chunk after the first goes to disk."""
        if spill and self._chunks:
            columns = self._spill(len(self._chunks), columns)
        self._chunks.append((rows, columns))
        self.rows += rows

    def _spill(self, index: int, columns: dict[str, np.ndarray | None]) -> str:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="kvsim-columns-")
            weakref.finalize(self, shutil.rmtree, self._dir, True)
        path = f"{self._dir}/{index}.npz"
        np.savez(path, **{k: v for k, v in columns.items() if v is not None})
        return path

    def _load(self, i: int, names) -> tuple[int, dict[str, np.ndarray | None]]:
        rows, cols = self._chunks[i]
        if not isinstance(cols, str):
            return rows, {k: cols.get(k) for k in names}
        with np.load(cols) as z:
            return rows, {k: z[k] if k in z.files else None for k in names}

    def chunks(self, names=None, widen: bool = False) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """(rows, name -> array) per chunk in row order; an all-zero int column comes as zeros. widen:
        arrays in their kind's dtype (int64 / float64 / bool), else as stored."""
        names = list(self.kinds) if names is None else list(names)
        for i in range(len(self._chunks)):
            rows, cols = self._load(i, names)
            out = {}
            for k in names:
                v = cols[k]
                if v is None:
                    v = np.zeros(rows, dtype=np.int8)
                out[k] = v.astype(KINDS[self.kinds[k]], copy=False) if widen else v
            yield rows, out

    def column(self, name: str, dtype=None, compact: bool = False) -> np.ndarray:
        """One column over every chunk as one array of `dtype` (default: its kind's, int64 / float64;
        compact: the narrowest dtype holding every chunk's)."""
        if compact:
            kinds = [c.dtype for _, cols in self.chunks([name]) for c in cols.values()]
            dtype = np.result_type(*kinds) if kinds else KINDS[self.kinds[name]]
        dtype = KINDS[self.kinds[name]] if dtype is None else np.dtype(dtype)
        out = np.empty(self.rows, dtype=dtype)
        at = 0
        for rows, cols in self.chunks([name]):
            out[at:at + rows] = cols[name]
            at += rows
        return out
