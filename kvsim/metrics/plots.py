"""PNG plots of one run: KV usage, concurrency and latency CDFs; with a fleet, per-replica bars.

Figures are built with matplotlib's object API on an Agg canvas rather than pyplot, so plotting never
touches the global backend or leaks figures, and runs under matplotlib's default style whatever the
user's matplotlibrc says. Output bytes are deterministic: no Software/date metadata is written.
Timelines are drawn as time-weighted bin means (at most PLOT_BINS points), so 100k-row timelines stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kvsim.metrics.frames import replica_capacities, row_capacity, with_hold

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOT_BINS = 1000
CDF_POINTS = 1001
_SAVE_KW: dict[str, Any] = {"dpi": 100, "format": "png", "metadata": {"Software": None}}

PLOT_FILES: tuple[str, ...] = ("kv_usage.png", "concurrency.png", "latency_cdf.png", "latency_over_time.png")
FLEET_PLOT_FILES: tuple[str, ...] = ("replicas.png",)
"""Written too when the summary has a `fleet` section."""
TIER_PLOT_FILES: tuple[str, ...] = ("kv_tiers.png",)
"""Written too when the summary has a `tiers` section."""
ROLE_COLORS: dict[str, str] = {"mixed": "tab:blue", "prefill": "tab:orange", "decode": "tab:green"}


def step_bin_means(t: np.ndarray, hold: np.ndarray, v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time-weighted mean over each bin [edges[i], edges[i+1]) of one replica's step function, which holds
    v[k] on [t[k], t[k] + hold[k]) and 0 elsewhere. Rows must be sorted by t and must not overlap."""
    seg = v * hold
    before = np.concatenate(([0.0], np.cumsum(seg)))  # area of all segments before row k
    k = np.searchsorted(t, edges, side="right") - 1
    kk = np.clip(k, 0, None)
    area = before[kk] + v[kk] * np.clip(edges - t[kk], 0.0, hold[kk])
    area = np.where(k < 0, 0.0, area)
    return np.diff(area) / np.diff(edges)


def replica_mean_curve(timeline: pd.DataFrame, values: pd.Series,
                       bins: int = PLOT_BINS) -> tuple[np.ndarray, np.ndarray]:
    """(bin centres, mean over replicas of each replica's time-weighted bin mean). A replica counts as 0
    outside the span its rows cover."""
    start = float(timeline["t_s"].min())
    end = float((timeline["t_s"] + timeline["hold_s"]).max())
    if not end > start:
        return np.array([start]), np.array([float(values.mean())])
    edges = np.linspace(start, end, bins + 1)
    total = np.zeros(bins)
    t = timeline["t_s"].to_numpy(np.float64)
    hold = timeline["hold_s"].to_numpy(np.float64)
    v = values.to_numpy(np.float64)
    groups = sorted(timeline.groupby("replica", sort=True).indices.items())
    for _, pos in groups:
        pos = pos[np.argsort(t[pos], kind="stable")]
        total += step_bin_means(t[pos], hold[pos], v[pos], edges)
    return (edges[:-1] + edges[1:]) / 2, total / len(groups)


def _matplotlib() -> tuple[Any, Any, Any, Any]:
    """(matplotlib.style, FigureCanvasAgg, Figure, Patch), imported on the first plot rather than with this
    module: matplotlib's import is most of `kvsim run`'s start-up, paid only where plots are drawn. All
    of it is imported at once, before any style context is entered, as a module-level import was."""
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    return matplotlib.style, FigureCanvasAgg, Figure, Patch


def _figure(ncols: int = 1, width: float = 8.0, legend: bool = False, nrows: int = 1,
            height: float = 4.0) -> tuple[Figure, Any]:
    """A figure of nrows x ncols axes (flattened); `legend`: room on the right for a legend beside the
    axes (the legend never sits on the data)."""
    _, canvas_agg, figure, _ = _matplotlib()
    fig = figure(figsize=(width + (1.8 if legend else 0.0), height))
    canvas_agg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    # fixed margins: constrained layout would double the drawing time
    right = 1.0 - (1.8 / (width + 1.8) if legend else 0.02)
    fig.subplots_adjust(left=0.09 * 8.0 / width, right=right, bottom=0.13 if nrows == 1 else 0.08,
                        top=0.91 if nrows == 1 else 0.94, wspace=0.22, hspace=0.35)
    return fig, axes


def _legend(ax: Any) -> None:
    """The legend beside the axes, on the right (room made by _figure(legend=True))."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _no_data(ax: Any) -> None:
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def _per_replica_label(timeline: pd.DataFrame) -> str:
    return " (mean per replica)" if timeline["replica"].nunique() > 1 else ""


def plot_kv_usage(path: Path, summary: dict[str, Any], timeline: pd.DataFrame) -> None:
    """KV token states and used blocks (and cached blocks if any) as a fraction of capacity vs time; with
    KV tiers, each tier's blocks as a fraction of its own capacity."""
    fig, (ax,) = _figure(legend=True)
    kv = summary.get("kv", {})
    cap_tokens, cap_blocks = kv.get("capacity_tokens"), kv.get("capacity_blocks")
    if len(timeline) == 0:
        _no_data(ax)
    else:
        scale_t: Any = 1.0 / cap_tokens if cap_tokens else 1.0
        scale_b: Any = 1.0 / cap_blocks if cap_blocks else 1.0
        fleet = summary.get("fleet")
        if fleet is not None:  # each replica's rows over its own capacity (heterogeneous fleets)
            caps = replica_capacities(fleet["per_replica"], fleet.get("pools"), kv.get("block_size"))
            blocks, sizes = row_capacity(timeline, caps)
            if (blocks * sizes).notna().any():  # a replica of unknown capacity draws as 0
                scale_b, scale_t = (1.0 / blocks).fillna(0.0), (1.0 / (blocks * sizes)).fillna(0.0)
                cap_tokens = 1  # label and y-limits as fractions, as with one known capacity
        series = [("token states", timeline["kv_token_states"] * scale_t),
                  ("used blocks", timeline["kv_used_blocks"] * scale_b)]
        if (timeline["kv_cached_blocks"] > 0).any():
            series.append(("cached blocks", timeline["kv_cached_blocks"] * scale_b))
        for medium, tier in ((summary.get("tiers") or {}).get("per_tier") or {}).items():
            col = f"tier_{medium}_blocks"  # KV tiers below the GPU, each over its own capacity
            if col in timeline.columns and tier.get("capacity_blocks"):
                series.append((f"{medium} tier blocks", timeline[col] / tier["capacity_blocks"]))
        for label, values in series:
            x, y = replica_mean_curve(timeline, values)
            ax.plot(x, y, label=label, linewidth=1.0)
        ax.set_ylabel(("fraction of KV capacity" if cap_tokens else "count") + _per_replica_label(timeline))
        if cap_tokens:
            ax.set_ylim(0, 1.05)
        _legend(ax)
    ax.set_xlabel("simulated time (s)")
    ax.set_title("KV cache usage")
    fig.savefig(path, **_SAVE_KW)


def plot_concurrency(path: Path, timeline: pd.DataFrame) -> None:
    """Running and waiting requests vs time."""
    fig, (ax,) = _figure(legend=True)
    if len(timeline) == 0:
        _no_data(ax)
    else:
        for col, label in (("running_reqs", "running"), ("waiting", "waiting")):
            x, y = replica_mean_curve(timeline, timeline[col])
            ax.plot(x, y, label=label, linewidth=1.0)
        ax.set_ylabel("requests" + _per_replica_label(timeline))
        ax.set_ylim(bottom=0)
        _legend(ax)
    ax.set_xlabel("simulated time (s)")
    ax.set_title("Concurrency")
    fig.savefig(path, **_SAVE_KW)


def cdf_points(series: pd.Series, points: int = CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(x, F(x)) of the empirical CDF of the non-NaN values; at most `points` points (quantiles) so large
    runs draw fast."""
    x = np.sort(series.dropna().to_numpy(np.float64))
    if x.size <= points:
        return x, np.arange(1, x.size + 1) / x.size
    p = np.linspace(0.0, 1.0, points)
    return np.quantile(x, p), p


def plot_latency_cdf(path: Path, requests: pd.DataFrame) -> None:
    """CDFs of TTFT, TPOT and E2E, one panel each."""
    fig, axes = _figure(ncols=3, width=12.0)
    panels = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E"))
    for ax, (col, label) in zip(axes, panels, strict=True):
        x, y = cdf_points(requests[col]) if col in requests else (np.array([]), np.array([]))
        if x.size == 0:
            _no_data(ax)
        else:
            ax.step(x, y, where="post", linewidth=1.0)
            ax.set_ylim(0, 1.02)
            ax.xaxis.set_major_locator(_ticks(4))  # (few ticks: long labels such as 0.0125 never collide)
        ax.set_xlabel(f"{label} (s)")
        ax.set_title(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("fraction of requests")
    fig.savefig(path, **_SAVE_KW)


def _ticks(n: int) -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(nbins=n, min_n_ticks=2)


TIME_BINS = 40


def plot_latency_over_time(path: Path, requests: pd.DataFrame, timeline: pd.DataFrame) -> None:
    """Top: TTFT p50 / p99 and queueing p99 of the requests arriving in each of TIME_BINS time bins (log
    scale), with the steady-state window kvsim plan would judge (kvsim/metrics/steady.py) shaded; bottom:
    waiting requests over time."""
    from kvsim.metrics.steady import steady_state

    fig, (top, bottom) = _figure(legend=True, nrows=2, height=6.0)
    cols = {"arrival_s", "finish_s", "ttft_s", "queue_s"}
    usable = len(requests) and cols <= set(requests)
    a = requests["arrival_s"].to_numpy(np.float64) if usable else np.array([])
    if a.size == 0 or not np.isfinite(a).any():
        _no_data(top)
    else:
        edges = np.linspace(a.min(), a.max() if a.max() > a.min() else a.min() + 1.0, TIME_BINS + 1)
        idx = np.clip(np.searchsorted(edges, a, side="right") - 1, 0, TIME_BINS - 1)
        mids = (edges[:-1] + edges[1:]) / 2
        for col, q, label in (("ttft_s", 50, "TTFT p50"), ("ttft_s", 99, "TTFT p99"),
                              ("queue_s", 99, "queue p99")):
            v = requests[col].to_numpy(np.float64)
            y = np.full(TIME_BINS, np.nan)
            for k in range(TIME_BINS):
                x = v[(idx == k) & np.isfinite(v)]
                if x.size:
                    y[k] = np.percentile(x, q)
            y[~(y > 0)] = np.nan  # (log scale: a zero queueing time is not drawn)
            top.plot(mids, y, label=label, linewidth=1.0, marker=".", markersize=3)
        top.set_yscale("log")
        st = steady_state(requests)
        top.axvspan(st.window.start_s, st.window.end_s, color="#2a9d8f", alpha=0.08,
                    label="steady window")
        top.set_ylabel("seconds (by arrival time)")
        _legend(top)
    top.set_title("TTFT and queueing over time")
    if len(timeline) == 0:
        _no_data(bottom)
    else:
        x, y = replica_mean_curve(timeline, timeline["waiting"])
        bottom.plot(x, y, label="waiting", linewidth=1.0, color="tab:red")
        x, y = replica_mean_curve(timeline, timeline["running_reqs"])
        bottom.plot(x, y, label="running", linewidth=1.0, color="tab:blue")
        bottom.set_ylim(bottom=0)
        bottom.set_ylabel("requests" + _per_replica_label(timeline))
        _legend(bottom)
    bottom.set_xlabel("simulated time (s)")
    fig.savefig(path, **_SAVE_KW)


def plot_kv_tiers(path: Path, summary: dict[str, Any], timeline: pd.DataFrame) -> None:
    """KV held by tier over time, one panel per tier (GPU, then each tier below it), in GB with the tier's
    capacity dashed: what each level of the hierarchy holds, on its own scale."""
    kv = summary.get("kv", {})
    tiers = (summary.get("tiers") or {}).get("per_tier") or {}
    per_block = kv.get("bytes_per_block") or 0
    panels = [("GPU", None, kv.get("capacity_blocks"))] + [
        (medium, f"tier_{medium}_blocks", t.get("capacity_blocks")) for medium, t in tiers.items()]
    fig, axes = _figure(ncols=len(panels), width=4.0 * len(panels))
    for ax, (name, col, cap) in zip(axes, panels, strict=True):
        ax.set_title(f"{name}")
        ax.set_xlabel("simulated time (s)")
        if len(timeline) == 0 or not per_block:
            _no_data(ax)
            continue
        scale = per_block / 1e9
        if col is None:
            for c, label in (("kv_used_blocks", "in use"), ("kv_cached_blocks", "cached")):
                x, y = replica_mean_curve(timeline, timeline[c])
                ax.plot(x, y * scale, label=label, linewidth=1.0)
            ax.legend(loc="lower right", fontsize=7)
        elif col in timeline.columns:
            x, y = replica_mean_curve(timeline, timeline[col])
            ax.plot(x, y * scale, linewidth=1.0, color="tab:purple")
        if cap:
            ax.axhline(cap * scale, ls="--", color="gray", lw=0.8)
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_locator(_ticks(4))
    axes[0].set_ylabel("GB held" + _per_replica_label(timeline))
    fig.savefig(path, **_SAVE_KW)


def _bars(ax: Any, per_replica: list[dict[str, Any]], key: str, title: str, fraction: bool) -> None:
    """One panel: a bar per replica of per_replica[i][key] (no bar where it is None), colored by role."""
    x = [p["index"] for p in per_replica]
    y = [np.nan if p.get(key) is None else p[key] for p in per_replica]
    ax.bar(x, y, color=[ROLE_COLORS.get(p.get("role"), "tab:gray") for p in per_replica], width=0.8)
    ax.set_title(title)
    ax.set_xlabel("replica")
    if fraction:
        ax.set_ylim(0, 1.05)
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlim(min(x) - 0.6, max(x) + 0.6)  # every replica's slot, with or without a bar
    if len(x) <= 16:
        ax.set_xticks(x)
    ax.grid(True, axis="y", alpha=0.3)


def plot_replicas(path: Path, summary: dict[str, Any], requests: pd.DataFrame,
                  timeline: pd.DataFrame) -> None:
    """Per replica of the fleet (summary["fleet"]["per_replica"]): requests routed there, prefix-cache
    hit rate and busy fraction, one panel each, bars colored by role. `requests` and `timeline` are
    accepted for symmetry with the other plots; the figures come from the summary."""
    del requests, timeline
    fig, axes = _figure(ncols=3, width=12.0)
    per_replica = (summary.get("fleet") or {}).get("per_replica") or []
    panels = (("routed", "routed requests", False), ("hit_rate", "prefix-cache hit rate", True),
              ("busy_fraction", "busy fraction", True))
    for ax, (key, title, fraction) in zip(axes, panels, strict=True):
        if per_replica:
            _bars(ax, per_replica, key, title, fraction)
        else:
            _no_data(ax)
            ax.set_title(title)
    roles = [r for r in ROLE_COLORS if any(p.get("role") == r for p in per_replica)]
    if roles:  # above the panels, clear of the bars
        patch = _matplotlib()[3]
        fig.subplots_adjust(top=0.84)
        fig.legend(handles=[patch(color=ROLE_COLORS[r], label=r) for r in roles], loc="upper center",
                   ncol=len(roles), frameon=False)
    fig.savefig(path, **_SAVE_KW)


def write_plots(out_dir: Path, summary: dict[str, Any], requests: pd.DataFrame,
                timeline: pd.DataFrame) -> list[str]:
    """Write PLOT_FILES (and FLEET_PLOT_FILES when the summary has a fleet) into out_dir; returns their
    file names."""
    out_dir = Path(out_dir)
    timeline = with_hold(timeline)
    files = list(PLOT_FILES)
    style = _matplotlib()[0]
    with style.context("default"):
        plot_kv_usage(out_dir / "kv_usage.png", summary, timeline)
        plot_concurrency(out_dir / "concurrency.png", timeline)
        plot_latency_cdf(out_dir / "latency_cdf.png", requests)
        plot_latency_over_time(out_dir / "latency_over_time.png", requests, timeline)
        if summary.get("tiers") is not None:
            plot_kv_tiers(out_dir / "kv_tiers.png", summary, timeline)
            files += TIER_PLOT_FILES
        if summary.get("fleet") is not None:
            plot_replicas(out_dir / "replicas.png", summary, requests, timeline)
            files += FLEET_PLOT_FILES
    return files
