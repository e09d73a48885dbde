"""plan.png: each SLO objective's value (the bound plan judges by) against the searched knob, the threshold
and the answer. Conventions of kvsim/metrics/plots.py: an Agg canvas, no timestamp metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kvsim.schema import objectives

_SAVE_KW: dict[str, Any] = {"dpi": 100, "format": "png", "metadata": {"Software": None}}


def plot_plan(path: Path, plan) -> None:
    """One panel per objective: probes as points (filled where every objective held), the threshold as a
    dashed line, the answer as a vertical line."""
    objs = objectives(plan.slo)
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(6.4, 2.6 * len(objs) + 0.6))
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(objs), 1, squeeze=False)[:, 0]
        probes = sorted(plan.probes, key=lambda p: p.value)
        for ax, o in zip(axes, objs, strict=True):
            pts = [(p.value, p.objectives[o.metric]["bound_s"], p.holds) for p in probes
                   if p.objectives[o.metric]["bound_s"] is not None]
            ax.plot([x for x, _, _ in pts], [y for _, y, _ in pts], color="#264653", lw=1)
            for x, y, ok in pts:
                ax.plot([x], [y], "o", color="#2a9d8f" if ok else "#e76f51", ms=5)
            ax.axhline(o.threshold_s, ls="--", color="#e76f51", lw=1, label=f"threshold {o.threshold_s:g} s")
            if plan.answer is not None:
                ax.axvline(plan.answer, color="#2a9d8f", lw=1, label=f"answer {plan.answer:.4g}")
            bound = "95% upper bound" if plan.repeats > 1 else "value"
            ax.set_ylabel(f"{o.metric} {o.stat} ({bound}) [s]")
            ax.legend(loc="best", fontsize=8)
        axes[-1].set_xlabel(plan.key)
        fig.suptitle(f"kvsim plan --find {plan.find}", fontsize=10)
        fig.tight_layout()
        fig.savefig(path, **_SAVE_KW)


def plot_cost_plan(path: Path, plan) -> None:
    """min_cost: one bar per candidate that holds the SLO (USD per hour of its fleet, labelled with its
    replicas x TP), the cheapest highlighted; candidates without an answer are named below."""
    ok = [c for c in plan.candidates if c.usd_per_hour is not None]
    best = plan.best
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(6.4, 3.6))
        FigureCanvasAgg(fig)
        ax = fig.subplots(1, 1)
        labels = [f"{c.hardware}\nTP{c.tp} x {int(c.plan.answer)}" for c in ok]
        colors = ["#2a9d8f" if c is best else "#8ab17d" for c in ok]
        ax.bar(range(len(ok)), [c.usd_per_hour for c in ok], color=colors)
        ax.set_xticks(range(len(ok)), labels, fontsize=7)
        ax.set_ylabel("fleet USD per hour")
        missing = [f"{c.hardware} TP{c.tp}" for c in plan.candidates if c.usd_per_hour is None]
        if missing:
            ax.set_xlabel("no answer: " + ", ".join(missing), fontsize=7)
        fig.suptitle("kvsim plan --find min_cost (cheapest fleet within the SLO)", fontsize=10)
        fig.tight_layout()
        fig.savefig(path, **_SAVE_KW)
