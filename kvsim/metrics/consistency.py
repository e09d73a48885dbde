"""Check that summary.json agrees with requests.parquet and timeline.parquet: every summary figure that is a
sum, mean, count, percentile or ratio of per-request or per-iteration figures is recomputed here from its
definition in docs/metrics.md, by code of its own (plain sorting, loops over replicas, math.fsum), and
compared with the summary's value; engine totals that have a per-request counterpart (P/D transfer bytes,
preemptions, tier loads) are compared with it. Every other numeric figure is listed in EXEMPT with the
reason it cannot be derived from the two tables (docs/metrics.md, "Consistency of the figures").

`check_consistency(summary, requests, timeline)` returns the Mismatches (empty: consistent), among them any
numeric figure of the summary that is neither checked nor exempt, so a new figure cannot slip by. In check
mode (`kv.check_invariants: true`) build_summary raises ConsistencyError on the first.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from kvsim.metrics.consistency_bench_serve import check_bench_serve
from kvsim.metrics.consistency_core import ABS_TOL, REL_TOL, Checker, Mismatch, check_mode
from kvsim.metrics.consistency_exempt import EXEMPT
from kvsim.metrics.consistency_fleet import check_fleet
from kvsim.metrics.consistency_lora import check_lora
from kvsim.metrics.consistency_sections import (
    check_concurrency,
    check_cost,
    check_kv,
    check_latency,
    check_prefix,
    check_requests,
    check_slo,
    check_sparsity,
    check_throughput,
    check_tiers,
)
from kvsim.metrics.consistency_speculative import check_speculative
from kvsim.metrics.consistency_stats import Tables

__all__ = ["ABS_TOL", "CONFIG_COPIES", "EXEMPT", "REL_TOL", "ConsistencyError", "Mismatch",
           "assert_consistent", "check_consistency", "check_mode", "checked_figures", "exemption",
           "numeric_leaves"]

CONFIG_COPIES = ("scenario", "model", "hardware", "cost_model", "kvsim_version")
"""Top-level keys that copy the run's configuration: not figures."""


class ConsistencyError(AssertionError):
    """Check mode: a summary figure disagrees with requests.parquet / timeline.parquet (a kvsim bug)."""


def numeric_leaves(summary: dict[str, Any]) -> list[str]:
    """Path of every number in the summary outside the configuration copies; list indices written `[i]`
    (a null is no number: a figure undefined in this run is still compared where it is checked)."""
    out: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            out.append(path)

    walk({k: v for k, v in summary.items() if k not in CONFIG_COPIES}, "")
    return out


def exemption(path: str) -> str | None:
    """Why the figure at path is not recomputed (its EXEMPT entry), or None."""
    parts = _pattern_parts(path)
    for pattern, reason in EXEMPT.items():
        want = _pattern_parts(pattern)
        if len(want) == len(parts) and all(w in ("*", p) for w, p in zip(want, parts, strict=True)):
            return reason
    return None


def _pattern_parts(path: str) -> list[str]:
    return re.sub(r"\[\d*\]", "[]", path).split(".")


def _run(summary: dict[str, Any], requests: pd.DataFrame, timeline: pd.DataFrame) -> Checker:
    c = Checker(summary)
    t = Tables(requests, timeline)
    check_requests(c, t)
    thr = check_throughput(c, t)
    for section in (check_latency, check_concurrency, check_kv, check_prefix, check_slo, check_tiers,
                    check_bench_serve, check_sparsity, check_speculative):
        section(c, t)
    check_cost(c, thr)
    check_fleet(c, t, thr)
    check_lora(c, t)
    return c


def check_consistency(summary: dict[str, Any], requests: pd.DataFrame,
                      timeline: pd.DataFrame) -> list[Mismatch]:
    """Every figure of `summary` that the tables determine, recomputed from them and compared; plus a
    Mismatch (recomputed "neither checked nor exempt") for each numeric figure this module does not know."""
    c = _run(summary, requests, timeline)
    for path in numeric_leaves(summary):
        if path not in c.checked and exemption(path) is None:
            c.mismatches.append(Mismatch(path, c.get(path), "neither checked nor exempt", 0.0,
                                         "kvsim/metrics/consistency.py"))
    return c.mismatches


def checked_figures(summary: dict[str, Any], requests: pd.DataFrame, timeline: pd.DataFrame
                    ) -> tuple[list[str], list[str]]:
    """(checked, exempt) numeric figure paths of this summary."""
    c = _run(summary, requests, timeline)
    leaves = numeric_leaves(summary)
    return [p for p in leaves if p in c.checked], [p for p in leaves if p not in c.checked and exemption(p)]


def assert_consistent(summary: dict[str, Any], requests: pd.DataFrame, timeline: pd.DataFrame) -> None:
    """Raise ConsistencyError naming the first mismatching figure (and how many more) if there is one."""
    found = check_consistency(summary, requests, timeline)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        raise ConsistencyError(found[0].line() + more)
