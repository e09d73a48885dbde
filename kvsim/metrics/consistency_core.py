"""The consistency checker's core (kvsim/metrics/consistency.py): the tolerances, a Mismatch, the Checker
that compares summary figures with the values recomputed from requests.parquet / timeline.parquet, and
check_mode (which build_summary asks before it loads the rest of the checker)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

REL_TOL = 1e-9
"""Relative tolerance of a float figure (summation order and interpolation formulas differ)."""
ABS_TOL = 1e-12
"""Absolute floor of the tolerance (a mean of values that cancel to 0 may read 1e-17)."""


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A summary figure that disagrees with what the tables give (`relation` "==" or ">=": the summary's
    value must equal, or be at least, `recomputed`); `source` names what it was recomputed from."""

    figure: str
    summary: Any
    recomputed: Any
    tolerance: float
    source: str
    relation: str = "=="

    def line(self) -> str:
        """One line: the figure, both values, the source."""
        want = "" if self.relation == "==" else "at least "
        return (f"summary {self.figure} = {_show(self.summary)}, {self.source} gives {want}"
                f"{_show(self.recomputed)}")


def _show(x: Any) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


class Checker:
    """Compares a summary's figures with the values recomputed from the tables: the paths it checked and
    the Mismatches it found."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        self.checked: set[str] = set()
        self.mismatches: list[Mismatch] = []

    def get(self, path: str) -> Any:
        node: Any = self.summary
        for key in _split(path):
            if isinstance(node, list):
                node = node[int(key)]
            elif isinstance(node, dict) and key in node:
                node = node[key]
            else:
                return MISSING
        return node

    def eq(self, path: str, recomputed: Any, source: str, exact: bool = False) -> None:
        """The figure at path must equal recomputed (floats within REL_TOL; exact: ints exactly)."""
        value = self.get(path)
        if value is MISSING:
            return
        self.checked.add(path)
        if isinstance(recomputed, dict):
            for k, v in recomputed.items():
                self.eq(f"{path}.{k}", v, source, exact)
            return
        tol = 0.0 if exact else REL_TOL
        if not _same(value, recomputed, tol):
            self.mismatches.append(Mismatch(path, value, _plain(recomputed), tol, source))

    def at_least(self, path: str, bound: float, source: str) -> None:
        """A cross-check: the figure at path (also checked or exempt elsewhere) must be >= bound."""
        value = self.get(path)
        if value is MISSING or value is None:
            return
        if value < bound - max(REL_TOL * abs(bound), ABS_TOL):
            self.mismatches.append(Mismatch(path, value, _plain(bound), REL_TOL, source, ">="))


MISSING = object()
"""Checker.get's answer for a path the summary does not have."""


def _split(path: str) -> list[str]:
    out = []
    for part in path.split("."):
        while "[" in part:
            head, _, rest = part.partition("[")
            idx, _, part = rest.partition("]")
            if head:
                out.append(head)
            out.append(idx)
        if part:
            out.append(part)
    return out


def _plain(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    return x


def _same(a: Any, b: Any, tol: float) -> bool:
    b = _plain(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    if tol == 0.0:
        return a == b
    return abs(a - b) <= max(tol * max(abs(a), abs(b)), ABS_TOL)


def check_mode(summary: dict[str, Any]) -> bool:
    """Whether the run was in check mode: kv.check_invariants on the scenario or any of its pools."""
    sc = summary.get("scenario") or {}
    pools = (sc.get("cluster") or {}).get("pools") or []
    return bool((sc.get("kv") or {}).get("check_invariants")) or any(
        ((p or {}).get("kv") or {}).get("check_invariants") for p in pools)
