"""The steady state of one run: the window a plan probe judges, and whether the backlog grows in it.

A run starts empty and, once its request budget is spent, ramps down: a chat run's last sessions send
only follow-ups, then every queue drains. Neither end is the steady state a capacity planner asks about,
and a load the engine cannot keep up with looks fine in a run too short for its queue to build. So
`kvsim plan` judges each probe (kvsim/sweep/probe.py) on this module's figures of its run:

- **Window** [start_s, end_s]: the requests arriving in it are measured. `end_s` is the last *fresh*
  arrival (a request that starts its session, or one of no session): after it the offered load falls.
  `start_s` (the warm-up) is the largest of WARMUP_FRACTION x end_s; the SESSION_SPAN_QUANTILE quantile,
  over the sessions starting in the run's first half, of a session's span less its requests' own latency
  (`_session_ramp`: until then a session workload's offered rate still rises); RAMP_E2E x the median E2E
  of the earliest requests (`_service_ramp`: the running set fills); and MSER's truncation point of the
  backlog over [0, end_s] in MSER_BATCHES batches (White's marginal standard error rule: where the rest
  of the series has the smallest standard error of its mean).
- **Backlog** n(t): requests arrived by t and not finished by t (a refused request leaves when it
  arrives). The window is cut into BATCHES equal batches; each batch's time-mean backlog (exact, from the
  step function); a least-squares line through the batch means: `growth` = its slope x BATCHES (requests by
  which the backlog grew across the window), `growth_fraction` = growth / arrivals in the window (the share
  of the offered requests that pile up), and `t` the slope's t statistic (BATCHES - 2 degrees of freedom).
- **Status**, first that applies: `short` when the warm-up is over MAX_WARMUP_FRACTION of the fresh-arrival
  span (the run is still ramping up: a growing backlog then is no evidence); `unstable` when the backlog
  grows (t >= GROWTH_T and growth_fraction >= GROWTH_FRACTION) in a window of at least `need` requests,
  or grows beyond doubt (t >= DECISIVE_T and growth_fraction >= DECISIVE_FRACTION) in a smaller one:
  arrivals outpace completions, so every latency grows without bound given time; `short` when the window
  holds fewer than `need` requests, or MSER puts the warm-up beyond MAX_SETTLE_FRACTION of it;
  `ambiguous` when the slope is significant (t >= AMBIGUOUS_T) and piles up at least AMBIGUOUS_FRACTION
  of the arrivals without growing that much; else `stable`.

docs/metrics.md (kvsim plan) defines these figures; tests/metrics/test_steady.py pins them on hand-made
cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.metrics.slo import population
from kvsim.metrics.summary import session_starts
from kvsim.schema import objectives

if TYPE_CHECKING:
    import pandas as pd

WARMUP_FRACTION = 0.1
SESSION_SPAN_QUANTILE = 0.9
RAMP_E2E = 3.0
MAX_WARMUP_FRACTION = 0.25
"""A warm-up over this share of the fresh-arrival span leaves too short a window: the run is `short`."""
BATCHES = 10
MSER_BATCHES = 100
GROWTH_T = 3.0
GROWTH_FRACTION = 0.02
AMBIGUOUS_T = 2.0
AMBIGUOUS_FRACTION = 0.005
"""A significant trend (t >= AMBIGUOUS_T) that piles up less than this share of the arrivals is noise of
a strongly correlated backlog, not a trend worth a longer run."""
MAX_SETTLE_FRACTION = 0.4
"""MSER settling after this share of the fresh-arrival span: the run has not reached steady state."""
DECISIVE_T = 5.0
DECISIVE_FRACTION = 0.2
"""An unstable verdict this clear (t and growth_fraction at least these) needs no longer run to confirm."""
MIN_WINDOW_REQUESTS = 500
TAIL_REQUESTS = 10
MAX_TAIL_QUANTILE = 0.999
"""A p100 (or p99.99) objective asks for the window of a p99.9 one (10,000 requests), not an unbounded one."""
"""A window needs at least TAIL_REQUESTS / (1 - q) requests for a percentile q (1,000 for p99), and at
least MIN_WINDOW_REQUESTS."""

STATUSES = ("stable", "unstable", "ambiguous", "short")


@dataclass(slots=True, frozen=True)
class Window:
    """The measured part of a run: requests arriving in [start_s, end_s]."""

    start_s: float
    end_s: float
    requests: int
    """Requests arriving in the window (refused ones included)."""
    offered_requests_per_s: float | None
    """requests / (end_s - start_s)."""
    served_requests_per_s: float | None
    """Requests completing in the window / its length."""

    def doc(self) -> dict[str, Any]:
        return {"start_s": self.start_s, "end_s": self.end_s, "requests": self.requests,
                "offered_requests_per_s": self.offered_requests_per_s,
                "served_requests_per_s": self.served_requests_per_s}


@dataclass(slots=True, frozen=True)
class Backlog:
    """How the backlog (requests in the system) moved across the window (module docstring)."""

    first: float
    """Time-mean backlog of the first batch."""
    last: float
    """Time-mean backlog of the last batch."""
    growth: float
    growth_fraction: float | None
    t: float

    def doc(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last, "growth": self.growth,
                "growth_fraction": self.growth_fraction, "t": _finite(self.t)}


@dataclass(slots=True, frozen=True)
class SteadyState:
    """A run's window, its backlog trend, and the status they give (module docstring)."""

    window: Window
    backlog: Backlog
    status: str
    reason: str
    cause: str = ""
    """Why a run is short: "ramp" (sessions still ramping up), "requests" (too few in the window), "settle"
    (MSER settles late); empty otherwise."""

    @property
    def decisive(self) -> bool:
        """Unstable beyond doubt: a longer run would only confirm it."""
        b = self.backlog
        return (self.status == "unstable" and b.t >= DECISIVE_T
                and (b.growth_fraction or 0.0) >= DECISIVE_FRACTION)

    def doc(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "window": self.window.doc(),
                "backlog": self.backlog.doc()}


def needed_requests(slo: dict[str, dict[str, float]]) -> int:
    """Requests a window needs for the SLO's highest percentile (TAIL_REQUESTS beyond it)."""
    qs = [o.quantile / 100 for o in objectives(slo)]
    worst = min(max(qs, default=0.5), MAX_TAIL_QUANTILE)
    tail = TAIL_REQUESTS / (1 - worst) if worst < 1 else math.inf
    return int(max(MIN_WINDOW_REQUESTS, math.ceil(round(tail, 6)))) if math.isfinite(tail) else 10**7


def steady_state(requests: pd.DataFrame, need: int = MIN_WINDOW_REQUESTS) -> SteadyState:
    """The window, the backlog trend and the status of one run's requests frame (module docstring)."""
    arrival = requests["arrival_s"].to_numpy(np.float64)
    finish = requests["finish_s"].to_numpy(np.float64).copy()
    if "rejected" in requests.columns:
        refused = requests["rejected"].to_numpy() != 0
        finish[refused] = arrival[refused]
    finish = np.where(np.isnan(finish), np.inf, finish)  # (a request that never finished stays)
    end = _last_fresh_arrival(requests, arrival)
    series = _Backlog(np.sort(arrival), np.sort(finish[np.isfinite(finish)]))  # (unfinished: stay)
    ramp = max(WARMUP_FRACTION * end, _session_ramp(requests, end), _service_ramp(arrival, finish, end))
    if end <= 0 or ramp > MAX_WARMUP_FRACTION * end:  # sessions still ramping up: nothing to judge yet
        start = min(ramp, 0.5 * end)
        window = _window(arrival, finish, start, end)
        reason = (f"ramp-up {ramp:.4g} s (sessions and the running batch filling), over "
                  f"{MAX_WARMUP_FRACTION:g} of the {end:.4g} s of fresh arrivals")
        return SteadyState(window, series.trend(start, end, window.requests), "short", reason, "ramp")
    settle = series.truncation(end)  # where the backlog settles (MSER)
    judged = max(ramp, min(settle, MAX_WARMUP_FRACTION * end))  # (a growing backlog never settles)
    window = _window(arrival, finish, judged, end)
    b = series.trend(judged, end, window.requests)
    growing = b.t >= GROWTH_T and (b.growth_fraction or 0.0) >= GROWTH_FRACTION
    clear = b.t >= DECISIVE_T and (b.growth_fraction or 0.0) >= DECISIVE_FRACTION
    if growing and (clear or window.requests >= need):
        reason = (f"the backlog grows ({_moved(b)}: {_pct(b.growth_fraction)} of the window's arrivals pile "
                  f"up, t = {b.t:.3g})")
        return SteadyState(window, b, "unstable", reason)
    start = max(ramp, settle)
    if settle > MAX_SETTLE_FRACTION * end:
        start = min(start, 0.5 * end)
        window = _window(arrival, finish, start, end)
        reason = (f"the backlog settles only after {settle:.4g} s (MSER), over {MAX_SETTLE_FRACTION:g} of "
                  f"the {end:.4g} s of fresh arrivals")
        return SteadyState(window, series.trend(start, end, window.requests), "short", reason, "settle")
    if start > judged:
        window = _window(arrival, finish, start, end)
        b = series.trend(start, end, window.requests)
    if window.requests < need:
        reason = f"window of {window.requests:,} requests (needs {need:,})"
        return SteadyState(window, b, "short", reason, "requests")
    if b.t >= AMBIGUOUS_T and (b.growth_fraction or 0.0) >= AMBIGUOUS_FRACTION:
        status = "ambiguous"
        reason = f"the backlog trends up ({_moved(b)}, t = {b.t:.3g}; {_pct(b.growth_fraction)} of arrivals)"
    else:
        status = "stable"
        reason = f"steady ({_moved(b)}, t = {b.t:.3g}; {end - start:.4g} s after a {start:.4g} s warm-up)"
    return SteadyState(window, b, status, reason)


def window_population(requests: pd.DataFrame, window: Window, metric: str) -> np.ndarray:
    """The metric's values (as the summary's latency section takes them) of the window's requests."""
    a = requests["arrival_s"].to_numpy(np.float64)
    inside = requests[(a >= window.start_s) & (a <= window.end_s)]
    return population(inside, metric)


def window_values(requests: pd.DataFrame, window: Window,
                  slo: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """Each objective's percentile over the window's requests (None when none has the metric)."""
    out: dict[str, float | None] = {}
    for o in objectives(slo):
        x = window_population(requests, window, o.metric)
        out[o.metric] = float(np.percentile(x, o.quantile)) if x.size else None
    return out


def _last_fresh_arrival(requests: pd.DataFrame, arrival: np.ndarray) -> float:
    """The last arrival of a request that starts its session or has none (0.0 for an empty frame)."""
    if not arrival.size:
        return 0.0
    sid = requests["session"].to_numpy(np.int64) if "session" in requests.columns else None
    if sid is None or not (sid >= 0).any():
        return float(arrival.max())
    last = session_starts(requests)[-1]
    standalone = arrival[sid < 0]
    return float(max(last, standalone.max())) if standalone.size else float(last)


def _service_ramp(arrival: np.ndarray, finish: np.ndarray, end: float) -> float:
    """RAMP_E2E x the median E2E of the requests arriving in the first WARMUP_FRACTION of [0, end] (before
    any queue builds): the engine's running set fills over a few requests' lifetimes. 0 when none."""
    early = (arrival <= WARMUP_FRACTION * end) & np.isfinite(finish)
    return float(RAMP_E2E * np.median(finish[early] - arrival[early])) if early.any() else 0.0


def _session_ramp(requests: pd.DataFrame, end: float) -> float:
    """The SESSION_SPAN_QUANTILE quantile, over the sessions starting before end / 2, of a session's span
    without its requests' own latency: last arrival - first arrival - the E2E of every request but the
    last (a follow-up arrives its think time after the previous request finishes), so that a slow engine
    does not stretch it. 0 without sessions."""
    if "session" not in requests.columns:
        return 0.0
    sid = requests["session"].to_numpy(np.int64)
    keep = sid >= 0
    if not keep.any():
        return 0.0
    a = requests["arrival_s"].to_numpy(np.float64)[keep]
    e2e = np.nan_to_num(requests["finish_s"].to_numpy(np.float64)[keep] - a, nan=0.0)
    order = np.lexsort((a, sid[keep]))
    s, a, e2e = sid[keep][order], a[order], e2e[order]
    heads = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    tails = np.r_[heads[1:] - 1, len(s) - 1]
    served = np.add.reduceat(e2e, heads) - e2e[tails]  # every request's E2E but the session's last
    span = np.maximum(a[tails] - a[heads] - served, 0.0)
    early = span[a[heads] < end / 2]
    return float(np.quantile(early, SESSION_SPAN_QUANTILE)) if early.size else 0.0


def _window(arrival: np.ndarray, finish: np.ndarray, start: float, end: float) -> Window:
    inside = (arrival >= start) & (arrival <= end)
    n = int(inside.sum())
    length = end - start
    done = int(((finish >= start) & (finish <= end)).sum())
    return Window(start, end, n, n / length if length > 0 else None, done / length if length > 0 else None)


class _Backlog:
    """The backlog step function n(t) = arrivals by t - finishes by t, from the sorted times."""

    __slots__ = ("arrival", "finish", "pa", "pf")

    def __init__(self, arrival: np.ndarray, finish: np.ndarray) -> None:
        self.arrival, self.finish = arrival, finish
        self.pa = np.concatenate(([0.0], np.cumsum(arrival)))
        self.pf = np.concatenate(([0.0], np.cumsum(finish)))

    def means(self, start: float, end: float, k: int) -> np.ndarray:
        """Time-mean backlog over each of k equal batches of [start, end] (exact)."""
        edges = np.linspace(start, end, k + 1)
        area = _integrals(self.arrival, self.pa, edges) - _integrals(self.finish, self.pf, edges)
        return area / np.diff(edges)

    def truncation(self, end: float) -> float:
        """MSER's warm-up: the batch boundary d (of MSER_BATCHES over [0, end], d in the first half)
        minimising sum((Z_j - mean(Z[d:]))^2) / (m - d)^2 over the batch means Z after it (White's marginal
        standard error rule), in seconds."""
        if not end > 0:
            return 0.0
        z = self.means(0.0, end, MSER_BATCHES)
        m = z.size
        tail = np.cumsum(z[::-1])[::-1]  # sum of z[d:]
        tail2 = np.cumsum((z * z)[::-1])[::-1]
        count = m - np.arange(m)
        sse = np.maximum(tail2 - tail * tail / count, 0.0)
        score = (sse / (count * count))[: m // 2 + 1]
        tie = 1e-9 * float(score.max()) + 1e-300  # (round-off: the earliest of equal minima)
        d = int(np.flatnonzero(score <= score.min() + tie)[0])
        return d * end / m

    def trend(self, start: float, end: float, arrivals: int) -> Backlog:
        """The least-squares line through BATCHES batch means over [start, end] (module docstring)."""
        if not end > start:
            return Backlog(0.0, 0.0, 0.0, None, 0.0)
        means = self.means(start, end, BATCHES)
        x = np.arange(BATCHES, dtype=np.float64)
        xc = x - x.mean()
        sxx = float((xc * xc).sum())
        slope = float((xc * (means - means.mean())).sum() / sxx)
        resid = means - (means.mean() + slope * xc)
        se = math.sqrt(float((resid * resid).sum()) / (BATCHES - 2) / sxx)
        if se > 1e-12 * max(1.0, float(np.abs(means).max())):
            t = slope / se
        else:
            t = math.inf if slope > 0 else (-math.inf if slope < 0 else 0.0)
        growth = slope * BATCHES
        return Backlog(float(means[0]), float(means[-1]), growth, growth / arrivals if arrivals else None, t)


def _integrals(sorted_x: np.ndarray, prefix: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Integral over [edges[i], edges[i+1]] of the count of values <= t, for each i (values sorted, prefix
    their cumulative sums with a leading 0): the integral from edges[0] to e is the sum over values x < e
    of e - max(x, edges[0])."""
    a = edges[0]
    i0 = np.searchsorted(sorted_x, a, side="right")
    j = np.searchsorted(sorted_x, edges, side="left")
    cum = i0 * (edges - a) + np.maximum(j - i0, 0) * edges - (prefix[np.maximum(j, i0)] - prefix[i0])
    return np.diff(cum)


def _moved(b: Backlog) -> str:
    return f"{b.first:.4g} -> {b.last:.4g} requests in the system"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2g}%"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
