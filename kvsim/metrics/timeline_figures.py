"""The summary's timeline figures read chunk by chunk off RunTables (kvsim/metrics/run_tables.py), never
the whole widened table: per-replica time-weighted means, the time-weighted quantiles of an int column,
maxima, sums and weighted sums.

Each figure is the one stats.py computes over the whole frame, bit for bit: the arrays whose sums decide
it (the kept weights, the products value x weight, the weights in value order) are built in row order,
one at a time, and summed by the same numpy calls; only the elementwise work is done per chunk.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kvsim.metrics.run_tables import RunTables
from kvsim.metrics.stats import _CDF_RTOL, plain

Values = Callable[[dict[str, np.ndarray]], np.ndarray]
"""A chunk's columns -> the figure's float64 value per row."""


def column(name: str) -> Values:
    """The values of one column as float64."""
    return lambda cols: cols[name].astype(np.float64)


def replica_rows(tables: RunTables) -> dict[int, int]:
    """replica -> its timeline rows (replica ids in ascending order)."""
    counts: dict[int, int] = {}
    for rows, cols in tables.timeline_chunks(["replica"]):
        rep = cols["replica"]
        if not rep.any():
            counts[0] = counts.get(0, 0) + rows
            continue
        ids, n = np.unique(rep, return_counts=True)
        for r, k in zip(ids.tolist(), n.tolist(), strict=True):
            counts[r] = counts.get(r, 0) + k
    return dict(sorted(counts.items()))


class ReplicaMeans:
    """summary._per_replica_mean over the chunks: the mean over replicas of each replica's time-weighted
    mean (stats.time_weighted_mean of its rows: NaN values and weights dropped, then zero weights)."""

    def __init__(self, tables: RunTables) -> None:
        self.tables = tables
        self.rows = replica_rows(tables)
        self._totals: dict[int, float] | None = None  # per replica: sum of the kept weights (values not NaN)

    def __call__(self, names: list[str], values: Values) -> float | None:
        names = list(dict.fromkeys([*names, "replica", "hold_s"]))
        sums, nan_seen = self._kept_sums(names, values, products=True)
        if nan_seen:
            totals = self._kept_sums(names, values, products=False)[0]
        else:
            totals = self._weight_totals()
        means = []
        for r in self.rows:
            total = totals[r]
            if total <= 0:
                continue
            means.append(float(sums[r] / total))
        return float(np.mean(means)) if means else None

    def _weight_totals(self) -> dict[int, float]:
        if self._totals is None:
            self._totals = self._kept_sums(["replica", "hold_s"], lambda cols: None, products=False)[0]
        return self._totals

    def _kept_sums(self, names: list[str], values, products: bool) -> tuple[dict[int, float], bool]:
        """Per replica, the sum of its kept products v * w (products) or kept weights w, each summed
        over one array in row order; and whether a value was NaN."""
        bufs = {r: np.empty(n, dtype=np.float64) for r, n in self.rows.items()}
        at = dict.fromkeys(self.rows, 0)
        nan_seen = False
        for _, cols in self.tables.timeline_chunks(names):
            w = cols["hold_s"]
            v = values(cols)
            bad = np.isnan(w)
            if v is not None:
                vnan = np.isnan(v)
                nan_seen = nan_seen or bool(vnan.any())
                bad |= vnan
            if (w[~bad] < 0).any():
                raise ValueError("weights must be >= 0")
            keep = ~bad & (w > 0)
            rep = cols["replica"]
            for r in ([0] if not rep.any() else np.unique(rep).tolist()):
                m = keep if not rep.any() else keep & (rep == r)
                part = w[m] if not products else np.multiply(v[m], w[m])
                bufs[r][at[r]:at[r] + len(part)] = part
                at[r] += len(part)
        return {r: float(buf[:at[r]].sum()) for r, buf in bufs.items()}, nan_seen


def weighted_quantiles(tables: RunTables, name: str, qs: tuple[float, ...]) -> list[float | None]:
    """stats.time_weighted_quantile of int column `name` weighted by hold_s, for each q in qs: the stable
    sort by value is a counting sort (values are ints), the cumulative sum runs in that order."""
    names = [name, "hold_s"]
    lo, hi, n = None, None, 0
    for _, cols in tables.timeline_chunks(names):
        v, keep = _kept(cols, name)
        if keep.any():
            kv = v[keep]
            lo = int(kv.min()) if lo is None else min(lo, int(kv.min()))
            hi = int(kv.max()) if hi is None else max(hi, int(kv.max()))
            n += int(keep.sum())
    if n == 0:
        return [None for _ in qs]
    width = hi - lo + 1
    counts = np.zeros(width, dtype=np.int64)
    for _, cols in tables.timeline_chunks(names):
        v, keep = _kept(cols, name)
        counts += np.bincount(v[keep].astype(np.int64) - lo, minlength=width)
    ordered = np.empty(n, dtype=np.float64)
    pos = np.cumsum(counts) - counts
    for _, cols in tables.timeline_chunks(names):
        v, keep = _kept(cols, name)
        kv = v[keep].astype(np.int64) - lo
        kw = cols["hold_s"][keep]
        order = np.argsort(kv, kind="stable")
        sv = kv[order]
        here = np.bincount(kv, minlength=width)
        first = np.cumsum(here) - here
        ordered[pos[sv] + np.arange(len(sv)) - first[sv]] = kw[order]
        pos += here
    step = 1 << 20
    carry = 0.0
    for start in range(0, n, step):
        block = ordered[start:start + step]
        if start:
            block[0] = carry + block[0]
        np.cumsum(block, out=block)
        carry = block[-1]
    total = ordered[-1]
    ends = np.cumsum(counts)
    out: list[float | None] = []
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile q must be in [0, 1], got {q}")
        idx = int(np.searchsorted(ordered, q * total * (1.0 - _CDF_RTOL), side="left"))
        g = int(np.searchsorted(ends, min(idx, n - 1), side="right"))
        out.append(float(lo + g))
    return out


def _kept(cols: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, mask of the pairs stats._clean_pairs keeps: weight not NaN and > 0)."""
    w = cols["hold_s"]
    if (w < 0).any():
        raise ValueError("weights must be >= 0")
    return cols[name], w > 0


def maximum(tables: RunTables, names: list[str], values: Values | None = None) -> object:
    """The largest value (NaN skipped, as pandas' max), plain; None when there is none. values None: the
    one column names[0] as stored (an int column's maximum is an int)."""
    best = None
    for rows, cols in tables.timeline_chunks(names):
        if not rows:
            continue
        v = cols[names[0]] if values is None else values(cols)
        if v.dtype.kind == "f":
            v = v[~np.isnan(v)]
            if not len(v):
                continue
        m = v.max()
        best = m if best is None or m > best else best
    return None if best is None else plain(best)


def total(tables: RunTables, name: str) -> int:
    """The sum of int column `name` over every row."""
    return int(sum(int(cols[name].sum(dtype=np.int64)) for _, cols in tables.timeline_chunks([name])))


def weighted_sum(tables: RunTables, name: str) -> float:
    """stats.weighted_sum of column `name` (float64) and hold_s over every row."""
    out = np.empty(tables.timeline_count, dtype=np.float64)
    at = 0
    for rows, cols in tables.timeline_chunks([name, "hold_s"]):
        np.multiply(cols[name].astype(np.float64), cols["hold_s"], out=out[at:at + rows])
        at += rows
    return float(out.sum())
