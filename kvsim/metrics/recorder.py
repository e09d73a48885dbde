"""Append-only columns the engine writes during a run; DataFrames are built once at the end.

A row is a slotted dataclass whose field names are the column names (`IterationRow` per engine
iteration, `RequestRow` per request); the recorder appends its fields to typed arrays. Other rooms add
column groups of their own (`ColumnGroup`: name -> typecode, and a default for rows that do not carry the
group) before the run starts; their values ride along with each row and the columns follow the built-in
and derived ones in the frames. Imports nothing from the rest of kvsim.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, fields
from operator import attrgetter

import pandas as pd

_TYPECODES = {"int": "q", "float": "d"}  # field annotation -> array typecode ('q' int64, 'd' float64)
_CHUNK = 64
"""Rows held as objects before they move into the arrays: few enough that they die before the garbage
collector sees them (with 1024 a run spent 3x more collections)."""


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

    @classmethod
    def refused(cls, rid: int, replica: int, arrival_s: float, prompt_len: int, output_len: int,
                n: int) -> RequestRow:
        """A request the engine refused outright: never scheduled, times NaN."""
        nan = math.nan
        return cls(rid=rid, replica=replica, arrival_s=arrival_s, prompt_len=prompt_len,
                   output_len=output_len, n=n, first_scheduled_s=nan, first_token_s=nan, finish_s=nan,
                   preemptions=0, cached_tokens=0, rejected=1)


def columns_of(row_type: type) -> dict[str, str]:
    """name -> array typecode of a row dataclass's fields, in field order."""
    return {f.name: _TYPECODES[str(f.type)] for f in fields(row_type)}


TIMELINE_COLUMNS: dict[str, str] = columns_of(IterationRow)
REQUEST_COLUMNS: dict[str, str] = columns_of(RequestRow)


@dataclass(frozen=True, slots=True)
class ColumnGroup:
    """Extra columns registered with a Recorder before the run: name -> typecode ('q' int64, 'd'
    float64), and the value a row that does not carry the group gets (0, or NaN: an int column that
    took NaN becomes float64)."""

    columns: dict[str, str]
    default: float = 0


class _Group:
    """A registered ColumnGroup's arrays and how many rows took its default."""

    __slots__ = ("spec", "arrays", "appends", "defaulted")

    def __init__(self, spec: ColumnGroup) -> None:
        self.spec = spec
        nan_default = spec.default != spec.default
        # an int column that may take NaN is held as float64, and stays float64 if any row took NaN
        self.arrays = {k: array("d" if nan_default else t) for k, t in spec.columns.items()}
        self.appends = tuple(a.append for a in self.arrays.values())
        self.defaulted = 0

    def series(self) -> dict[str, pd.Series]:
        out = {}
        for k, v in self.arrays.items():
            s = pd.Series(v, dtype=_dtype(v.typecode))
            if self.spec.columns[k] == "q" and v.typecode == "d" and not self.defaulted:
                s = s.astype("int64")
            out[k] = s
        return out


class _Columns:
    """One frame's columns: the row type's fields, then the registered groups'.

    Rows are kept as objects in `pending` and moved into the arrays _CHUNK at a time, a column at a time
    (attribute reads and array extends in C): cheaper than appending each value of each row."""

    __slots__ = ("arrays", "getters", "pending", "rows", "groups")

    def __init__(self, row_type: type) -> None:
        self.arrays = {k: array(t) for k, t in columns_of(row_type).items()}
        self.getters = tuple(attrgetter(k) for k in self.arrays)
        self.pending: list = []
        self.rows = 0  # rows in the arrays (pending ones not counted)
        self.groups: list[_Group] = []

    def register(self, spec: ColumnGroup) -> None:
        if self.rows or self.pending:
            raise RuntimeError("column groups are registered before the first row")
        taken = set(self.arrays).union(*(g.arrays for g in self.groups))
        clash = taken.intersection(spec.columns)
        if clash:
            raise ValueError(f"columns registered twice: {sorted(clash)}")
        self.groups.append(_Group(spec))

    def flush(self) -> None:
        """Move the pending rows into the arrays."""
        pending = self.pending
        if not pending:
            return
        for col, get in zip(self.arrays.values(), self.getters, strict=True):
            col.extend(map(get, pending))
        self.rows += len(pending)
        pending.clear()

    def append_extra(self, extra: tuple) -> None:
        """Append one row's values of the registered groups (None or left out: the group's default)."""
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

    def frame(self) -> pd.DataFrame:
        """The row type's columns."""
        self.flush()
        return pd.DataFrame({k: pd.Series(v, dtype=_dtype(v.typecode)) for k, v in self.arrays.items()})

    def extra(self) -> dict[str, pd.Series]:
        """The registered groups' columns, in registration order."""
        return {k: s for g in self.groups for k, s in g.series().items()}


class Recorder:
    """Column store for one run. `iteration(row)` and `request(row)` append one row each; `*extra` are
    the values of the registered column groups, one tuple (in the group's column order) or None (the
    group's default) per group, in registration order; groups left out take their defaults."""

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

    def timeline_frame(self) -> pd.DataFrame:
        """Timeline rows plus hold_s: how long each row's state holds, i.e. until the same replica's next
        iteration starts (dt_s plus any idle gap); the replica's last row holds for its dt_s."""
        df = self._timeline.frame()
        nxt = df.groupby("replica", sort=False)["t_s"].shift(-1)
        df["hold_s"] = (nxt - df["t_s"]).fillna(df["dt_s"])
        for k, s in self._timeline.extra().items():
            df[k] = s
        return df

    def requests_frame(self) -> pd.DataFrame:
        """Request rows by rid, plus ttft_s, e2e_s, tpot_s and queue_s, then the registered columns."""
        df = self._requests.frame()
        extra = self._requests.extra()
        for k, s in extra.items():
            df[k] = s
        df = df.sort_values("rid", kind="stable").reset_index(drop=True)
        tail = {k: df.pop(k) for k in extra}
        df["ttft_s"] = df["first_token_s"] - df["arrival_s"]
        df["e2e_s"] = df["finish_s"] - df["arrival_s"]
        decode_tokens = (df["output_len"] - 1).clip(lower=0)
        tpot = (df["finish_s"] - df["first_token_s"]) / decode_tokens.where(decode_tokens > 0)
        df["tpot_s"] = tpot
        df["queue_s"] = df["first_scheduled_s"] - df["arrival_s"]
        for k, s in tail.items():
            df[k] = s
        return df


def _dtype(typecode: str) -> str:
    return "float64" if typecode == "d" else "int64"


def _append(cols: _Columns, row, extra: tuple) -> None:
    if extra or cols.groups:
        cols.append_extra(extra)
    pending = cols.pending
    pending.append(row)
    if len(pending) >= _CHUNK:
        cols.flush()
