"""One `kvsim hitrate` over kvsim/sweep/hitrate_report.py: the analysis its options ask for (`compute`), the
files it writes (`write_files`), and what it prints (`tables`, `footer`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from kvsim.errors import printable
from kvsim.metrics.hitrate import HitCurveData
from kvsim.sweep import hitrate_report as hr


@dataclass(slots=True)
class TierResult:
    """--tiers / --sweep-tier: the chain, the tier swept, the per-tier rows and the sweep's rows."""

    placement: str
    chain: list[hr.Tier]
    name: str
    rows: list[dict[str, Any]]
    sweep: list[dict[str, Any]]


@dataclass(slots=True)
class HitrateRun:
    """A stream's hit-rate curve at the chosen capacities, and the tier tables when asked for."""

    stream: hr.Stream
    data: HitCurveData
    rows: list[dict[str, Any]]
    tier: TierResult | None

    @property
    def files(self) -> list[str]:
        return ["hitrate.csv", "hitrate.png"] + (["tiers.csv", "tiers_sweep.csv", "tiers.png"]
                                                 if self.tier else [])


def compute(source: Path, overrides: list[str], requests: int | None, block_size: int | None,
            model: str | None, kv_dtype: str, sample_rate: float, capacities: str | None, unit: str,
            tiers: str | None, placement: str | None, sweep_tier: str | None) -> HitrateRun:
    """Load the stream, its stack distances, the curve; the tier tables with --tiers or --sweep-tier."""
    stream = hr.load_stream(source, overrides, requests, block_size, model, kv_dtype)
    data = hr.analyse(stream, sample_rate)
    rows = hr.curve_rows(data, hr.parse_capacities(capacities, unit, stream, data), stream)
    if tiers is None and sweep_tier is None:
        return HitrateRun(stream, data, rows, None)
    place = hr.parse_placement(placement)
    chain = hr.parse_tiers(tiers, unit, stream, place)
    name, points = hr.parse_sweep(sweep_tier, chain, unit, stream, place, data)
    tier = TierResult(place, chain, name, hr.tier_rows(data, chain, place, stream),
                      hr.sweep_rows(data, chain, name, points, place, stream))
    return HitrateRun(stream, data, rows, tier)


def write_files(folder: Path, run: HitrateRun) -> None:
    """hitrate.csv and hitrate.png; with tiers, tiers.csv, tiers_sweep.csv and tiers.png."""
    hr.write_csv(folder / "hitrate.csv", run.rows)
    hr.plot_curve(folder / "hitrate.png", run.rows, run.stream, run.data)
    t = run.tier
    if t is not None:
        hr.write_csv(folder / "tiers.csv", t.rows, hr.TIER_COLUMNS)
        hr.write_csv(folder / "tiers_sweep.csv", t.sweep, hr.sweep_columns(t.chain, t.name))
        hr.plot_tiers(folder / "tiers.png", t.sweep, t.chain, t.name, t.placement, run.stream, run.data)


def _pct(rate: float | None) -> str:
    return f"{100 * (rate or 0):.1f}%"


def tables(run: HitrateRun) -> list[Table]:
    """The curve's table (the scenario's pool marked *), or with tiers each tier's table and the sweep's."""
    stream = run.stream
    if run.tier is None:
        table = Table(title=f"LRU prefix hit rate: {printable(stream.label)} "
                      f"(block size {stream.block_size})")
        for col in ("capacity (blocks)", "tokens", "GiB", "hit rate (blocks)", "hit rate (tokens)"):
            table.add_column(col, justify="right")
        for r in run.rows:
            mark = " *" if r["capacity_blocks"] == stream.pool_blocks else ""
            table.add_row(f"{r['capacity_blocks']:,}{mark}", f"{r['capacity_tokens']:,}",
                          "-" if r["capacity_gib"] is None else f"{r['capacity_gib']:.3g}",
                          *(_pct(r[k]) for k in ("hit_rate_blocks", "hit_rate_tokens")))
        return [table]
    t = run.tier
    gib = "-" if stream.bytes_per_block is None else None

    def gib_cell(v) -> str:
        return gib or (f"{v:,.0f}" if v >= 1000 else f"{v:.4g}")

    table = Table(title=f"{t.placement.capitalize()} KV tiers: {printable(stream.label)} "
                  f"(block size {stream.block_size})")
    for col in ("tier", "capacity (blocks)", "GiB", "hit rate (blocks)", "hit rate (tokens)",
                "cumul. (blocks)", "cumul. (tokens)"):
        table.add_column(col, justify="right")
    for r in t.rows:
        table.add_row(r["tier"], f"{r['capacity_blocks']:,}", gib_cell(r["capacity_gib"]),
                      *(_pct(r[k]) for k in hr.TIER_COLUMNS[6:]))
    names = [x.name for x in hr.with_tier(t.chain, t.name, 0)]
    sweep = Table(title=f"Token hit rate against the {t.name} tier's capacity (others as --tiers)")
    for col in (f"{t.name} (blocks)", "GiB", *names, "total"):
        sweep.add_column(col, justify="right")
    for r in t.sweep:
        sweep.add_row(f"{r['capacity_blocks']:,}", gib_cell(r["capacity_gib"]),
                      *(_pct(r[f"{n}_hit_rate_tokens"]) for n in names), _pct(r["total_hit_rate_tokens"]))
    return [table, sweep]


def footer(run: HitrateRun, out: Path) -> str:
    """The closing line: requests, tokens, distinct blocks, the infinite-cache hit rate, the files."""
    data = run.data
    inf = data.hit_rate_tokens(hr.MAX_CAPACITY_BLOCKS)
    pool = "; * = one replica's KV pool" if run.stream.pool_blocks and run.tier is None else ""
    return (f"{len(run.stream.requests):,} requests, {data.prompt_tokens:,} prompt tokens, "
            f"{data.distinct_blocks:,} distinct blocks; infinite-cache hit rate "
            f"{_pct(inf)}{pool}; written " + ", ".join(f"{printable(out)}/{f}" for f in run.files))
