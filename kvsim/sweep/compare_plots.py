"""The two plots of `kvsim compare`: the KV memory breakdown per variant (stacked bars) and batched
requests over time (one line per variant). Same conventions as kvsim/metrics/plots.py: an Agg canvas,
matplotlib's default style, no timestamp metadata, so the bytes repeat for the same results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.style
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kvsim.kvcache.breakdown import SUMMARY_KEYS
from kvsim.metrics.plots import replica_mean_curve

_SAVE_KW: dict[str, Any] = {"dpi": 100, "format": "png", "metadata": {"Software": None}}
PART_LABELS: dict[str, str] = {
    "token_states": "token states",
    "reservation": "reservation",
    "internal_fragmentation": "internal fragmentation",
    "external_fragmentation": "external fragmentation",
    "free": "free",
}
PART_COLORS: dict[str, str] = {
    "token_states": "#2a9d8f", "reservation": "#e9c46a", "internal_fragmentation": "#f4a261",
    "external_fragmentation": "#e76f51", "free": "#d9d9d9",
}


def _figure(width: float, height: float) -> tuple[Figure, Any]:
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, 1)


def plot_breakdown_bars(path: Path, results: list) -> None:
    """One stacked bar per variant: time-averaged share of KV capacity in each breakdown part."""
    from kvsim.sweep.compare import variant_labels

    labels, _ = variant_labels(results)
    with matplotlib.style.context("default"):
        n = len(results)
        plot_w, legend_w = max(4.0, 1.1 * n + 1.0), 2.4  # inches: the bars, then the legend beside them
        fig, ax = _figure(plot_w + legend_w + 0.9, 4.5)
        x = np.arange(n)
        bottom = np.zeros(n)
        for key in SUMMARY_KEYS:
            values = np.array([(r.summary["kv"]["breakdown"].get(key) or 0.0) * 100 for r in results])
            ax.bar(x, values, bottom=bottom, width=0.6, label=PART_LABELS[key], color=PART_COLORS[key])
            for i, v in enumerate(values):
                if v >= 4:
                    ax.text(x[i], bottom[i] + v / 2, f"{v:.1f}", ha="center", va="center", fontsize=8)
            bottom += values
        ax.set_xticks(x, labels, rotation=15 if n > 3 else 0, ha="right" if n > 3 else "center",
                      fontsize=8)
        ax.set_ylim(0, 100)
        ax.set_ylabel("% of KV capacity (time-averaged)")
        ax.set_title("KV memory breakdown")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
        width = plot_w + legend_w + 0.9
        fig.subplots_adjust(left=0.9 / width, right=(0.9 + plot_w) / width, bottom=0.2, top=0.92)
        fig.savefig(path, **_SAVE_KW)


def plot_batched_over_time(path: Path, results: list) -> None:
    """Running (batched) requests against simulated time, one line per variant (mean over replicas)."""
    from kvsim.sweep.compare import variant_labels

    labels, _ = variant_labels(results)
    with matplotlib.style.context("default"):
        fig, ax = _figure(9.0, 4.0)
        for r, label in zip(results, labels, strict=True):
            tl = r.timeline
            if len(tl):
                x, y = replica_mean_curve(tl, tl["running_reqs"])
                ax.plot(x, y, label=label, linewidth=1.0)
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("batched requests")
        ax.set_ylim(bottom=0)
        ax.set_title("Batched requests over time")
        if any(len(r.timeline) for r in results):
            ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
        fig.subplots_adjust(left=0.08, right=0.72, bottom=0.13, top=0.91)
        fig.savefig(path, **_SAVE_KW)
