"""Append-only columns the engine writes during a run; the tables are handed over once at the end.

A row is a slotted dataclass whose field names are the column names (`IterationRow` per engine
iteration, `RequestRow` per request); the recorder packs its values into a buffer (int64 and float64, in
field order: one C call per row), then moves them a few thousand rows at a time into typed columns: floats
to float64 arrays, ints to `IntColumn`s (no storage while a column is all zeros, then int8 / int16 / int32 /
int64, as narrow as its values allow). Every CHUNK_ROWS rows the columns are sealed into a chunk of a
ColumnStore (kvsim/metrics/column_store.py: the chunks after the first wait on disk), so what a run holds
in memory is one chunk per table, whatever its length. `Recorder.take_tables` hands both tables over as
RunTables (kvsim/metrics/run_tables.py: the derived columns, and the frames only when asked); the frames
are int64 / float64 whatever the storage. Other rooms add
column groups of their own (`ColumnGroup`: name -> typecode, and a default for rows that do not carry the
group) before the run starts; their values ride along with each row and the columns follow the built-in
and derived ones in the frames. Imports nothing from the rest of kvsim but its own column store.
"""

from __future__ import annotations

import math
import struct
from array import array
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from kvsim.metrics.column_store import CHUNK_ROWS, ColumnStore
from kvsim.metrics.run_tables import RunTables

if TYPE_CHECKING:
    import pandas as pd

_COMPILED = not __file__.endswith(".py")
"""Compiled by Cython (recorder.pxd): append_values writes a row's C values itself (`_pack_row`)."""
_TYPECODES = {"int": "q", "float": "d"}  # field annotation -> array typecode ('q' int64, 'd' float64)
_CHUNK = 4096
"""Rows held packed (bytes, no objects) before they move into the columns, a column at a time."""


@dataclass(slots=True, kw_only=True)
class IterationRow:
    """One timeline row: the state of a replica as one iteration was scheduled (an idle row, iteration
    -1, marks when the replica ran out of work)."""

    replica: int
    iteration: int
    t_s: float              # iteration start (simulated seconds)
    dt_s: float             # iteration duration from the cost model
    running_reqs: int       # requests holding KV on the GPU and scheduled this iteration
    num_seqs: int           # sequences in the batch
    prefill_seqs: int
    prefill_tokens: int
    decode_seqs: int
    waiting: int            # requests queued (arrived, not admitted, incl. recompute-preempted)
    swapped: int            # requests swapped out to host memory
    kv_used_blocks: int     # blocks referenced by sequences (excludes cached-free blocks)
    kv_token_states: int    # slots holding real KV, shared slots counted once
    kv_cached_blocks: int   # blocks with refcount 0 kept for prefix reuse
    preempted: int          # sequences preempted in this iteration
    cow_copies: int         # copy-on-write block copies in this iteration
    # KV breakdown in token slots (kvsim/kvcache/breakdown.py); with kv_token_states they sum to capacity
    kv_reservation: int     # reserved for tokens not generated yet (contiguous layouts)
    kv_internal_frag: int   # allocated, holding no KV (never will: contiguous; not yet: paged)
    kv_external_frag: int   # free, in holes too small for the next waiting request (contiguous)
    kv_free: int            # the rest of the free slots
    kv_unshared_blocks: int  # blocks the sequences would hold without sharing

    @classmethod
    def idle(cls, replica: int, t_s: float, kv_used_blocks: int, kv_token_states: int,
             kv_cached_blocks: int, breakdown: tuple[int, int, int, int, int]) -> IterationRow:
        """The row of a replica with no work at t_s: no batch, nothing queued; the KV as it stands
        (breakdown: the BREAKDOWN_COLUMNS values)."""
        reservation, internal, external, free, unshared = breakdown
        return cls(replica=replica, iteration=-1, t_s=t_s, dt_s=0.0, running_reqs=0, num_seqs=0,
                   prefill_seqs=0, prefill_tokens=0, decode_seqs=0, waiting=0, swapped=0,
                   kv_used_blocks=kv_used_blocks, kv_token_states=kv_token_states,
                   kv_cached_blocks=kv_cached_blocks, preempted=0, cow_copies=0,
                   kv_reservation=reservation, kv_internal_frag=internal, kv_external_frag=external,
                   kv_free=free, kv_unshared_blocks=unshared)


@dataclass(slots=True, kw_only=True)
class RequestRow:
    """One request row, written when the request finishes or is refused."""

    rid: int
    replica: int
    arrival_s: float
    prompt_len: int
    output_len: int
    n: int
    first_scheduled_s: float
    first_token_s: float
    finish_s: float
    preemptions: int
    cached_tokens: int      # prompt tokens served from the prefix cache (0 without one)
    rejected: int           # 1 if the engine refused the request (longer than max_model_len or KV capacity)
    session: int = -1       # the chat session / agent episode the request belongs to; -1: none

    @classmethod
    def refused(cls, rid: int, replica: int, arrival_s: float, prompt_len: int, output_len: int,
                n: int, session: int = -1) -> RequestRow:
        """A request the engine refused outright: never scheduled, times NaN."""
        nan = math.nan
        return cls(rid=rid, replica=replica, arrival_s=arrival_s, prompt_len=prompt_len,
                   output_len=output_len, n=n, first_scheduled_s=nan, first_token_s=nan, finish_s=nan,
                   preemptions=0, cached_tokens=0, rejected=1, session=session)


def columns_of(row_type: type) -> dict[str, str]:
    """name -> array typecode of a row dataclass's fields, in field order."""
    return {f.name: _TYPECODES[str(f.type)] for f in fields(row_type)}


TIMELINE_COLUMNS: dict[str, str] = columns_of(IterationRow)
REQUEST_COLUMNS: dict[str, str] = columns_of(RequestRow)

_WIDTHS = ("b", "h", "i", "q")
"""IntColumn storage, narrowest first: int8, int16, int32, int64."""
_LIMITS = {code: (-(1 << (8 * array(code).itemsize - 1)), (1 << (8 * array(code).itemsize - 1)) - 1)
           for code in _WIDTHS}
_NUMPY = {"b": np.int8, "h": np.int16, "i": np.int32, "q": np.int64, "d": np.float64}


class IntColumn:
    """An int64 column stored as narrowly as its values allow: only a count while every value so far is
    0, then an array of int8, int16, int32 or int64, widened (copied once) when a value does not fit."""

    __slots__ = ("data", "size")

    def __init__(self) -> None:
        self.data: array | None = None  # None: `size` zeros
        self.size = 0

    def __len__(self) -> int:
        return self.size

    @property
    def typecode(self) -> str | None:
        """The storage's array typecode (None while the column is all zeros)."""
        return None if self.data is None else self.data.typecode

    def extend_array(self, values: np.ndarray) -> None:
        """`extend` of an int64 array: the same storage (the narrowest width that holds every value)."""
        n = len(values)
        data = self.data
        if data is None:
            if not values.any():
                self.size += n
                return
            data = self.data = array("b", bytes(self.size))
        lo, hi = int(values.min()), int(values.max())
        low, high = _LIMITS[data.typecode]
        if lo < low or hi > high:
            data = self.data = _widen(data, lo, hi)
        data.frombytes(values.astype(_NUMPY[data.typecode]).tobytes())
        self.size += n

    def extend(self, values: list[int]) -> None:
        """Append values (ints, or bools)."""
        data = self.data
        if data is None:
            if not any(values):
                self.size += len(values)
                return
            data = self.data = array("b", bytes(self.size))
        try:
            data.extend(values)
        except OverflowError:  # the values before the one that did not fit went in: take them out
            del data[self.size:]
            data = self.data = _widen(data, min(values), max(values))
            data.extend(values)
        self.size += len(values)

    def numpy(self) -> np.ndarray:
        """The values as int64 (a view of the storage when it is int64; zeros the OS maps lazily)."""
        if self.data is None:
            return np.zeros(self.size, dtype=np.int64)
        view = np.frombuffer(self.data, dtype=_NUMPY[self.data.typecode])
        return view if view.dtype == np.int64 else view.astype(np.int64)


def _widen(data: array, lo: int, hi: int) -> array:
    """data's values in the narrowest width that also holds lo..hi (OverflowError past int64)."""
    start = _WIDTHS.index(data.typecode) + 1
    for code in _WIDTHS[start:]:
        low, high = _LIMITS[code]
        if low <= lo and hi <= high:
            break
    else:
        raise OverflowError(f"int column value out of int64 range ({lo}..{hi})")
    out = array(code)
    out.frombytes(np.frombuffer(data, dtype=_NUMPY[data.typecode]).astype(_NUMPY[code]).tobytes())
    return out


@dataclass(frozen=True, slots=True)
class ColumnGroup:
    """Extra columns registered with a Recorder before the run: name -> typecode ('q' int64, 'd'
    float64), and the value a row that does not carry the group gets (0, or NaN: an int column that
    took NaN becomes float64)."""

    columns: dict[str, str]
    default: float = 0


class _Group:
    """A registered ColumnGroup's arrays and how many rows took its default."""

    __slots__ = ("spec", "arrays", "appends", "defaulted", "nan_default")

    def __init__(self, spec: ColumnGroup) -> None:
        self.spec = spec
        self.nan_default = spec.default != spec.default
        self.defaulted = 0
        self.reset()

    def reset(self) -> None:
        # an int column that may take NaN is held as float64, and stays float64 if any row took NaN
        self.arrays = {k: array("d" if self.nan_default else t) for k, t in self.spec.columns.items()}
        self.appends = tuple(a.append for a in self.arrays.values())

    def kinds(self) -> dict[str, str]:
        """name -> the frame's kind: 'q' int64 unless an int column held as float64 took NaN."""
        return {k: "d" if t == "q" and self.nan_default and self.defaulted else t
                for k, t in self.spec.columns.items()}


class _Columns:
    """One table's columns: the row type's fields, then the registered groups'.

    Rows' values in field order (a row object's read by `values_of`, or the values themselves:
    `Recorder.iteration_values`) are packed into `pending` (int64 / float64, struct `pack`: exact, and an
    int out of int64's range or a float in an int column raises) and moved into the columns up to _CHUNK
    rows at a time, a column at a time (numpy views of the packed rows): cheaper than appending each value
    of each row. Every CHUNK_ROWS rows the columns are sealed into `sealed` (a ColumnStore) and start
    again empty (a flush never crosses that boundary: `limit`)."""

    __slots__ = ("names", "row_kinds", "store", "floats", "ints", "pending", "npending", "limit", "pack",
                 "row_dtype", "rows", "groups", "sealed", "values_of", "codes", "xcodes", "xsizes",
                 "xdtype", "xpending", "nx")

    def __init__(self, row_type: type) -> None:
        self.row_kinds = columns_of(row_type)
        self.names = tuple(self.row_kinds)
        self.values_of = attrgetter(*self.names)
        """A row object's values, in field order (a tuple)."""
        self.codes = "".join(self.row_kinds.values()).encode()
        """The columns' struct codes, one byte each ('q' int64, 'd' float64)."""
        self.pack = struct.Struct("=" + self.codes.decode()).pack
        self.row_dtype = np.dtype([(k, "=f8" if t == "d" else "=i8") for k, t in self.row_kinds.items()])
        self._reset()
        self.pending = bytearray(_CHUNK * self.row_dtype.itemsize)
        """The pending rows, packed: row i at i x the row's size (room for _CHUNK rows, made once per flush:
        no growing per row); `npending` rows of it hold rows."""
        self.npending = 0
        self.rows = 0  # rows in the columns since the last seal (pending ones not counted)
        self.limit = min(_CHUNK, CHUNK_ROWS)
        self.groups: list[_Group] = []
        self.sealed: ColumnStore | None = None
        self.xcodes: bytes | None = None
        """Compiled only: the groups' columns' storage codes ('q' int64, 'd' float64), one byte each, in
        order; the rows whose group values were all given (exact ints / floats) are packed into `xpending`
        (`nx` of them, the `xdtype` layout) and moved into the groups' arrays at `flush_extra` (before any
        group value appended another way, and at every flush). None: no groups."""
        self.xsizes = b""  # each group's column count, one byte each
        self.xdtype = None
        self.xpending = bytearray()
        self.nx = 0

    def _reset(self) -> None:
        self.store: dict[str, array | IntColumn] = {
            k: array("d") if t == "d" else IntColumn() for k, t in self.row_kinds.items()}
        # (column, its index in the row)
        self.floats = tuple((c, j) for j, c in enumerate(self.store.values()) if isinstance(c, array))
        self.ints = tuple((c, j) for j, c in enumerate(self.store.values()) if isinstance(c, IntColumn))

    def register(self, spec: ColumnGroup) -> None:
        if self.rows or self.npending or self.sealed is not None:
            raise RuntimeError("column groups are registered before the first row")
        taken = set(self.names).union(*(g.arrays for g in self.groups))
        clash = taken.intersection(spec.columns)
        if clash:
            raise ValueError(f"columns registered twice: {sorted(clash)}")
        group = _Group(spec)
        self.groups.append(group)
        arrays = [(k, a) for g in self.groups for k, a in g.arrays.items()]
        if len(arrays) <= 64 and all(len(g.arrays) < 256 for g in self.groups):
            self.xcodes = "".join(a.typecode for _, a in arrays).encode()
            self.xsizes = bytes(len(g.arrays) for g in self.groups)
            self.xdtype = np.dtype([(k, "=f8" if a.typecode == "d" else "=i8") for k, a in arrays])
            self.xpending = bytearray(_CHUNK * self.xdtype.itemsize)
        else:  # (no C row that wide: every row's group values appended one by one)
            self.xcodes = None

    def flush_extra(self) -> None:
        """Move the group values packed in `xpending` into the groups' arrays."""
        n = self.nx
        if not n:
            return
        width = len(self.xcodes)
        cols = np.frombuffer(self.xpending, dtype="=i8", count=n * width).reshape(n, width).T.copy()
        self.nx = 0
        j = 0
        for g in self.groups:
            for arr in g.arrays.values():
                arr.frombytes(cols[j].tobytes())
                j += 1

    def flush(self) -> None:
        """Move the pending rows into the columns (and seal them every CHUNK_ROWS rows)."""
        n = self.npending
        if not n:
            return
        self.flush_extra()
        width = len(self.names)
        # the rows' 8-byte values column by column (one transposing copy: each column contiguous; a float
        # column's int64 values are its float64 bits)
        cols = np.frombuffer(self.pending, dtype="=i8", count=n * width).reshape(n, width).T.copy()
        self.npending = 0
        for col, j in self.floats:
            col.frombytes(cols[j].tobytes())
        for icol, j in self.ints:
            icol.extend_array(cols[j])
        self.rows += n
        if self.rows >= CHUNK_ROWS:
            self.seal()
        else:
            self.limit = min(_CHUNK, CHUNK_ROWS - self.rows)

    def append_extra(self, extra: tuple) -> None:
        """Append one row's values of the registered groups (None or left out: the group's default)."""
        if self.nx:
            self.flush_extra()  # (the rows before this one first)
        groups = self.groups
        if len(extra) > len(groups):
            raise ValueError(f"{len(extra)} extra value groups for {len(groups)} registered column groups")
        for i, group in enumerate(groups):
            values = extra[i] if i < len(extra) else None
            if values is None:
                d = group.spec.default
                for app in group.appends:
                    app(d)
                group.defaulted += 1
            else:
                for app, v in zip(group.appends, values, strict=True):
                    app(v)

    def kinds(self) -> dict[str, str]:
        out = dict(self.row_kinds)
        for g in self.groups:
            out.update(g.kinds())
        return out

    def _chunk(self) -> dict[str, np.ndarray | None]:
        """The columns since the last seal as compact numpy arrays (copies; None: an all-zero int column)."""
        out: dict[str, np.ndarray | None] = {}
        for name, col in self.store.items():
            data = col if isinstance(col, array) else col.data
            out[name] = None if data is None else np.frombuffer(data, dtype=_NUMPY[data.typecode]).copy()
        for g in self.groups:
            for name, arr in g.arrays.items():
                out[name] = np.frombuffer(arr, dtype=_NUMPY[arr.typecode]).copy()
        return out

    def seal(self) -> None:
        """Move the columns into a new chunk of `sealed` and start them again empty."""
        if self.sealed is None:
            self.sealed = ColumnStore(self.kinds())
        self.sealed.add(self.rows, self._chunk())
        self.rows = 0
        self.limit = min(_CHUNK, CHUNK_ROWS)
        self._reset()
        for g in self.groups:
            g.reset()

    def finish(self, release: bool) -> ColumnStore:
        """Every row as a ColumnStore. release: the recorder is emptied (the store takes the chunks);
        else the rows since the last seal are copied into a store sharing the sealed chunks."""
        self.flush()
        if release:
            if self.rows or self.sealed is None:
                self.seal()
            store = self.sealed
            store.kinds = self.kinds()
            self.sealed = None
            for g in self.groups:
                g.defaulted = 0
            return store
        store = ColumnStore(self.kinds())
        if self.sealed is not None:
            store.share(self.sealed)
        if self.rows or self.sealed is None:
            store.add(self.rows, self._chunk(), spill=False)
        return store


class Recorder:
    """Column store for one run. `iteration(row)` and `request(row)` append one row each; `*extra` are
    the values of the registered column groups, one tuple (in the group's column order) or None (the
    group's default) per group, in registration order; groups left out take their defaults.

    `timeline_frame()` and `requests_frame()` can be called any number of times (rows may follow);
    `take_tables()` hands both tables over (RunTables) and empties the recorder; `take_frames()` builds
    both frames from them."""

    __slots__ = ("_timeline", "_requests")

    def __init__(self) -> None:
        self._timeline = _Columns(IterationRow)
        self._requests = _Columns(RequestRow)

    def add_timeline_columns(self, group: ColumnGroup) -> None:
        """Register extra timeline columns (before the first row); they follow hold_s in timeline_frame()."""
        self._timeline.register(group)

    def add_request_columns(self, group: ColumnGroup) -> None:
        """Register extra request columns (before the first row); they follow the derived latencies in
        requests_frame()."""
        self._requests.register(group)

    def iteration(self, row: IterationRow, *extra: tuple | None) -> None:
        """Append one timeline row (extra: the registered column groups' values, in registration order)."""
        _append(self._timeline, row, extra)

    def request(self, row: RequestRow, *extra: tuple | None) -> None:
        """Append one request row (extra as for `iteration`)."""
        _append(self._requests, row, extra)

    def iteration_values(self, values: tuple, *extra: tuple | None) -> None:
        """`iteration` of the row whose values, in TIMELINE_COLUMNS order, are `values` (the engine's
        per-iteration path: no row object)."""
        append_values(self._timeline, values, extra)

    def request_values(self, values: tuple, *extra: tuple | None) -> None:
        """`request` of the row whose values, in REQUEST_COLUMNS order, are `values`."""
        append_values(self._requests, values, extra)

    def tables(self, release: bool = False, slo: dict | None = None) -> RunTables:
        """Both tables as RunTables (slo: the scenario's, adding the requests' meets_slo column).
        release: the recorder is emptied, its chunks handed over."""
        return RunTables(self._requests.finish(release), self._timeline.finish(release),
                         len(REQUEST_COLUMNS), len(TIMELINE_COLUMNS), slo=slo)

    def take_tables(self, slo: dict | None = None) -> RunTables:
        """Both tables, emptying the recorder."""
        return self.tables(True, slo)

    def timeline_frame(self, release: bool = False) -> pd.DataFrame:
        """Timeline rows plus hold_s: how long each row's state holds, i.e. until the same replica's next
        iteration starts (dt_s plus any idle gap); the replica's last row holds for its dt_s.
        release: the rows are dropped from the recorder as the frame is built."""
        return RunTables(ColumnStore({}), self._timeline.finish(release), 0,
                         len(TIMELINE_COLUMNS)).timeline_frame()

    def requests_frame(self, release: bool = False) -> pd.DataFrame:
        """Request rows by rid, plus ttft_s, e2e_s, tpot_s and queue_s, then the registered columns.
        release: the rows are dropped from the recorder as the frame is built."""
        return RunTables(self._requests.finish(release), ColumnStore({}), len(REQUEST_COLUMNS),
                         0).requests_frame()

    def take_frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(requests_frame, timeline_frame), emptying the recorder."""
        tables = self.take_tables()
        return tables.requests_frame(), tables.timeline_frame()


def _append(cols: _Columns, row, extra: tuple) -> None:
    append_values(cols, cols.values_of(row), extra)


def append_values(cols: _Columns, values: tuple, extra: tuple) -> None:
    """Append one row of `cols` (a Recorder's `_timeline` or `_requests`): its values in column order and
    the registered groups' (extra: as `Recorder.iteration`'s). The engine's per-iteration path calls it
    directly (kvsim/engine/replica.py: a C call when compiled)."""
    if len(values) != len(cols.names):
        raise ValueError(f"{len(values)} values for {len(cols.names)} columns")
    if _COMPILED and type(values) is tuple and _pack_row(cols, values) \
            and ((not extra and not cols.groups) or _pack_extra(cols, extra)):  # noqa: F821 (recorder.pxd's)
        cols.npending += 1
        if cols.npending >= cols.limit:
            cols.flush()
        return
    try:
        row = cols.pack(*values)  # (first: a value that does not fit appends nothing)
    except struct.error:
        raise _unpackable(cols, values) from None
    if extra or cols.groups:
        cols.append_extra(extra)
    pending = cols.pending
    at = cols.npending * len(row)
    if len(pending) < at + len(row):  # (room for _CHUNK rows, `limit` at most: not reached)
        pending.extend(bytes(at + len(row) - len(pending)))
    pending[at:at + len(row)] = row
    cols.npending += 1
    if cols.npending >= cols.limit:
        cols.flush()


def append_timeline(cols: _Columns, replica: int, iteration: int, t_s: float, dt_s: float, running_reqs: int,
                    num_seqs: int, prefill_seqs: int, prefill_tokens: int, decode_seqs: int, waiting: int,
                    swapped: int, kv_used_blocks: int, kv_token_states: int, kv_cached_blocks: int,
                    preempted: int, cow_copies: int, kv_reservation: int, kv_internal_frag: int,
                    kv_external_frag: int, kv_free: int, kv_unshared_blocks: int) -> None:
    """append_values(cols, (replica, ..., kv_unshared_blocks), ()) for a timeline row (TIMELINE_COLUMNS
    order) without registered groups: the engine's per-iteration path (kvsim/engine/replica.py). Compiled,
    the values arrive as C values (recorder.pxd: int64 / double, as the row packs them) and are written
    into `cols.pending` by `_pack_timeline`, no tuple and no int objects, when the table is a timeline
    (its codes) with no groups and the buffer has room; append_values' path otherwise (the same bytes)."""
    if _COMPILED and _pack_timeline(  # noqa: F821 (recorder.pxd's)
            cols, replica, iteration, t_s, dt_s, running_reqs, num_seqs, prefill_seqs, prefill_tokens,
            decode_seqs, waiting, swapped, kv_used_blocks, kv_token_states, kv_cached_blocks, preempted,
            cow_copies, kv_reservation, kv_internal_frag, kv_external_frag, kv_free, kv_unshared_blocks):
        cols.npending += 1
        if cols.npending >= cols.limit:
            cols.flush()
        return
    append_values(cols, (replica, iteration, t_s, dt_s, running_reqs, num_seqs, prefill_seqs, prefill_tokens,
                         decode_seqs, waiting, swapped, kv_used_blocks, kv_token_states, kv_cached_blocks,
                         preempted, cow_copies, kv_reservation, kv_internal_frag, kv_external_frag, kv_free,
                         kv_unshared_blocks), ())


def _unpackable(cols: _Columns, values: tuple) -> Exception:
    """The error naming the first column whose value does not pack (an int column takes an int in int64's
    range, a float column a number)."""
    for name, kind, v in zip(cols.names, cols.row_kinds.values(), values, strict=True):
        try:
            struct.pack("=" + kind, v)
        except struct.error as e:
            if kind == "q" and isinstance(v, int):
                return OverflowError(f"int column {name!r} value {v} out of int64 range")
            return TypeError(f"column {name!r} ({'int' if kind == 'q' else 'float'}) got {v!r}: {e}")
    return ValueError("row does not pack")
