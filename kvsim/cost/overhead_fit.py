"""The kernel model's overhead terms fitted to published latency runs, with leave-one-out errors.

A latency case (kvsim.cost.published.latency_run_s: one prefill step, then decode steps) is linear in the
two terms fitted here, the fixed one per iteration and the one per layer (the eager per-layer term moves
with it, `EAGER_EXTRA_S` above it; the per-sequence term stays at the roofline's estimate):
time = base + a * iteration_overhead_s + b * layer_overhead_s. `case_terms` reads base, a and b off the
cost model itself (three evaluations), `fit` minimises the squared relative error over the cases with both
terms >= 0 (the least-squares optimum, or the best with one term at 0), and `leave_one_out` refits without
each case in turn and predicts it: the error a user should expect on a run the fit has not seen."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

EAGER_EXTRA_S = 2.8e-5
"""Eager minus graph per-layer overhead: the roofline's estimate of a layer's CPU launches
(1.0e-4 - 7.2e-5 s)."""


@dataclass(frozen=True, slots=True)
class CaseTerms:
    """One case: published seconds, and kvsim's time as base + a * iteration + b * layer."""

    name: str
    published_s: float
    base: float
    a: float
    b: float

    def predict(self, iteration_s: float, layer_s: float) -> float:
        return self.base + self.a * iteration_s + self.b * layer_s


def case_terms(name: str, published_s: float, run_s: Callable[[dict[str, float]], float],
               seq_overhead_s: float) -> CaseTerms:
    """`run_s(overheads)`: the case's time with those overhead keyword arguments."""

    def at(it: float, layer: float) -> float:
        return run_s({"iteration_overhead_s": it, "layer_overhead_s": layer,
                      "eager_layer_overhead_s": layer + EAGER_EXTRA_S, "seq_overhead_s": seq_overhead_s})

    base = at(0.0, 0.0)
    step = 1e-3
    return CaseTerms(name, published_s, base, (at(step, 0.0) - base) / step, (at(0.0, step) - base) / step)


def fit(cases: Sequence[CaseTerms]) -> tuple[float, float]:
    """(iteration_overhead_s, layer_overhead_s) >= 0 minimising sum ((predict - published) / published)^2."""
    rows = [(c.a / c.published_s, c.b / c.published_s, 1.0 - c.base / c.published_s) for c in cases]

    def sse(x: float, y: float) -> float:
        return sum((a * x + b * y - r) ** 2 for a, b, r in rows)

    candidates = [(0.0, 0.0)]
    saa = sum(a * a for a, _, _ in rows)
    sbb = sum(b * b for _, b, _ in rows)
    sab = sum(a * b for a, b, _ in rows)
    sar = sum(a * r for a, _, r in rows)
    sbr = sum(b * r for _, b, r in rows)
    det = saa * sbb - sab * sab
    if det > 1e-12 * max(saa * sbb, 1e-300):
        x, y = (sar * sbb - sbr * sab) / det, (sbr * saa - sar * sab) / det
        if x >= 0 and y >= 0:
            candidates.append((x, y))
    if saa > 0:
        candidates.append((max(0.0, sar / saa), 0.0))
    if sbb > 0:
        candidates.append((0.0, max(0.0, sbr / sbb)))
    return min(candidates, key=lambda p: (sse(*p), p))


def leave_one_out(cases: Sequence[CaseTerms]) -> list[tuple[str, float, tuple[float, float]]]:
    """(case, kvsim / published with the terms fitted on the others, those terms) for each case."""
    out = []
    for i, c in enumerate(cases):
        terms = fit([d for j, d in enumerate(cases) if j != i])
        out.append((c.name, c.predict(*terms) / c.published_s, terms))
    return out


def ratio_summary(ratios: Sequence[float]) -> dict[str, float]:
    """Median and max absolute relative error of kvsim / published ratios."""
    errs = [abs(r - 1) for r in ratios]
    return {"median_abs_err": statistics.median(errs), "max_abs_err": max(errs)}
