"""A run's two tables as the recorder left them (kvsim/metrics/column_store.py: compact typed columns in
chunks), with the derived columns (the timeline's hold_s, the requests' latencies, meets_slo) computed
when read, one column or one chunk at a time. The pandas frames (`requests_frame`, `timeline_frame`) are
built only when asked (pandas is imported then). Requests are read in rid order, as the frames hold them.

`RunTables.from_frames` wraps frames built elsewhere (tests, hand-built tables) so the summary reads
every table the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.metrics.column_store import KINDS, ColumnStore

if TYPE_CHECKING:
    import pandas as pd

LATENCIES: tuple[str, ...] = ("ttft_s", "e2e_s", "tpot_s", "queue_s")


class TableFrames:
    """Base of a run's result (engine.simulation.SimResult, api.Result) that holds its RunTables as `tables`:
    the `requests` and `timeline` frames, built on first use."""

    __slots__ = ()

    @property
    def requests(self) -> pd.DataFrame:
        """One row per request, by rid (requests.parquet's table; built on first use)."""
        return self.tables.requests_frame()

    @property
    def timeline(self) -> pd.DataFrame:
        """One row per recorded engine iteration (timeline.parquet's table; built on first use)."""
        return self.tables.timeline_frame()


class RunTables:
    """requests / timeline: ColumnStores of the recorded columns; `*_names`: the frames' column order.
    derive: hold_s, the latencies and meets_slo (with `slo`) are computed, else read from the stores."""

    __slots__ = ("requests", "timeline", "request_names", "timeline_names", "derive", "slo", "_order",
                 "_frames")

    def __init__(self, requests: ColumnStore, timeline: ColumnStore, request_rows: int, timeline_rows: int,
                 derive: bool = True, slo: dict[str, Any] | None = None) -> None:
        """request_rows / timeline_rows: how many leading columns are the row type's (the derived columns
        follow them, then the registered groups')."""
        self.requests = requests
        self.timeline = timeline
        self.derive = derive
        self.slo = slo
        rq, tl = list(requests.kinds), list(timeline.kinds)
        if derive:
            rq = [*rq[:request_rows], *LATENCIES, *rq[request_rows:]]
            tl = [*tl[:timeline_rows], "hold_s", *tl[timeline_rows:]]
            if slo is not None:
                rq.append("meets_slo")
        self.request_names = rq
        self.timeline_names = tl
        self._order: np.ndarray | None | bool = False  # False: not computed yet
        self._frames: dict[str, pd.DataFrame] = {}

    @classmethod
    def from_frames(cls, requests: pd.DataFrame, timeline: pd.DataFrame) -> RunTables:
        """Tables over frames built elsewhere (columns as they are, hold_s derived if missing); the frames
        themselves are what requests_frame / timeline_frame return."""
        from kvsim.metrics.frames import with_hold

        timeline = with_hold(timeline)
        stores = []
        for df in (requests, timeline):
            cols = {str(k): df[k].to_numpy() for k in df.columns}
            store = ColumnStore({k: _kind(v) for k, v in cols.items()})
            store.add(len(df), cols, spill=False)
            stores.append(store)
        out = cls(stores[0], stores[1], 0, 0, derive=False)
        out._order = None
        out._frames = {"requests": requests, "timeline": timeline}
        return out

    # ---- requests -------------------------------------------------------------------------------
    @property
    def request_count(self) -> int:
        return len(self.requests)

    @property
    def timeline_count(self) -> int:
        return len(self.timeline)

    def has_request(self, name: str) -> bool:
        return name in self.request_names

    def has_timeline(self, name: str) -> bool:
        return name in self.timeline_names

    def order(self) -> np.ndarray | None:
        """The permutation putting the request rows in rid order (None: they are)."""
        if self._order is False:
            rid = self.requests.column("rid")
            self._order = None if _sorted(rid) else np.argsort(rid, kind="stable")
        return self._order  # type: ignore[return-value]

    def request(self, name: str) -> np.ndarray:
        """One request column in rid order (int64 / float64 / bool; derived columns computed)."""
        if self.derive and name in LATENCIES:
            return _latency(self, name)
        if self.derive and name == "meets_slo":
            from kvsim.metrics.slo import meets_slo_columns

            return meets_slo_columns(self.request, self.has_request("rejected"), self.slo)
        values = self.requests.column(name)
        order = self.order()
        return values if order is None else values[order]

    def request_kind(self, name: str) -> str:
        if self.derive and name in LATENCIES:
            return "d"
        if self.derive and name == "meets_slo":
            return "?"
        return self.requests.kinds[name]

    def request_groups(self, size: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """(rows, name -> values) per run of `size` requests in rid order, every column of the frame
        (int64 / float64 / bool), derived ones computed: the row groups of requests.parquet."""
        stored = [k for k in self.request_names if not (self.derive and (k in LATENCIES or k == "meets_slo"))]
        compact = {k: self.requests.column(k, compact=True) for k in stored}
        order = self.order()
        n = len(self.requests)
        for lo in range(0, max(n, 1), size):
            pick = slice(lo, lo + size) if order is None else order[lo:lo + size]
            part = {k: v[pick].astype(KINDS[self.requests.kinds[k]], copy=False) for k, v in compact.items()}
            if self.derive:
                part.update(_latencies(part))
                if self.slo is not None:
                    from kvsim.metrics.slo import meets_slo_columns

                    part["meets_slo"] = meets_slo_columns(part.__getitem__, "rejected" in part, self.slo)
            rows = len(next(iter(part.values()))) if part else 0
            yield rows, {k: part[k] for k in self.request_names}

    # ---- timeline -------------------------------------------------------------------------------
    def timeline_chunks(self, names) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """(rows, name -> array as stored) per timeline chunk in row order; hold_s computed (float64)."""
        names = list(names)
        stored = [k for k in names if k != "hold_s" or not self.derive]
        holds = self._holds() if self.derive and "hold_s" in names else None
        for rows, cols in self.timeline.chunks(stored):
            if holds is not None:
                cols["hold_s"] = next(holds)
            yield rows, cols

    def timeline_column(self, name: str) -> np.ndarray:
        """One timeline column over every row (int64 / float64)."""
        if self.derive and name == "hold_s":
            if self.timeline.chunk_count == 1:
                return next(self._holds())
            out = np.empty(len(self.timeline), dtype=np.float64)
            at = 0
            for h in self._holds():
                out[at:at + len(h)] = h
                at += len(h)
            return out
        return self.timeline.column(name)

    def timeline_kind(self, name: str) -> str:
        return "d" if self.derive and name == "hold_s" else self.timeline.kinds[name]

    def _holds(self) -> Iterator[np.ndarray]:
        """hold_s per chunk: until the same replica's next row (in this chunk or a later one), the
        replica's last row its dt_s (as Recorder frames always defined it)."""
        store = self.timeline
        after: list[dict[int, float]] = [{}]
        if store.chunk_count > 1:
            firsts = [_firsts(c["replica"], c["t_s"]) for _, c in store.chunks(["replica", "t_s"])]
            after = [{}] * len(firsts)
            seen: dict[int, float] = {}
            for k in range(len(firsts) - 1, -1, -1):
                after[k] = dict(seen)
                seen.update(firsts[k])
        for k, (_, c) in enumerate(store.chunks(["replica", "t_s", "dt_s"])):
            yield hold_of(c["replica"], c["t_s"], c["dt_s"], after[k])

    # ---- frames ---------------------------------------------------------------------------------
    def requests_frame(self) -> pd.DataFrame:
        """The requests table as a pandas DataFrame (built once, when first asked)."""
        if "requests" not in self._frames:
            import pandas as pd

            self._frames["requests"] = pd.DataFrame({k: self.request(k) for k in self.request_names},
                                                    copy=False)
        return self._frames["requests"]

    def timeline_frame(self) -> pd.DataFrame:
        """The timeline as a pandas DataFrame (built once, when first asked)."""
        if "timeline" not in self._frames:
            import pandas as pd

            self._frames["timeline"] = pd.DataFrame({k: self.timeline_column(k) for k in self.timeline_names},
                                                    copy=False)
        return self._frames["timeline"]


def _kind(values: np.ndarray) -> str:
    if values.dtype == np.bool_:
        return "?"
    return "q" if np.issubdtype(values.dtype, np.integer) else "d"


def _sorted(values: np.ndarray) -> bool:
    return bool(len(values) < 2 or (values[1:] >= values[:-1]).all())


def _firsts(replica: np.ndarray, t_s: np.ndarray) -> dict[int, float]:
    """replica -> t_s of its first row in a chunk."""
    if not len(replica):
        return {}
    if not replica.any():
        return {0: t_s[0]}
    ids, first = np.unique(replica, return_index=True)
    return {int(r): t_s[i] for r, i in zip(ids, first, strict=True)}


def hold_of(replica: np.ndarray, t_s: np.ndarray, dt_s: np.ndarray, nexts: dict[int, float]) -> np.ndarray:
    """hold_s of one chunk's rows: the same replica's next t_s minus this one's; a replica's last row in
    the chunk: its first t_s in a later chunk (`nexts`) minus this one's, else its dt_s."""
    t_s = t_s.astype(np.float64, copy=False)
    out = np.empty(len(t_s), dtype=np.float64)
    if not len(t_s):
        return out
    if not replica.any():
        groups: list[tuple[int, np.ndarray | None]] = [(0, None)]
    else:
        groups = [(int(r), np.flatnonzero(replica == r)) for r in np.unique(replica)]
    for r, idx in groups:
        t = t_s if idx is None else t_s[idx]
        h = np.empty(len(t), dtype=np.float64)
        np.subtract(t[1:], t[:-1], out=h[:-1])
        last = idx[-1] if idx is not None else len(t_s) - 1
        h[-1] = nexts[r] - t[-1] if r in nexts else dt_s[last]
        if idx is None:
            out = h
        else:
            out[idx] = h
    return out


def _latency(tables: RunTables, name: str) -> np.ndarray:
    """ttft_s, e2e_s, tpot_s or queue_s of each request (rid order)."""
    arrival = tables.request("arrival_s")
    if name == "ttft_s":
        return tables.request("first_token_s") - arrival
    if name == "e2e_s":
        return tables.request("finish_s") - arrival
    if name == "queue_s":
        return tables.request("first_scheduled_s") - arrival
    return _tpot(tables.request("finish_s"), tables.request("first_token_s"), tables.request("output_len"))


def _tpot(finish: np.ndarray, first_token: np.ndarray, output_len: np.ndarray) -> np.ndarray:
    """(finish - first token) per decode step; NaN for one output token."""
    decode = output_len - 1
    np.maximum(decode, 0, out=decode)
    steps = decode.astype(np.float64)
    steps[decode <= 0] = np.nan
    return (finish - first_token) / steps


def _latencies(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    arrival = cols["arrival_s"]
    return {"ttft_s": cols["first_token_s"] - arrival, "e2e_s": cols["finish_s"] - arrival,
            "tpot_s": _tpot(cols["finish_s"], cols["first_token_s"], cols["output_len"]),
            "queue_s": cols["first_scheduled_s"] - arrival}
