"""The consistency checker's own statistics (kvsim/metrics/consistency.py): percentiles, time-weighted means
and quantiles, written apart from kvsim.metrics.stats (the point is a second implementation), and the two
tables as numpy columns."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def finite(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64).ravel() if not math.isnan(v)]


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default): rank q/100 * (n - 1)."""
    h = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def pstats(values: Any) -> dict[str, float | None]:
    x = sorted(finite(values))
    if not x:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    return {"mean": math.fsum(x) / len(x), "p50": percentile(x, 50), "p90": percentile(x, 90),
            "p99": percentile(x, 99)}


def _pairs(values: Any, weights: Any) -> list[tuple[float, float]]:
    v = np.asarray(values, dtype=np.float64).ravel()
    w = np.asarray(weights, dtype=np.float64).ravel()
    return [(a, b) for a, b in zip(v.tolist(), w.tolist(), strict=True)
            if not (math.isnan(a) or math.isnan(b)) and b > 0]


def tw_mean(values: Any, weights: Any) -> float | None:
    p = _pairs(values, weights)
    total = math.fsum(w for _, w in p)
    return math.fsum(v * w for v, w in p) / total if total > 0 else None


def tw_quantile(values: Any, weights: Any, q: float) -> float | None:
    p = sorted(_pairs(values, weights))
    if not p:
        return None
    total = math.fsum(w for _, w in p)
    run = 0.0
    for v, w in p:
        run += w
        if run >= q * total * (1 - 1e-12):
            return v
    return p[-1][0]


def largest(values: Any) -> float | None:
    x = finite(values)
    return max(x) if x else None


def column(df: pd.DataFrame, name: str, default: float = math.nan) -> np.ndarray:
    if name in df.columns:
        return df[name].to_numpy(np.float64)
    return np.full(len(df), default)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def ratio_pos(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and b > 0 else None


class Tables:
    """The two tables as numpy columns, with the masks and hold times the definitions use."""

    def __init__(self, requests: pd.DataFrame, timeline: pd.DataFrame) -> None:
        self.rq, self.tl = requests, timeline
        r = requests
        self.arrival = column(r, "arrival_s")
        self.finish = column(r, "finish_s")
        self.first_token = column(r, "first_token_s")
        self.first_sched = column(r, "first_scheduled_s")
        self.prompt = column(r, "prompt_len")
        self.out_len = column(r, "output_len")
        self.n = column(r, "n", 1.0)
        self.rejected = column(r, "rejected", 0.0) != 0
        self.done = ~np.isnan(self.finish) & ~self.rejected
        self.replica = column(r, "replica")
        self.ttft = self.first_token - self.arrival
        self.e2e = self.finish - self.arrival
        self.queue = self.first_sched - self.arrival
        with np.errstate(divide="ignore", invalid="ignore"):
            decode = (self.finish - self.first_token) / (self.out_len - 1)
        self.tpot = np.where(self.out_len > 1, decode, np.nan)
        finished = self.finish[self.done]
        self.makespan = float(finished.max() - self.arrival.min()) if finished.size else None
        t = timeline
        self.t_replica = column(t, "replica")
        self.busy = column(t, "iteration") >= 0
        self.hold = self._hold(t)
        self.replica_rows = {int(k): np.flatnonzero(self.t_replica == k) for k in sorted(set(self.t_replica))}

    @staticmethod
    def _hold(t: pd.DataFrame) -> np.ndarray:
        """Each row until the same replica's next row starts; the replica's last row: its dt_s."""
        ts, dt, rep = column(t, "t_s"), column(t, "dt_s"), column(t, "replica")
        hold = dt.copy()
        last: dict[float, int] = {}
        for i in range(len(ts)):
            j = last.get(rep[i])
            if j is not None:
                hold[j] = ts[i] - ts[j]
            last[rep[i]] = i
        return hold

    def per_replica_mean(self, values: np.ndarray) -> float | None:
        means = [m for rows in self.replica_rows.values()
                 if (m := tw_mean(values[rows], self.hold[rows])) is not None]
        return math.fsum(means) / len(means) if means else None

    def rate(self, count: float) -> float | None:
        return count / self.makespan if self.makespan is not None and self.makespan > 0 else None
