"""Small statistics helpers for the summary: time-weighted mean and quantile, latency percentiles, and
conversion of numpy scalars to plain JSON-safe Python values."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

PERCENTILE_KEYS: tuple[str, ...] = ("mean", "p50", "p90", "p99")

# Relative slack on the weighted-CDF comparison so that a CDF that is exactly q on paper but lands a few
# ulps below q in floating point (e.g. weights 0.1 + 0.2) still selects the same value.
_CDF_RTOL = 1e-12


def plain(x: Any) -> Any:
    """A numpy or Python scalar as a plain int/float/bool/str; NaN and +-inf become None."""
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return f if math.isfinite(f) else None
    return x


def whole(x: Any) -> Any:
    """plain(x), with a float that holds a whole number written as an int (byte counts: 2097152, not
    2097152.0, whatever arithmetic produced them); fractional values (3.5-bit KV) stay floats."""
    x = plain(x)
    return int(x) if isinstance(x, float) and x.is_integer() else x


def _clean_pairs(values: Iterable[float], weights: Iterable[float]) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(values, dtype=np.float64).ravel()
    w = np.asarray(weights, dtype=np.float64).ravel()
    if v.shape != w.shape:
        raise ValueError(f"values and weights differ in length: {v.size} vs {w.size}")
    keep = ~(np.isnan(v) | np.isnan(w))
    v, w = v[keep], w[keep]
    if (w < 0).any():
        raise ValueError("weights must be >= 0")
    keep = w > 0
    return v[keep], w[keep]


def time_weighted_mean(values: Iterable[float], weights: Iterable[float]) -> float | None:
    """sum(v * w) / sum(w) over pairs where neither is NaN; None when the total weight is 0."""
    v, w = _clean_pairs(values, weights)
    total = float(w.sum())
    if total <= 0:
        return None
    return float(weighted_sum(v, w) / total)


def weighted_sum(v: np.ndarray, w: np.ndarray) -> float:
    """sum(v * w) by numpy's own (pairwise) summation, not BLAS: np.dot's result can change in the last
    bits with the BLAS thread count (a process pool worker and a Ray worker disagreed), and kvsim's outputs
    must not depend on the machine's threads."""
    return float(np.multiply(v, w).sum())


def time_weighted_quantile(values: Iterable[float], weights: Iterable[float], q: float) -> float | None:
    """The smallest value v whose weighted CDF, F(v) = sum(w_i for v_i <= v) / sum(w_i), is >= q.

    Pairs with a NaN or a zero weight are dropped first, so q = 0 gives the smallest value that held for a
    positive time and q = 1 the largest. No interpolation: the result is always one of the values.
    None when the total weight is 0. Example: values [1, 2, 3], weights [1, 1, 2]: F(1) = 0.25,
    F(2) = 0.5, F(3) = 1, so q = 0.5 -> 2 and q = 0.9 -> 3.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    v, w = _clean_pairs(values, weights)
    if v.size == 0:
        return None
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    total = cum[-1]
    idx = int(np.searchsorted(cum, q * total * (1.0 - _CDF_RTOL), side="left"))
    return float(v[min(idx, v.size - 1)])


def percentiles(series: Iterable[float]) -> dict[str, float | None]:
    """{mean, p50, p90, p99} of the non-NaN values, percentiles by numpy's default 'linear' method
    (interpolating between the two nearest order statistics). All None when no value is left."""
    x = np.asarray(series, dtype=np.float64).ravel()
    x = x[~np.isnan(x)]
    if x.size == 0:
        return dict.fromkeys(PERCENTILE_KEYS)
    p50, p90, p99 = np.percentile(x, [50.0, 90.0, 99.0])
    return {"mean": plain(x.mean()), "p50": plain(p50), "p90": plain(p90), "p99": plain(p99)}
