"""Write a run's output folder: summary.json, requests.parquet, timeline.parquet, the plots, report.md and
run.json (kvsim/output_folder.py adds its manifest). Everything but run.json and the manifest, which lists
run.json's hash, is byte-identical across reruns of the same scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvsim.metrics.run_tables import RunTables
from kvsim.metrics.summary import summary_table_rows
from kvsim.output_folder import OutputFolder, folder_for
from kvsim.workload.config import rate_unit

if TYPE_CHECKING:
    import pandas as pd

PLOT_TITLES: dict[str, str] = {
    "kv_usage.png": "KV cache usage",
    "latency_over_time.png": "TTFT and queueing over time",
    "kv_tiers.png": "KV held by tier",
    "concurrency.png": "Concurrency",
    "latency_cdf.png": "Latency CDFs",
    "replicas.png": "Replicas: routed requests, hit rate, busy fraction",
}


def json_text(data: Any) -> str:
    """The one JSON layout kvsim writes: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(data, sort_keys=True, indent=2, allow_nan=False) + "\n"


def write_parquet(path: Path, df: pd.DataFrame) -> None:
    """Write df without its pandas index or pandas metadata, so the bytes depend only on the data."""
    # pyarrow.parquet imported here, where it is used: importing this module (json_text, render_report)
    # stays cheap
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    table = table.replace_schema_metadata(None)
    pq.write_table(table, path, compression="snappy")


def write_outputs(out: str | Path | OutputFolder, summary: dict[str, Any],
                  requests_df: pd.DataFrame | RunTables, timeline_df: pd.DataFrame | None,
                  run_info: dict[str, Any], plots: bool = True, extra: dict[str, str] | None = None) -> Path:
    """Write all outputs into the output folder `out` (see kvsim/output_folder.py: written whole, then
    swapped into place; an existing folder is replaced only if kvsim wrote it). Returns the folder.
    requests_df: the requests frame (with the timeline frame), or a run's RunTables (timeline_df None):
    the Parquet files are then written a row group at a time from its compact columns, and the frames
    are built only to draw the plots. Without `plots` no PNG is drawn (nor matplotlib imported) and
    report.md links none; `extra`: more files (name -> text) written with the rest, e.g. repeats.json."""
    folder = folder_for(out, "run")
    with folder as tmp:
        (tmp / "summary.json").write_text(json_text(summary), encoding="utf-8")
        if isinstance(requests_df, RunTables):
            from kvsim.metrics.parquet_out import write_tables  # (pyarrow with it: loaded when writing)

            write_tables(tmp, requests_df)
        else:
            write_parquet(tmp / "requests.parquet", requests_df)
            write_parquet(tmp / "timeline.parquet", timeline_df)
        plot_files: list[str] = []
        if plots:
            # imported here, where they are drawn: matplotlib's import (the largest of `kvsim run`'s
            # start-up) stays out of `import kvsim.metrics.report`
            from kvsim.metrics import plots as drawing

            if isinstance(requests_df, RunTables):
                requests_df, timeline_df = requests_df.requests_frame(), requests_df.timeline_frame()
            plot_files = drawing.write_plots(tmp, summary, requests_df, timeline_df)
        (tmp / "report.md").write_text(render_report(summary, plot_files), encoding="utf-8")
        (tmp / "report.html").write_text(render_html(summary, tmp, plot_files), encoding="utf-8")
        run_text = json.dumps(run_info, sort_keys=True, indent=2, default=str) + "\n"
        (tmp / "run.json").write_text(run_text, encoding="utf-8")
        for name, text in (extra or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
    return folder.path


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _name(value: Any) -> str:
    """A model or hardware entry as text: its catalog name, or the `name` of an inline spec."""
    if value is None:
        return "?"
    if isinstance(value, dict):
        return str(value.get("name", "inline spec"))
    return str(value)


def headline(summary: dict[str, Any]) -> str:
    """One line saying what was simulated: model, hardware, parallelism, workload, seed."""
    sc = summary.get("scenario") or {}
    model = _name(summary.get("model") or _get(sc, "model"))
    hardware = _name(summary.get("hardware") or _get(sc, "hardware"))
    pools = (summary.get("fleet") or {}).get("pools") if sc.get("cluster") else None
    if pools:  # a cluster: its pools, e.g. 2 x prefill h100-sxm TP=1 + 2 x decode h100-sxm TP=1
        parts = [f"{model} on " + " + ".join(
            f"{p.get('replicas')} x {p.get('role')} {p.get('hardware')} TP={p.get('tensor_parallel_size')}"
            for p in pools)]
    else:
        parts = [f"{model} on {hardware}"]
        tp = _get(sc, "parallelism", "tensor_parallel_size")
        parts.append(f"TP={tp if tp is not None else '?'} x {summary.get('replicas', '?')} replica(s)")
    kind, rate = _get(sc, "workload", "kind"), _get(sc, "workload", "arrival", "rate")
    if _get(sc, "workload", "arrival", "process") == "closed_loop" or kind == "trace":
        rate = None  # (a closed loop's users and a trace's timestamps set the rate)
    bench = _get(sc, "workload", "bench_serve") if kind == "bench_serve" else None
    if bench:  # the client's own rate and concurrency
        parts.append(f"workload bench_serve at request rate {bench.get('request_rate')}, max concurrency "
                     f"{bench.get('max_concurrency') or 'none'}")
    elif kind is not None:
        parts.append(f"workload {kind}" + (f" at {rate:g} {rate_unit(kind)}" if rate is not None else ""))
    seed = _get(sc, "simulation", "seed")
    if seed is not None:
        parts.append(f"seed {seed}")
    cost_model = summary.get("cost_model")
    if isinstance(cost_model, dict):
        cost_model = cost_model.get("model")
    if cost_model is not None:
        parts.append(f"cost model {cost_model}")
    if summary.get("kvsim_version") is not None:
        parts.append(f"kvsim {summary['kvsim_version']}")
    return " · ".join(parts)


def render_html(summary: dict[str, Any], folder: Path, plot_files: list[str]) -> str:
    """report.html: report.md's headline, table and plots (embedded) on one page, and the scenario."""
    import yaml

    from kvsim.metrics import html

    title = f"kvsim run: {_get(summary, 'scenario', 'name') or 'run'}"
    blocks = [html.heading("Key figures"), html.table(["metric", "value"], summary_table_rows(summary))]
    if plot_files:
        blocks.append(html.heading("Plots"))
        blocks += [html.image(folder / name, PLOT_TITLES.get(name, name)) for name in plot_files]
    blocks += [html.heading("Scenario (resolved)"),
               html.preformatted(yaml.safe_dump(summary.get("scenario") or {}, sort_keys=False)),
               html.heading("Files"), html.bullets(FILES)]
    return html.page(title, headline(summary), blocks)


FILES: tuple[str, ...] = (
    "summary.json: every figure above and more (definitions in kvsim's docs/metrics.md)",
    "requests.parquet: one row per request",
    "timeline.parquet: one row per recorded engine iteration",
    "report.md, report.html: this report (Markdown; one self-contained page)",
    "run.json: wall-clock figures of this run (vary between reruns)",
)


def render_report(summary: dict[str, Any], plot_files: list[str]) -> str:
    """report.md: headline, key figures table, the plots, and what each file holds."""
    title = _get(summary, "scenario", "name") or "run"
    lines = [f"# kvsim report: {title}", "", headline(summary), "", "| metric | value |", "|---|---|"]
    lines += [f"| {label} | {value} |" for label, value in summary_table_rows(summary)]
    lines += ["", "## Plots", ""]
    for name in plot_files:
        lines += [f"![{PLOT_TITLES.get(name, name)}]({name})", ""]
    if not plot_files:
        lines += ["None drawn (`kvsim run --no-plots`).", ""]
    lines += ["## Files", "", *(f"- {f}" for f in FILES), ""]
    return "\n".join(lines)
