"""Service-level objectives: which requests meet them (`meets_slo`), whether each is attained, goodput
(the `slo` key itself is checked by kvsim/schema.py check_slo).

A scenario's `slo` maps a latency metric to one percentile and its threshold in seconds, e.g.
`{ttft_s: {p99: 2.0}, tpot_s: {p90: 0.05}}`. A request meets the SLO when it completed and each named
metric of it is within its threshold (TPOT does not apply to a one-token output). An objective is attained
when the metric's percentile over the run (as in the summary's latency section) is within the threshold.
docs/metrics.md defines every key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.schema import objectives

if TYPE_CHECKING:
    import pandas as pd

def population(requests: pd.DataFrame, metric: str) -> np.ndarray:
    """The metric's values over the requests the summary's latency section takes them from (TPOT: multi-
    token outputs; E2E: completed requests), NaN dropped."""
    x = requests[metric].to_numpy(np.float64)
    if metric == "tpot_s":
        x = x[requests["output_len"].to_numpy() > 1]
    return x[~np.isnan(x)]


def meets_slo(requests: pd.DataFrame, slo: dict[str, dict[str, float]]) -> np.ndarray:
    """Per request: completed (a finish and not rejected) and within every objective's threshold."""
    ok = requests["finish_s"].notna().to_numpy(bool, copy=True)
    if "rejected" in requests.columns:
        ok &= requests["rejected"].to_numpy() == 0
    for o in objectives(slo):
        x = requests[o.metric].to_numpy(np.float64)
        within = x <= o.threshold_s  # (NaN is not within)
        if o.metric == "tpot_s":
            within = within | (requests["output_len"].to_numpy() <= 1)
        ok &= within
    return ok


def meets_slo_columns(column, has_rejected: bool, slo: dict[str, dict[str, float]]) -> np.ndarray:
    """meets_slo from request columns: column(name) -> the column's numpy values (rid order)."""
    ok = ~np.isnan(column("finish_s").astype(np.float64))
    if has_rejected:
        ok &= column("rejected") == 0
    for o in objectives(slo):
        within = column(o.metric).astype(np.float64) <= o.threshold_s  # (NaN is not within)
        if o.metric == "tpot_s":
            within = within | (column("output_len") <= 1)
        ok &= within
    return ok


def slo_section(requests: pd.DataFrame, slo: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per objective: its percentile, threshold, the run's value, attained, and the fraction of the
    metric's requests within the threshold; `attained`: every objective is."""
    out: dict[str, Any] = {}
    every = True
    for o in objectives(slo):
        x = population(requests, o.metric)
        value = float(np.percentile(x, o.quantile)) if x.size else None
        attained = o.holds(value)
        every &= attained
        out[o.metric] = {"percentile": o.stat, "threshold_s": o.threshold_s, "value_s": value,
                         "attained": attained,
                         "within_fraction": float((x <= o.threshold_s).mean()) if x.size else None}
    out["attained"] = every
    return out


def goodput_section(meets: np.ndarray, makespan_s: float | None) -> dict[str, Any]:
    """Requests meeting every objective: per second of the makespan (DistServe's goodput), their count
    and their fraction of all requests."""
    n = int(meets.sum())
    rate = n / makespan_s if makespan_s else None
    return {"requests_per_s": rate, "requests": n, "fraction": n / meets.size if meets.size else None}


LABELS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "E2E", "queue_s": "queue"}


def slo_rows(slo: dict[str, Any] | None, goodput: dict[str, Any] | None, fmt, pct) -> list[tuple[str, str]]:
    """Console / report.md rows: each objective (value, attained or missed, fraction within) and
    goodput; none without an `slo`."""
    if not slo:
        return []
    rows = []
    for metric, obj in slo.items():
        if metric == "attained":
            continue
        verdict = "attained" if obj["attained"] else "missed"
        rows.append((f"SLO {LABELS[metric]} {obj['percentile']} <= {fmt(obj['threshold_s'])} s",
                     f"{fmt(obj['value_s'])} s, {verdict} ({pct(obj['within_fraction'])} within)"))
    if goodput is not None:
        rows.append(("goodput (req/s meeting every SLO, fraction)",
                     f"{fmt(goodput['requests_per_s'])} / {pct(goodput['fraction'])}"))
    return rows
