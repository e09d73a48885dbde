"""`kvsim hitrate`: load a scenario's or a trace's request stream, compute the LRU hit-rate curve
(kvsim/metrics/hitrate.py) at chosen capacities, and write it as CSV and PNG."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kvsim.errors import KvsimError, excerpt, printable
from kvsim.metrics.hitrate import HitCurveData, request_order, stack_distances
from kvsim.workload.request import Request

GIB = 1024**3
UNITS = ("blocks", "tokens", "gib")
MAX_CAPACITY_BLOCKS = 2**62
CSV_COLUMNS = ("capacity_blocks", "capacity_tokens", "capacity_gib", "hit_rate_blocks", "hit_rate_tokens")


@dataclass(slots=True)
class Stream:
    """A request stream to analyse and what is known about its KV sizes."""

    label: str
    requests: list[Request]
    block_size: int
    bytes_per_block: float | None   # None when no model is known
    pool_blocks: int | None         # the scenario's KV pool per replica, if a scenario


def load_stream(source: Path, overrides: list[str], requests: int | None, block_size: int | None,
                model: str | None, kv_dtype: str) -> Stream:
    """A scenario YAML (its workload, block size, model and pool) or a trace file (.jsonl: Mooncake,
    .csv: Azure), requests in estimated arrival order."""
    from kvsim.specs.catalog import get_model
    from kvsim.workload.factory import build_requests

    if source.suffix in (".yaml", ".yml"):
        from kvsim.engine.simulation import Simulation
        from kvsim.scenario import load_scenario

        sc = load_scenario(source, overrides)
        if block_size is not None:
            sc.kv.block_size = block_size
        sim = Simulation(sc)
        reqs = build_requests(sc.workload, np.random.default_rng(sc.simulation.seed),
                              requests or sc.simulation.requests, sc.simulation.duration_s,
                              base_dir=sc.base_dir)
        return Stream(sc.name, request_order(reqs), sc.kv.block_size, sim.bytes_per_block, sim.num_blocks)
    if source.suffix not in (".jsonl", ".csv"):
        raise KvsimError(f"{source}: expected a scenario (.yaml), a Mooncake trace (.jsonl) or an Azure "
                         "trace (.csv)")
    from kvsim.workload.config import TraceConfig, WorkloadConfig

    fmt = "mooncake" if source.suffix == ".jsonl" else "azure"
    cfg = WorkloadConfig(kind="trace", trace=TraceConfig(path=str(source), format=fmt))
    reqs = build_requests(cfg, np.random.default_rng(0), requests, float("inf"))
    bs = block_size or 16
    per_block = get_model(model).kv_bytes_per_token(kv_dtype) * bs if model else None
    return Stream(source.name, request_order(reqs), bs, per_block, None)


def parse_capacities(text: str | None, unit: str, stream: Stream, data: HitCurveData) -> list[int]:
    """Capacities in blocks, ascending: the listed values in `unit`, or by default 16 log-spaced points up
    to the distinct blocks touched, plus the scenario's pool."""
    bs = stream.block_size
    if unit not in UNITS:
        raise KvsimError(f"--unit: expected one of {', '.join(UNITS)}, got '{unit}'")
    if text is None:
        top = max(data.distinct_blocks, 2)
        caps = set(np.unique(np.geomspace(1, top, 16).round().astype(np.int64)).tolist())
        if stream.pool_blocks:
            caps.add(stream.pool_blocks)
        return sorted(caps)
    if unit == "gib" and not stream.bytes_per_block:
        raise KvsimError("--unit gib: KV bytes per block unknown; pass a scenario or --model")
    caps = set()
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise KvsimError(f"--capacities: bad number {excerpt(item.strip())}") from None
        if not 0 < value < float("inf"):
            raise KvsimError(f"--capacities: capacity must be a finite number > 0, got "
                             f"{excerpt(item.strip())}")
        blocks = {"blocks": value, "tokens": value / bs}.get(unit)
        if blocks is None:
            blocks = value * GIB / stream.bytes_per_block
        if not 1 <= blocks <= MAX_CAPACITY_BLOCKS:
            raise KvsimError(f"--capacities: {excerpt(item.strip())} {unit} is "
                             f"{'less than one block' if blocks < 1 else 'more than 2^62 blocks'}")
        caps.add(int(blocks))
    return sorted(caps)


def curve_rows(data: HitCurveData, capacities: list[int], stream: Stream) -> list[dict[str, Any]]:
    rows = []
    for c in capacities:
        gib = c * stream.bytes_per_block / GIB if stream.bytes_per_block else None
        rows.append({"capacity_blocks": c, "capacity_tokens": c * stream.block_size, "capacity_gib": gib,
                     "hit_rate_blocks": data.hit_rate_blocks(c), "hit_rate_tokens": data.hit_rate_tokens(c)})
    return rows


def analyse(stream: Stream, sample_rate: float) -> HitCurveData:
    if not 0 < sample_rate <= 1:
        raise KvsimError(f"--sample-rate: must be in (0, 1], got {sample_rate}")
    return stack_distances(stream.requests, stream.block_size, sample_rate)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for row in rows:
            w.writerow(["" if row[k] is None else (f"{row[k]:.6g}" if isinstance(row[k], float) else row[k])
                        for k in CSV_COLUMNS])


def plot_curve(path: Path, rows: list[dict[str, Any]], stream: Stream, data: HitCurveData) -> None:
    """Token hit rate against capacity (log x), the scenario's pool marked."""
    fig = Figure(figsize=(7.0, 4.0))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.13, top=0.9)
    gib = stream.bytes_per_block is not None
    x = [r["capacity_gib"] if gib else r["capacity_tokens"] for r in rows]
    y = [r["hit_rate_tokens"] or 0.0 for r in rows]
    ax.plot(x, y, marker="o", markersize=3)
    if stream.pool_blocks:
        px = stream.pool_blocks * (stream.bytes_per_block / GIB if gib else stream.block_size)
        ax.axvline(px, color="grey", linestyle="--", linewidth=1, label="KV pool of one replica")
        ax.legend(loc="upper left")
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("LRU cache capacity (GiB of KV)" if gib else "LRU cache capacity (tokens)")
    ax.set_ylabel("prefix hit rate (tokens)")
    sampled = f", sampled {data.sample_rate:g}" if data.sample_rate < 1 else ""
    ax.set_title(f"{printable(stream.label)}: block size {stream.block_size}{sampled}")
    ax.grid(True, alpha=0.3)
    fig.savefig(path, dpi=100, format="png", metadata={"Software": None})
