"""`kvsim compare`: run variants of one scenario (a grid over `--vary KEY=V1,V2,...` axes) on the identical
request stream and put their key figures side by side.

Every variant is the base scenario plus `--set` overrides plus one value per axis; all keep the same
`simulation.seed`, so the workload generator draws the same requests (unless an axis changes the workload
itself). Each variant's generated stream is fingerprinted (SHA-256 of every request field) so the table
can say whether the streams were identical.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kvsim.errors import KvsimError
from kvsim.output_folder import OutputFolder, folder_for
from kvsim.scenario import load_scenario, parse_value, set_items
from kvsim.sweep.columns import Picked, fit, ordered, resolve_metrics, select

TIMELINE_KEEP: tuple[str, ...] = ("replica", "t_s", "hold_s", "running_reqs")


@dataclass(slots=True, frozen=True)
class Variant:
    """One point of the grid: the varied keys' values and the overrides that produce it."""

    values: tuple[tuple[str, Any], ...]

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={_text(v)}" for k, v in self.values)

    @property
    def short_label(self) -> str:
        """The values alone, compact (value_text), for a table whose header names the keys."""
        return ", ".join(value_text(v) for _, v in self.values)

    @property
    def overrides(self) -> list[str]:
        """--set items that give each key its value as parsed (a quoted '123' stays a string)."""
        return set_items(self.values)


@dataclass(slots=True)
class VariantResult:
    """What one variant produced: its summary, the request-stream fingerprint and the timeline columns the
    comparison plots need."""

    variant: Variant
    summary: dict[str, Any]
    stream: str
    timeline: pd.DataFrame


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


MAX_LABEL = 24
"""A variant label longer than this (in a table) becomes v1, v2, ... with a legend below the table."""


def value_text(v: Any) -> str:
    """A varied value as a table shows it: scalars as written, an empty list as `none`, a mapping as its
    values, a list as its items joined by '+' (`[{medium: cpu, capacity_gb: 64}]` is `cpu 64`)."""
    if isinstance(v, dict):
        return " ".join(value_text(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return "+".join(value_text(x) for x in v) if v else "none"
    return _text(v)


def variant_labels(results: list[VariantResult]) -> tuple[list[str], list[str]]:
    """(the table's label per variant, legend lines): the compact values (Variant.short_label), unless one
    is longer than MAX_LABEL or two are alike: then v1, v2, ... and a legend line each."""
    labels = [r.variant.short_label for r in results]
    if all(len(x) <= MAX_LABEL for x in labels) and len(set(labels)) == len(labels):
        return labels, []
    short = [f"v{i + 1}" for i in range(len(results))]
    return short, [f"{k} = {r.variant.label}" for k, r in zip(short, results, strict=True)]


def split_values(raw: str) -> list[str]:
    """V1,V2,... split at the commas outside brackets and braces, so a value may be a YAML flow list or
    mapping: `[],[{medium: cpu, capacity_gb: 64}]` is two values."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(raw):
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            out.append(raw[start:i])
            start = i + 1
    out.append(raw[start:])
    return out


def parse_vary(items: list[str] | list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
    """`KEY=V1,V2,...` items -> [(key, [values])], values parsed as YAML (as --set does); commas inside
    [...] or {...} belong to the value. An item already (key, [values]) (kvsim.compare) is taken as is."""
    axes: list[tuple[str, list[Any]]] = []
    for item in items:
        if isinstance(item, tuple):
            if any(item[0] == k for k, _ in axes):
                raise KvsimError(f"vary: key {item[0]} is varied twice")
            axes.append((item[0], list(item[1])))
            continue
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise KvsimError(f"--vary {item!r}: expected KEY=V1,V2,..., e.g. kv.layout=paged,contiguous:max")
        values = [parse_value(v.strip(), f"--vary {key}") for v in split_values(raw) if v.strip()]
        if not values:
            raise KvsimError(f"--vary {item!r}: no values after '='")
        if any(key == k for k, _ in axes):
            raise KvsimError(f"--vary {item!r}: key {key} is varied twice")
        axes.append((key, values))
    if not axes:
        raise KvsimError("--vary: give at least one KEY=V1,V2,... to compare")
    return axes


def grid(axes: list[tuple[str, list[Any]]]) -> list[Variant]:
    """Every combination of the axes' values, the first axis varying slowest."""
    keys = [k for k, _ in axes]
    combos = itertools.product(*(v for _, v in axes))
    return [Variant(tuple(zip(keys, combo, strict=True))) for combo in combos]


def stream_fingerprint(requests: list) -> str:
    """SHA-256 (first 16 hex digits) over every field of every generated request, in rid order."""
    h = hashlib.sha256()
    names = [f.name for f in fields(requests[0])] if requests else []
    for r in requests:
        h.update(repr(tuple(getattr(r, n) for n in names)).encode())
    return h.hexdigest()[:16]


def run_variant(scenario: str | None, overrides: list[str], seed: int | None,
                variant: Variant) -> VariantResult:
    """Simulate one variant and summarise it."""
    from kvsim.engine.simulation import Simulation
    from kvsim.metrics.summary import build_summary
    from kvsim.workload.factory import build_requests

    sc = load_scenario(scenario, [*overrides, *variant.overrides], seed)
    stream = build_requests(sc.workload, np.random.default_rng(sc.simulation.seed), sc.simulation.requests,
                            sc.simulation.duration_s, base_dir=sc.base_dir)
    result = Simulation(sc).run()
    summary = build_summary(result.tables, None, result.meta)
    tl = pd.DataFrame({k: result.tables.timeline_column(k) for k in TIMELINE_KEEP})
    return VariantResult(variant, summary, stream_fingerprint(stream), tl)


def check_variants(scenario: str | None, overrides: list[str], seed: int | None,
                   variants: list[Variant]) -> None:
    """What `kvsim validate` checks, for every variant, before any runs: the scenario, the model, hardware
    and pool (by building each Simulation), and each distinct workload's request stream."""
    from kvsim.engine.simulation import Simulation

    streams: set[str] = set()
    for v in variants:
        try:
            sim = Simulation(load_scenario(scenario, [*overrides, *v.overrides], seed))
            key = json.dumps(sim.sc.workload.model_dump(mode="json"), sort_keys=True) + str(sim.sc.simulation)
            if key not in streams:
                streams.add(key)
                sim.build_requests()
        except KvsimError as exc:
            raise KvsimError(f"variant {v.label}: {exc}") from None


def run_compare(scenario: str | Path | None, vary: list[str] | list[tuple[str, list[Any]]],
                overrides: list[str] | None = None,
                seed: int | None = None, jobs: int = 1, on_done=None) -> list[VariantResult]:
    """Run every variant of the grid (in grid order; `jobs` > 1 runs them in that many processes).
    Every variant's scenario is validated before any runs. on_done(result) is called as each finishes."""
    overrides = list(overrides or [])
    variants = grid(parse_vary(vary))
    path = None if scenario is None else str(scenario)
    check_variants(path, overrides, seed, variants)
    results: list[VariantResult] = []
    if jobs <= 1 or len(variants) == 1:
        for v in variants:
            results.append(run_variant(path, overrides, seed, v))
            if on_done is not None:
                on_done(results[-1])
        return results
    with ProcessPoolExecutor(max_workers=min(jobs, len(variants))) as pool:
        futures = [pool.submit(run_variant, path, overrides, seed, v) for v in variants]
        for f in futures:
            results.append(f.result())
            if on_done is not None:
                on_done(results[-1])
    return results


def columns(results: list[VariantResult]) -> list[Picked]:
    """The columns of this comparison: kvsim.sweep.columns.COLUMNS, then each optional group (e.g. the
    sparsity figures) that some variant's summary has."""
    return select(r.summary for r in results)


def compare_frame(results: list[VariantResult]) -> pd.DataFrame:
    """One row per variant: the varied keys, the stream fingerprint and every column's figure."""
    cols = columns(results)
    rows = []
    for r in results:
        row: dict[str, Any] = {"variant": r.variant.label}
        row.update({k: _text(v) for k, v in r.variant.values})
        row["stream"] = r.stream
        row.update({c.key: c.value(r.summary) for c in cols})
        rows.append(row)
    return pd.DataFrame(rows)


def table_rows(results: list[VariantResult], metrics: list[str] | None = None,
               width: int | None = None) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the console table: the default columns (or `metrics`, kvsim.sweep.columns
    resolve_metrics), narrowed to `width` characters when given (see table_fit)."""
    header, rows, _, _ = table_fit(results, metrics, width)
    return header, rows


def table_fit(results: list[VariantResult], metrics: list[str] | None = None,
              width: int | None = None) -> tuple[list[str], list[list[str]], list[str], list[str]]:
    """table_rows, the labels of the columns left out to fit `width` (none with `metrics`), and the legend
    of the variant labels (variant_labels). Without `metrics` the columns that matter to what is varied
    come first (kvsim/sweep/columns.py FIRST), and the rest are left out from the right to fit."""
    varied = [k for k, _ in results[0].variant.values] if results else []
    if metrics:
        try:
            cols = resolve_metrics(metrics, [r.summary for r in results])
        except ValueError as exc:
            raise KvsimError(str(exc)) from None
    else:
        cols = ordered(columns(results), varied)
    keys = ", ".join(varied) or "variant"
    labels, legend = variant_labels(results)
    texts = [[c.text(r.summary) for r in results] for c in cols]
    dropped: list[Picked] = []
    if width is not None and not metrics:
        widths = [max(len(c.label), *(len(t) for t in col)) + 3 for c, col in zip(cols, texts, strict=True)]
        fixed = max(len(keys), *(len(x) for x in labels)) + 3 + 1
        kept, dropped = fit(cols, widths, width, fixed)
        texts = [t for c, t in zip(cols, texts, strict=True) if c in kept]
        cols = kept
    header = [keys, *(c.label for c in cols)]
    rows = [[labels[i], *(col[i] for col in texts)] for i in range(len(results))]
    return header, rows, [c.label for c in dropped], legend


def table_width(header: list[str], rows: list[list[str]]) -> int:
    """Console width that prints the table without truncating a cell: each column's widest text plus
    rich's padding (2) and border (1), plus the closing border."""
    return sum(max(len(c) for c in (h, *(r[i] for r in rows))) + 3 for i, h in enumerate(header)) + 1


def streams_identical(results: list[VariantResult]) -> bool:
    return len({r.stream for r in results}) <= 1


def write_compare(out: str | Path | OutputFolder, results: list[VariantResult], label: str = "") -> list[str]:
    """Write compare.csv, compare.json (the columns, and every variant's figures and full summary) and the
    two plots into the output folder `out` (kvsim/output_folder.py); return the file names. Output bytes
    depend only on the results."""
    from kvsim.sweep.compare_plots import plot_batched_over_time, plot_breakdown_bars

    cols = columns(results)
    doc = {"identical_streams": streams_identical(results),
           "columns": [{"key": c.key, "label": c.label, "format": c.fmt} for c in cols],
           "variants": [{"label": r.variant.label, "values": {k: v for k, v in r.variant.values},
                         "stream": r.stream, "figures": {c.key: c.value(r.summary) for c in cols},
                         "summary": r.summary} for r in results]}
    with folder_for(out, "compare") as tmp:
        compare_frame(results).to_csv(tmp / "compare.csv", index=False, float_format="%.10g")
        (tmp / "compare.json").write_text(json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n",
                                          encoding="utf-8")
        plot_breakdown_bars(tmp / "compare_breakdown.png", results)
        plot_batched_over_time(tmp / "compare_batched.png", results)
        (tmp / "report.html").write_text(render_html(results, tmp, label), encoding="utf-8")
    return ["compare.csv", "compare.json", "compare_breakdown.png", "compare_batched.png", "report.html"]


def render_html(results: list[VariantResult], folder: Path, label: str = "") -> str:
    """report.html of a comparison: every column (the ones that matter to what is varied first), the
    legend of the variant labels, both plots and each variant's overrides."""
    from kvsim.metrics import html

    header, rows, _, legend = table_fit(results)
    same = "identical" if streams_identical(results) else "different (a varied key changes the workload)"
    blocks = [html.heading("Variants"), html.table(header, rows)]
    if legend:
        blocks.append(html.bullets(legend))
    blocks += [html.heading("Plots"), html.image(folder / "compare_breakdown.png", "KV memory breakdown"),
               html.image(folder / "compare_batched.png", "batched requests over time"),
               html.heading("Overrides of each variant"),
               html.bullets(f"{r.variant.short_label}: {' '.join(r.variant.overrides)}" for r in results)]
    return html.page("kvsim compare" + (f": {label}" if label else ""),
                     f"{len(results)} variants; request streams {same}", blocks)
