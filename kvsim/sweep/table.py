"""The sweep's table: rows (one per point and repeat) as a DataFrame with stable columns, written to
sweep.parquet with sweep.json; the rows of an earlier run of the same folder, for resuming."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim.output_folder import OutputFolder, folder_for
from kvsim.sweep.grid import Sweep

ID_COLUMNS = ("point", "repeat", "seed", "scenario_hash")


def frame(sweep: Sweep, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows in (point, repeat) order; columns: the identity, `point.<key>` per varied key, then every
    summary figure sorted by name. A column whose values mix kinds (numbers and text) is text."""
    rows = sorted(rows, key=lambda r: (r["point"], r["repeat"]))
    point_cols = [f"point.{k}" for k in sweep.keys]
    figures = sorted({k for r in rows for k in r} - set(ID_COLUMNS) - set(point_cols))
    cols = [*ID_COLUMNS, *point_cols, *figures]
    data = {c: [r.get(c) for r in rows] for c in cols}
    for c, values in data.items():
        kinds = {_kind(v) for v in values if v is not None}
        if len(kinds) > 1 and kinds != {"int", "float"}:
            data[c] = [None if v is None else json.dumps(v) if not isinstance(v, str) else v for v in values]
    return pd.DataFrame(data, columns=cols)


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return "str"


def previous_rows(out: Path, sweep: Sweep) -> dict[str, dict[str, Any]]:
    """scenario_hash -> row of an earlier sweep written to `out` (empty when there is none), for the hashes
    this sweep still has; point and repeat renumbered to this sweep's."""
    path = Path(out) / "sweep.parquet"
    if not path.is_file():
        return {}
    try:
        df = pd.read_parquet(path)
    except Exception:  # (a folder kvsim wrote, but unreadable now: start afresh)
        return {}
    if "scenario_hash" not in df.columns:
        return {}
    by_hash = {t.scenario_hash: t for t in sweep.tasks}
    rows: dict[str, dict[str, Any]] = {}
    for rec in df.to_dict("records"):
        task = by_hash.get(rec.get("scenario_hash"))
        if task is None:
            continue
        rec = {k: (None if isinstance(v, float) and v != v else v) for k, v in rec.items()}  # (NaN: None)
        rec.update(point=task.point, repeat=task.repeat, seed=task.seed)
        rows[task.scenario_hash] = rec
    return rows


def write_sweep(out: str | Path | OutputFolder, sweep: Sweep, rows: list[dict[str, Any]]) -> list[str]:
    """sweep.parquet and sweep.json (the sweep file, how many runs it has and how many are done) into the
    output folder, written whole."""
    from kvsim.metrics.report import write_parquet

    df = frame(sweep, rows)
    doc = {"sweep_file": sweep.source, "scenario": sweep.scenario, "keys": sweep.keys,
           "runs": len(sweep.tasks), "done": len(rows), "complete": len(rows) == len(sweep.tasks),
           "columns": list(df.columns)}
    with folder_for(out, "sweep") as tmp:
        write_parquet(tmp / "sweep.parquet", df)
        (tmp / "sweep.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (tmp / "report.html").write_text(render_html(sweep, df, doc), encoding="utf-8")
    return ["sweep.parquet", "sweep.json", "report.html"]


HTML_FIGURES: tuple[str, ...] = (
    "throughput.offered_requests_per_s", "throughput.requests_per_s", "throughput.output_tokens_per_s",
    "latency.ttft_s.p50", "latency.ttft_s.p99", "latency.tpot_s.p50", "concurrency.mean",
    "kv.capacity_tokens", "goodput.requests_per_s", "cost.usd_per_million_output_tokens")
"""The figures report.html shows per sweep row (sweep.parquet has every one)."""
HTML_ROWS = 500


def render_html(sweep: Sweep, df, doc: dict[str, Any]) -> str:
    """report.html of a sweep: each run's point keys and headline figures (the first HTML_ROWS rows)."""
    from kvsim.metrics import html
    from kvsim.sweep.columns import format_value

    points = [c for c in df.columns if c.startswith("point.")]
    shown = [c for c in HTML_FIGURES if c in df.columns]
    rows = []
    for rec in df.head(HTML_ROWS).to_dict("records"):
        rows.append([*(rec[c] for c in points), *(format_value(rec[c], "num") for c in shown)])
    header = [*(c.removeprefix("point.") for c in points), *shown]
    more = f" (the first {HTML_ROWS} of {len(df)} rows; sweep.parquet has all)" if len(df) > HTML_ROWS else ""
    lead = f"{doc['done']} of {doc['runs']} runs done; scenario {doc['scenario']}"
    return html.page(f"kvsim sweep: {doc['sweep_file']}", lead,
                     [html.heading(f"Runs{more}"), html.table(header, rows)])
