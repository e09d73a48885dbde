"""Repeats: one scenario under K seeds (K request streams drawn from the same distributions) and each
headline figure as a mean with a 95% confidence interval (Student's t over the K values).

`kvsim run --repeats K` writes repeats.json beside the first seed's outputs; `kvsim plan` judges an SLO by
the intervals' upper bounds. docs/metrics.md (Repeats) defines every key.
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from kvsim.errors import KvsimError
from kvsim.schema import SLO_METRICS
from kvsim.sweep.columns import dig

HEADLINES: tuple[str, ...] = (
    "throughput.requests_per_s", "throughput.output_tokens_per_s",
    "latency.ttft_s.p50", "latency.ttft_s.p99", "latency.tpot_s.p50", "latency.tpot_s.p99",
    "latency.e2e_s.p50", "latency.e2e_s.p99", "concurrency.mean", "kv.utilization_mean",
    "preemptions", "prefix_cache.hit_rate_tokens", "goodput.requests_per_s",
)
"""Summary keys given an interval (those a summary lacks, e.g. goodput without an slo, are left out), plus
each SLO objective's `slo.<metric>.value_s`."""

MAX_REPEATS = 1000

# Student's t, 0.975 quantile, by degrees of freedom (1-30 exact to 3 decimals, then 40, 60, 120, inf)
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
         18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
         26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def t975(df: int) -> float:
    """Student's t 0.975 quantile for df >= 1 degrees of freedom (the table above; between its points
    beyond 30, linear in 1/df; 1.960 as df -> infinity)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if df in _T975:
        return _T975[df]
    points = [(30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980), (math.inf, 1.960)]
    for (d0, t0), (d1, t1) in zip(points, points[1:], strict=False):
        if d0 < df < d1:
            x0, x1, x = 1 / d0, (0.0 if d1 == math.inf else 1 / d1), 1 / df
            return t1 + (t0 - t1) * (x - x1) / (x0 - x1)
    raise AssertionError("unreachable")


def interval(values: list[float]) -> dict[str, Any]:
    """{mean, low, high, half_width, n}: the 95% t interval of the mean of `values` (n >= 2; with one
    value the bounds are that value and half_width None). None values are left out."""
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    n = len(xs)
    if n == 0:
        return {"mean": None, "low": None, "high": None, "half_width": None, "n": 0}
    mean = math.fsum(xs) / n
    if n == 1:
        return {"mean": mean, "low": mean, "high": mean, "half_width": None, "n": 1}
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    half = t975(n - 1) * math.sqrt(var / n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "half_width": half, "n": n}


def seeds(base: int, k: int) -> list[int]:
    """The K seeds of a repeat run: base, base + 1, ..., base + K - 1."""
    if not 1 <= k <= MAX_REPEATS:
        raise KvsimError(f"--repeats {k}: give 1 to {MAX_REPEATS}")
    if base + k - 1 > 2**63 - 1:
        raise KvsimError(f"--repeats {k}: seeds from {base} would pass 2^63 - 1; lower --seed")
    return [base + i for i in range(k)]


def headline_keys(summaries: list[dict[str, Any]]) -> list[str]:
    """HEADLINES that the summaries have, then each SLO objective's value."""
    keys = [k for k in HEADLINES if any(dig(s, k) is not None for s in summaries)]
    slo = summaries[0].get("slo") or {}
    keys += [f"slo.{m}.value_s" for m in SLO_METRICS if m in slo]
    return keys


def repeats_section(summaries: list[dict[str, Any]], seed_list: list[int]) -> dict[str, Any]:
    """repeats.json: the seeds, and per headline key its interval and the per-seed values."""
    figures = {}
    for key in headline_keys(summaries):
        values = [dig(s, key) for s in summaries]
        figures[key] = {**interval(values), "values": values}
    return {"seeds": seed_list, "confidence": 0.95, "figures": figures}


def summary_of(path: str | None, overrides: list[str], seed: int | None) -> dict[str, Any]:
    """The summary of one run: the scenario at `path` (None: the default) with overrides and seed."""
    from kvsim.engine.simulation import Simulation
    from kvsim.metrics.summary import build_summary
    from kvsim.scenario import load_scenario

    res = Simulation(load_scenario(path, overrides, seed)).run()
    return build_summary(res.tables, None, res.meta)


def run_repeats(scenario: str | Path | None, overrides: list[str], seed_list: list[int], jobs: int = 1,
                first: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The summary of each seed's run, in seed order (`jobs` > 1: in that many processes; `first`: the
    first seed's summary, already computed)."""
    path = None if scenario is None else str(scenario)
    todo = seed_list[1:] if first is not None else seed_list
    if jobs <= 1 or len(todo) <= 1:
        rest = [summary_of(path, overrides, s) for s in todo]
    else:
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo))) as pool:
            rest = list(pool.map(summary_of, [path] * len(todo), [overrides] * len(todo), todo))
    return [first, *rest] if first is not None else rest
