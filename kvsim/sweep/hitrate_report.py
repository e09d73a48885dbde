"""`kvsim hitrate`: load a scenario's or a trace's request stream, compute the LRU hit-rate curve
(kvsim/metrics/hitrate.py) at chosen capacities, and write it as CSV and PNG."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kvsim.errors import KvsimError, excerpt, printable
from kvsim.metrics.hitrate import (
    PLACEMENTS,
    HitCurveData,
    request_order,
    stack_distances,
    tier_bounds,
    tier_hits,
)
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


def check_unit(unit: str, stream: Stream) -> None:
    if unit not in UNITS:
        raise KvsimError(f"--unit: expected one of {', '.join(UNITS)}, got '{unit}'")
    if unit == "gib" and not stream.bytes_per_block:
        raise KvsimError("--unit gib: KV bytes per block unknown; pass a scenario or --model")


def to_blocks(item: str, unit: str, stream: Stream, where: str, zero: bool = False) -> int:
    """One capacity in `unit` as whole blocks (rounded down); `where` starts the error messages (the flag,
    and the tier). 0 is accepted only when `zero`; anything else below one block is refused."""
    try:
        value = float(item)
    except ValueError:
        raise KvsimError(f"{where}: bad number {excerpt(item.strip())}") from None
    if not (0 <= value if zero else 0 < value) or value == float("inf"):
        raise KvsimError(f"{where}: capacity must be a finite number {'>=' if zero else '>'} 0, got "
                         f"{excerpt(item.strip())}")
    if value == 0:
        return 0
    blocks = {"blocks": value, "tokens": value / stream.block_size}.get(unit)
    if blocks is None:
        blocks = value * GIB / stream.bytes_per_block
    if blocks < 1:
        size = "" if unit == "blocks" else f" (one block is {in_unit(1, unit, stream)})"
        raise KvsimError(f"{where}: {excerpt(item.strip())} {unit} is less than one block{size}")
    if blocks > MAX_CAPACITY_BLOCKS:
        raise KvsimError(f"{where}: {excerpt(item.strip())} {unit} is more than 2^62 blocks")
    return int(blocks)


def in_unit(blocks: int, unit: str, stream: Stream) -> str:
    """blocks shown in `unit`, for messages."""
    if unit == "tokens":
        return f"{blocks * stream.block_size:,} tokens"
    if unit == "gib" and stream.bytes_per_block:
        return f"{blocks * stream.bytes_per_block / GIB:.4g} GiB"
    return f"{blocks:,} blocks"


def parse_capacities(text: str | None, unit: str, stream: Stream, data: HitCurveData) -> list[int]:
    """Capacities in blocks, ascending: the listed values in `unit`, or by default 16 log-spaced points up
    to the distinct blocks touched, plus the scenario's pool."""
    if unit not in UNITS:
        raise KvsimError(f"--unit: expected one of {', '.join(UNITS)}, got '{unit}'")
    if text is None:
        top = max(data.distinct_blocks, 2)
        caps = set(np.unique(np.geomspace(1, top, 16).round().astype(np.int64)).tolist())
        if stream.pool_blocks:
            caps.add(stream.pool_blocks)
        return sorted(caps)
    check_unit(unit, stream)
    return sorted({to_blocks(item, unit, stream, "--capacities") for item in text.split(",")})


# ---- tiers ------------------------------------------------------------------------------------------------

TIER_NAMES = ("gpu", "cpu", "ssd", "remote")   # top (HBM) to bottom: CPU DRAM, local SSD, remote store
SWEEP_POINTS = 16


@dataclass(slots=True)
class Tier:
    name: str
    blocks: int


def _tier_name(name: str, where: str) -> str:
    key = name.strip().lower()
    if key not in TIER_NAMES:
        raise KvsimError(f"{where}: unknown tier {excerpt(name.strip())} (tiers, top to bottom: "
                         f"{', '.join(TIER_NAMES)})")
    return key


def parse_placement(placement: str | None) -> str:
    if placement is None:
        return "exclusive"
    if placement not in PLACEMENTS:
        raise KvsimError(f"--placement: expected {' or '.join(PLACEMENTS)}, got {excerpt(placement)}")
    return placement


def parse_tiers(text: str | None, unit: str, stream: Stream, placement: str) -> list[Tier]:
    """`--tiers NAME=CAPACITY,...` top to bottom, capacities in `unit` (0 for an empty lower tier). gpu
    comes first and defaults to the scenario's KV pool (also `gpu=pool`); a trace has no pool, so there
    it must be given. Lower tiers: any of cpu, ssd, remote, in that order."""
    check_unit(unit, stream)
    given: dict[str, int] = {}
    for item in (text.split(",") if text is not None else []):
        name, sep, value = item.partition("=")
        if not sep:
            raise KvsimError(f"--tiers: expected NAME=CAPACITY (e.g. gpu=pool,cpu=256), got "
                             f"{excerpt(item.strip())}")
        key = _tier_name(name, "--tiers")
        if key in given:
            raise KvsimError(f"--tiers: tier '{key}' given twice")
        last = next(reversed(given), None)
        if last is not None and TIER_NAMES.index(key) < TIER_NAMES.index(last):
            raise KvsimError(f"--tiers: '{key}' after '{last}': list tiers top to bottom "
                             f"({', '.join(TIER_NAMES)})")
        if key == "gpu" and value.strip().lower() == "pool":
            given[key] = _pool(stream, "--tiers")
        else:
            given[key] = to_blocks(value, unit, stream, f"--tiers: {key}", zero=key != "gpu")
    if "gpu" not in given:
        given = {"gpu": _pool(stream, "--tiers"), **given}
    tiers = [Tier(k, v) for k, v in given.items()]
    check_chain(tiers, placement, unit, stream, "--tiers")
    return tiers


def _pool(stream: Stream, where: str) -> int:
    if not stream.pool_blocks:
        raise KvsimError(f"{where}: no KV pool to default the gpu tier to (a trace, not a scenario): give "
                         "gpu=CAPACITY")
    return stream.pool_blocks


def check_chain(tiers: list[Tier], placement: str, unit: str, stream: Stream, where: str) -> None:
    """An inclusive chain must grow down: every non-empty tier at least as large as each tier above."""
    if placement != "inclusive":
        return
    above: Tier | None = None
    for t in tiers:
        if t.blocks == 0:
            continue   # an empty tier holds nothing: absent from the chain
        if above is not None and t.blocks < above.blocks:
            raise KvsimError(f"{where}: with --placement inclusive each tier must be at least as large as "
                             f"the tiers above it, but {t.name} is {in_unit(t.blocks, unit, stream)} and "
                             f"{above.name} {in_unit(above.blocks, unit, stream)}")
        above = t if above is None or t.blocks >= above.blocks else above


def with_tier(tiers: list[Tier], name: str, blocks: int) -> list[Tier]:
    """The chain with tier `name` at `blocks` (inserted in its place if absent)."""
    out = [Tier(t.name, blocks if t.name == name else t.blocks) for t in tiers]
    if all(t.name != name for t in tiers):
        out.append(Tier(name, blocks))
        out.sort(key=lambda t: TIER_NAMES.index(t.name))
    return out


def parse_sweep(text: str | None, tiers: list[Tier], unit: str, stream: Stream, placement: str,
                data: HitCurveData) -> tuple[str, list[int]]:
    """(the swept tier, its capacities in blocks, ascending). `--sweep-tier NAME=CAP,CAP,...` in `unit`;
    by default the first tier below gpu (cpu if --tiers has none): 0, and 16 log-spaced points from the
    gpu's capacity to the working set (distinct blocks touched; at least twice the gpu's), and its
    --tiers capacity. An inclusive chain's default points stop at the next non-empty tier below."""
    if text is None:
        name = tiers[1].name if len(tiers) > 1 else "cpu"
        gpu = tiers[0].blocks
        top = max(data.distinct_blocks, 2 * gpu)
        points = {0, *np.unique(np.geomspace(gpu, top, SWEEP_POINTS).round().astype(np.int64)).tolist()}
        points |= {t.blocks for t in tiers if t.name == name}
        if placement == "inclusive":
            rank = TIER_NAMES.index(name)
            below = [t.blocks for t in tiers if TIER_NAMES.index(t.name) > rank and t.blocks]
            if below:
                points = {p for p in points if p <= below[0]} | {below[0]}
        return name, sorted(int(p) for p in points)
    name, sep, values = text.partition("=")
    if not sep:
        raise KvsimError(f"--sweep-tier: expected NAME=CAPACITY,CAPACITY,... (e.g. cpu=0,64,256), got "
                         f"{excerpt(text.strip())}")
    key = _tier_name(name, "--sweep-tier")
    points = sorted({to_blocks(v, unit, stream, f"--sweep-tier: {key}", zero=key != "gpu")
                     for v in values.split(",")})
    for p in points:
        check_chain(with_tier(tiers, key, p), placement, unit, stream, "--sweep-tier")
    return key, points


def _rates(hits: float, data: HitCurveData) -> tuple[float | None, float | None]:
    return (hits / data.prompt_blocks if data.prompt_blocks else None,
            hits * data.block_size / data.prompt_tokens if data.prompt_tokens else None)


def _gib(blocks: int, stream: Stream) -> float | None:
    return blocks * stream.bytes_per_block / GIB if stream.bytes_per_block else None


TIER_COLUMNS = ("tier", "capacity_blocks", "capacity_tokens", "capacity_gib", "distance_from", "distance_to",
                "hit_rate_blocks", "hit_rate_tokens", "cumulative_hit_rate_blocks",
                "cumulative_hit_rate_tokens")


def tier_rows(data: HitCurveData, tiers: list[Tier], placement: str, stream: Stream) -> list[dict[str, Any]]:
    """One row per tier (the stack distances (from, to] it serves, its hit rates and those of it and the
    tiers above), then `total`: the capacities summed, distances (0, the LRU capacity the chain equals]."""
    rows = []
    caps = [t.blocks for t in tiers]
    bounds = tier_bounds(caps, placement)
    hits = tier_hits(data, caps, placement)
    cum = 0.0
    for t, (lo, hi), h in zip(tiers, bounds, hits, strict=True):
        cum += h
        rows.append({"tier": t.name, "capacity_blocks": t.blocks,
                     "capacity_tokens": t.blocks * stream.block_size, "capacity_gib": _gib(t.blocks, stream),
                     "distance_from": lo, "distance_to": hi,
                     **dict(zip(TIER_COLUMNS[6:], (*_rates(h, data), *_rates(cum, data)), strict=True))})
    total = sum(caps)
    rows.append({"tier": "total", "capacity_blocks": total, "capacity_tokens": total * stream.block_size,
                 "capacity_gib": _gib(total, stream), "distance_from": 0, "distance_to": bounds[-1][1],
                 **dict(zip(TIER_COLUMNS[6:], (*_rates(cum, data), *_rates(cum, data)), strict=True))})
    return rows


def sweep_columns(tiers: list[Tier], name: str) -> tuple[str, ...]:
    names = [t.name for t in with_tier(tiers, name, 0)]
    return ("tier", "capacity_blocks", "capacity_tokens", "capacity_gib",
            *[f"{n}_hit_rate_{u}" for n in names for u in ("blocks", "tokens")],
            "total_hit_rate_blocks", "total_hit_rate_tokens")


def sweep_rows(data: HitCurveData, tiers: list[Tier], name: str, points: list[int], placement: str,
               stream: Stream) -> list[dict[str, Any]]:
    """For each capacity of tier `name` (the other tiers as given): its capacity, every tier's hit rates
    and the total."""
    rows = []
    for p in points:
        chain_ = with_tier(tiers, name, p)
        hits = tier_hits(data, [t.blocks for t in chain_], placement)
        row: dict[str, Any] = {"tier": name, "capacity_blocks": p, "capacity_tokens": p * stream.block_size,
                               "capacity_gib": _gib(p, stream)}
        for t, h in zip(chain_, hits, strict=True):
            row[f"{t.name}_hit_rate_blocks"], row[f"{t.name}_hit_rate_tokens"] = _rates(h, data)
        row["total_hit_rate_blocks"], row["total_hit_rate_tokens"] = _rates(sum(hits), data)
        rows.append(row)
    return rows


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


def write_csv(path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...] = CSV_COLUMNS) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        for row in rows:
            w.writerow(["" if row[k] is None else (f"{row[k]:.6g}" if isinstance(row[k], float) else row[k])
                        for k in columns])


def plot_curve(path: Path, rows: list[dict[str, Any]], stream: Stream, data: HitCurveData) -> None:
    """Token hit rate against capacity (log x), the scenario's pool marked."""
    # matplotlib imported where a plot is drawn (see kvsim/metrics/plots.py): reading a stream needs none
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

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


def plot_tiers(path: Path, rows: list[dict[str, Any]], tiers: list[Tier], name: str, placement: str,
               stream: Stream, data: HitCurveData) -> None:
    """Token hit rate against the swept tier's capacity, stacked by the tier serving it; the total on top;
    the swept tier's --tiers capacity marked. x: log, linear near 0 when 0 is swept."""
    # matplotlib imported where a plot is drawn (see kvsim/metrics/plots.py): reading a stream needs none
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.13, top=0.88)
    gib = stream.bytes_per_block is not None
    x = [float(r["capacity_gib"] if gib else r["capacity_tokens"]) for r in rows]
    names = [t.name for t in with_tier(tiers, name, 0)]
    layers = [[r[f"{n}_hit_rate_tokens"] or 0.0 for r in rows] for n in names]
    ax.stackplot(x, layers, labels=[f"served by {n}" for n in names], alpha=0.6)
    ax.plot(x, [r["total_hit_rate_tokens"] or 0.0 for r in rows], color="black", marker="o", markersize=3,
            linewidth=1.2, label="total")
    fixed = [t for t in tiers if t.name == name]
    if fixed:
        fx = fixed[0].blocks * (stream.bytes_per_block / GIB if gib else stream.block_size)
        ax.axvline(fx, color="grey", linestyle="--", linewidth=1, label=f"{name} in --tiers")
    positive = [v for v in x if v > 0]
    if positive and len(positive) < len(x):
        ax.set_xscale("symlog", linthresh=min(positive))
        ax.set_xlim(left=0)
    elif positive:
        ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"{name} tier capacity ({'GiB of KV' if gib else 'tokens'})")
    ax.set_ylabel("prefix hit rate (tokens)")
    others = ", ".join(f"{t.name} {in_unit(t.blocks, 'gib' if gib else 'tokens', stream)}"
                       for t in with_tier(tiers, name, 0) if t.name != name)
    sampled = f", sampled {data.sample_rate:g}" if data.sample_rate < 1 else ""
    ax.set_title(f"{printable(stream.label)}: {placement} tiers, {others}{sampled}", fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.savefig(path, dpi=100, format="png", metadata={"Software": None})
