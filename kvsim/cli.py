"""The `kvsim` command line (typer). Thin: parse, load the scenario, call the library, print."""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kvsim import __version__, interrupts, native
from kvsim.errors import MAX_JOBS, MAX_SWEEP_JOBS, KvsimError, WorkerError, excerpt, printable

APP_SETTINGS = dict(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                    rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]},
                    help="kvsim: KV-cache capacity planning for LLM serving, by discrete-event simulation. "
                         "Start with `kvsim run` (the default scenario) or `kvsim run workloads/chat.yaml`; "
                         "`kvsim COMMAND -h` for a command's options.")
app = typer.Typer(**APP_SETTINGS)
# rich_markup_mode=None: click's plain help, which wraps to the terminal (at most 80 columns) instead of
# truncating option names in rich's boxes


def _show_version(value: bool) -> None:
    if value:
        console.print(f"kvsim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_show_version, is_eager=True,
                                       help="Print the kvsim version and exit.")) -> None:
    """The options before a command."""


def _plain_console(**options) -> Console:
    """A console that prints text literally: values users wrote (names, paths, keys) are echoed, so they
    are never read as rich markup or emoji codes."""
    return Console(markup=False, emoji=False, highlight=False, **options)


console = _plain_console()
err_console = _plain_console(stderr=True)


def _fail(msg: str) -> None:
    _say(f"error: {msg}")
    raise typer.Exit(code=2)


SET_METAVAR = "KEY=VALUE"
SLO_HELP = ("A service-level objective METRIC.PNN=SECONDS, e.g. ttft_s.p99=2 (repeatable; metrics ttft_s, "
            "tpot_s, e2e_s, queue_s; one percentile per metric): requests get meets_slo, the summary slo and "
            "goodput. An objective given here replaces the scenario's on that metric (with a note).")


def slo_overrides(items: list[str]) -> list[str]:
    """--slo METRIC.PNN=SECONDS items as `slo.METRIC={PNN: SECONDS}` overrides (the percentile may hold a
    dot: p99.9); the scenario checks metric, percentile and value. A metric takes one objective, so a
    second --slo on it is an error (it used to replace the first silently); a metric given here replaces
    the scenario's objective on it (the --slo help says so). A malformed item is a one-line error."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        metric, dot, stat = key.strip().partition(".")
        if not eq or not dot or not metric or not stat or not value.strip():
            raise KvsimError(f"--slo {excerpt(item)}: expected METRIC.PNN=SECONDS, e.g. ttft_s.p99=2")
        if metric in out:
            raise KvsimError(f"--slo {excerpt(item)}: {metric} already has an objective ({out[metric]}); "
                             "one percentile per metric")
        out[metric] = f"{stat}={value.strip()}"
    return [f"slo.{metric}={{{objective.replace('=', ': ', 1)}}}" for metric, objective in out.items()]


def slo_notes(base: dict | None, items: list[str]) -> list[str]:
    """A `note:` line per --slo item that replaces an objective of the scenario (`base`, its `slo`) with a
    different one: the flag wins, and says so instead of replacing it silently."""
    notes = []
    for item in items:
        metric = item.partition("=")[0].strip().partition(".")[0]
        old = (base or {}).get(metric)
        if not old:
            continue
        stat, value = item.partition("=")[0].strip().partition(".")[2], item.partition("=")[2].strip()
        try:
            same = {stat: float(value)} == {k: float(v) for k, v in old.items()}
        except (TypeError, ValueError):
            same = False
        if not same:
            was = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in old.items())
            notes.append(f"note: --slo {item} replaces the scenario's {metric} objective ({was})")
    return notes


def _say_slo_notes(scenario: Path | None, set_: list[str], seed: int | None, slo: list[str]) -> None:
    """Print slo_notes for the scenario as --set leaves it (nothing when it does not load: the command's
    own load reports that), on stdout: stderr holds only the error line if the command then fails."""
    if not slo:
        return
    from kvsim.scenario import load_scenario

    try:
        base = load_scenario(scenario, set_, seed).slo
    except KvsimError:
        return
    for line in slo_notes(base, slo):
        console.print(printable(" ".join(line.split())), soft_wrap=True)


def _guard(fn):
    """Run fn, turning KvsimError into a one-line error and a non-zero exit."""
    try:
        return fn()
    except KvsimError as exc:
        _fail(str(exc))


@app.command()
def run(
    scenario: Path | None = typer.Argument(None, help="Scenario YAML; omit for the built-in default."),
    set_: list[str] = typer.Option([], "--set", metavar=SET_METAVAR,
                                   help="Override a key: --set kv.block_size=32 (repeatable)."),
    slo: list[str] = typer.Option([], "--slo", metavar="METRIC.PNN=SECONDS", help=SLO_HELP),
    seed: int | None = typer.Option(None, "--seed", help="Override simulation.seed."),
    out: Path = typer.Option(Path("out"), "--out", help="Output folder: created, or replaced whole if kvsim"
                             " wrote it (never a folder holding other files)."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress",
                                            help="Progress bar (default: on a terminal)."),
    plots: bool = typer.Option(True, "--plots/--no-plots",
                               help="Draw the PNG plots (--no-plots: about a second less per run)."),
    repeats: int = typer.Option(1, "--repeats", min=1, max=1000,
                                help="Also run seeds seed+1 .. seed+K-1 and write repeats.json: each "
                                     "headline figure's mean and 95% interval over the K seeds."),
    jobs: int = typer.Option(1, "--jobs", min=1, max=MAX_JOBS,
                             help="Repeats simulated in parallel processes."),
) -> None:
    """Simulate one scenario and write summary.json, Parquet tables, report.md and plots to OUT."""
    with _start_up():
        from kvsim.scenario import load_scenario

        overrides = _guard(lambda: [*set_, *slo_overrides(slo)])
        sc = _guard(lambda: load_scenario(scenario, overrides, seed))
        _say_slo_notes(scenario, set_, seed, slo)
        folder = _guard(lambda: _output_folder(out, "run", scenario, sc))
        show = sys.stderr.isatty() if progress is None else progress
        result, wall, peak = _guard(lambda: _simulate(sc, show))
    from kvsim.metrics.nothing_completed import nothing_completed
    from kvsim.metrics.report import write_outputs
    from kvsim.metrics.summary import build_summary, summary_table_rows

    summary = build_summary(result.tables, None, result.meta)  # (the frames are never built)
    n_req = result.tables.request_count
    run_info = {
        "wall_s": round(wall, 3),
        "simulated_requests_per_wall_s": round(n_req / wall, 1) if wall > 0 else None,
        "peak_rss_mib": round(peak / 2**20, 1),
        "iterations": result.tables.timeline_count,
        "kvsim_version": __version__,
        "hot_paths": native.state(),
    }
    extra, rep = {}, None
    if repeats > 1:
        from kvsim.sweep.repeats import repeats_section, run_repeats, seeds

        seed_list = _guard(lambda: seeds(sc.simulation.seed, repeats))
        summaries = _guard(lambda: run_repeats(scenario, overrides, seed_list, jobs, first=summary))
        rep = repeats_section(summaries, seed_list)
        extra["repeats.json"] = json.dumps(rep, indent=2, sort_keys=True, allow_nan=False) + "\n"
    _guard(lambda: write_outputs(folder, summary, result.tables, None, run_info, plots, extra))
    none_done = nothing_completed(summary, result.meta)
    if none_done:
        console.print(none_done, markup=False, soft_wrap=True)
    table = Table(title=f"kvsim: {printable(sc.name)}", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary_table_rows(summary):
        table.add_row(key, value)
    console.print(table)
    if rep is not None:
        _print_repeats(rep)
    console.print(f"{n_req} requests in {wall:.2f} s wall ({run_info['simulated_requests_per_wall_s']} "
                  f"simulated requests per wall-second); outputs in {printable(out)}/")
    note = native.notice()  # (last: an error before it stays the only line on stderr; for a person only)
    if note is not None and sys.stderr.isatty():
        err_console.print(note, soft_wrap=True)


def _print_repeats(rep: dict) -> None:
    """The repeats table: each headline figure's mean and 95% interval over the seeds."""
    from kvsim.sweep.columns import format_value

    seeds = rep["seeds"]
    table = Table(title=f"{len(seeds)} seeds ({seeds[0]}..{seeds[-1]}): mean and 95% interval",
                  show_header=True)
    table.add_column("metric", overflow="fold")
    for col in ("mean", "95% interval", "half-width"):
        table.add_column(col, justify="right")
    for key, f in rep["figures"].items():
        fmt = "pct" if key.endswith(("utilization_mean", "hit_rate_tokens")) else "num"
        table.add_row(key, format_value(f["mean"], fmt),
                      f"{format_value(f['low'], fmt)} .. {format_value(f['high'], fmt)}",
                      format_value(f["half_width"], fmt))
    console.print(table)


def _output_folder(out: Path, command: str, scenario: Path | None, sc=None, keep_foreign: bool = False):
    """The checked output folder; it must not hold the scenario or the trace being read. `keep_foreign`:
    a sweep's rewrites keep files that appeared in its folder (OutputFolder)."""
    from kvsim.output_folder import OutputFolder

    trace = sc.workload.trace.path if sc is not None and sc.workload.trace is not None else None
    return OutputFolder(out, command, protect=(scenario, trace), keep_foreign=keep_foreign)


_PROGRAM = False
"""Whether kvsim is the process's program (`main()`), not a library call of a command (tests, notebooks)."""


@contextmanager
def _start_up():
    """The start-up of a command (imports, the scenario's schema and checks, the cost model's tables) with
    the cyclic garbage collector off: it makes hundreds of thousands of objects and next to no garbage,
    and each collection pass walks them all (a fifth of a short run's CPU). `_started()` (before the
    simulation loop), or the end of the block, turns it back on."""
    global _HELD
    was, _HELD = gc.isenabled(), gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        _HELD = False
        if was:
            gc.enable()


_HELD = False
"""Whether `_start_up` turned the collector off (a caller that had it off keeps it off)."""


def _started() -> None:
    """The start-up's objects live as long as the process: once frozen (gc.freeze; only where kvsim is the
    program, `main()`: a process that goes on after the command keeps its garbage collectable) no later
    collection walks them; then the collector runs again as usual."""
    global _HELD
    if _HELD:
        _HELD = False
        if _PROGRAM:
            gc.freeze()
        gc.enable()


def _simulate(sc, show_progress: bool):
    from kvsim.engine.simulation import Simulation

    t0 = time.perf_counter()
    if show_progress:
        from rich.progress import Progress

        with Progress(console=err_console, transient=True) as bar:
            task = bar.add_task("simulating", total=None)

            def tick(done: int, total: int) -> None:
                if done % 200 == 0 or done == total:
                    bar.update(task, completed=done, total=total)

            sim = Simulation(sc, tick)
            _started()
            result = sim.run()
    else:
        sim = Simulation(sc)
        _started()
        result = sim.run()
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return result, wall, peak


@app.command()
def compare(
    scenario: Path = typer.Argument(..., help="Scenario YAML the variants start from."),
    vary: list[str] = typer.Option(..., "--vary", metavar="KEY=V1,V2",
                                   help="e.g. kv.layout=paged,contiguous:max;"
                                   " repeat for a grid."),
    set_: list[str] = typer.Option([], "--set", metavar=SET_METAVAR,
                                   help="Override a key in every variant (repeatable)."),
    slo: list[str] = typer.Option([], "--slo", metavar="METRIC.PNN=SECONDS", help=SLO_HELP),
    seed: int | None = typer.Option(None, "--seed", help="Override simulation.seed (every variant)."),
    out: Path = typer.Option(Path("compare_out"), "--out", help="Folder for compare.csv, .json and plots."),
    jobs: int = typer.Option(1, "--jobs", min=1, max=MAX_JOBS,
                             help="Variants simulated in parallel processes."),
    metrics: str = typer.Option("", "--metrics", help="The table's columns, comma-separated summary keys "
                                "(latency.ttft_s.p99 or ttft_s.p99, goodput, capacity, cost, ...); default: "
                                "the standard columns, narrowed to the terminal."),
) -> None:
    """Run variants of one scenario on the identical request stream; print one table, write CSV and plots."""
    from kvsim.sweep.compare import run_compare, streams_identical, table_fit, table_width, write_compare

    def done(r) -> None:
        err_console.print(f"done: {printable(r.variant.label)}")

    folder = _guard(lambda: _output_folder(out, "compare", scenario))
    overrides = _guard(lambda: [*set_, *slo_overrides(slo)])
    _say_slo_notes(scenario, set_, seed, slo)
    results = _guard(lambda: run_compare(scenario, vary, overrides, seed, jobs, on_done=done))
    picked = [m for m in metrics.split(",") if m.strip()]
    header, rows, dropped, legend = _guard(lambda: table_fit(results, picked,
                                                             None if picked else console.width))
    table = Table(title=f"kvsim compare: {printable(scenario)}", show_header=True)
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(printable(cell) for cell in row))
    # wide enough for every cell: one row per variant, never truncated
    _plain_console(width=max(console.width, table_width(header, rows))).print(table)
    for line in legend:
        console.print(printable(line))
    if dropped:
        named = ", ".join(dropped[:4]) + (f" and {len(dropped) - 4} more" if len(dropped) > 4 else "")
        console.print(f"left out to fit {console.width} columns: {named} (compare.csv has every column; "
                      "--metrics picks them)")
    same = "identical" if streams_identical(results) else "DIFFERENT (a varied key changes the workload)"
    files = _guard(lambda: write_compare(folder, results, str(scenario)))
    console.print(f"request streams: {same}; wrote {', '.join(files)} to {printable(out)}/")


@app.command()
def plan(
    scenario: Path | None = typer.Argument(None, help="Scenario YAML; omit for the built-in default."),
    find: str = typer.Option(..., "--find", help="max_rate (highest workload.arrival.rate within the SLO), "
                             "min_replicas (fewest parallelism.replicas within it) or min_cost (cheapest "
                             "fleet over --hardware x --tp)."),
    qps: float | None = typer.Option(None, "--qps", help="min_replicas / min_cost: the load, in requests per "
                                     "second (set as the workload's own rate: sessions or episodes per "
                                     "second for chat and agentic); default: the scenario's rate."),
    hardware: str = typer.Option("", "--hardware", help="min_cost: hardware profiles to try, NAME,NAME,..."),
    tp: str = typer.Option("", "--tp", help="min_cost: tensor-parallel sizes to try, N,N,..."),
    slo: list[str] = typer.Option([], "--slo", metavar="METRIC.PNN=SECONDS", help=SLO_HELP),
    set_: list[str] = typer.Option([], "--set", metavar=SET_METAVAR,
                                   help="Override a key in every probe (repeatable)."),
    seed: int | None = typer.Option(None, "--seed", help="Override simulation.seed (the first repeat's)."),
    repeats: int = typer.Option(1, "--repeats", min=1, max=100, help="Seeds per run (at most 100): an "
                                "objective holds when the upper end of its 95% interval is within the "
                                "threshold."),
    precision: float = typer.Option(0.05, "--precision", help="max_rate: stop when the failing rate is "
                                    "within this fraction above the answer (at least 0.0001)."),
    max_extension: int = typer.Option(32, "--max-extension", min=1, max=1024, help="A probe's runs are "
                                      "lengthened (simulation.requests doubled) until steady and confirmed, "
                                      "up to this many times the scenario's length."),
    jobs: int = typer.Option(1, "--jobs", min=1, max=MAX_JOBS,
                             help="Repeats simulated in parallel processes."),
    out: Path = typer.Option(Path("plan_out"), "--out", help="Folder for plan.json, plan.png and "
                             "report.html."),
) -> None:
    """Search a knob for the SLO's answer, each probe judged on steady-state runs; print every probe and
    the answer."""
    from kvsim.sweep import plan_text as pt
    from kvsim.sweep.plan import run_plan, write_plan

    t0 = time.perf_counter()
    overrides = _guard(lambda: [*set_, *slo_overrides(slo)])
    folder = _guard(lambda: _output_folder(out, "plan", scenario))
    _say_slo_notes(scenario, set_, seed, slo)
    where = [""]  # min_cost: the candidate being searched

    def on_candidate(hw: str, tp_size: int) -> None:
        where[0] = f"{hw} TP{tp_size} x "

    def on_attempt(pl, value, a) -> None:
        err_console.print(printable(pt.attempt_line(pl, value, a, where[0])), soft_wrap=True)

    def on_probe(pl, p) -> None:
        err_console.print(printable(pt.probe_line(pl, p, where[0])), soft_wrap=True)

    hw_list = [h.strip() for h in hardware.split(",") if h.strip()]
    tps = _guard(lambda: _int_list(tp, "--tp"))
    result = _guard(lambda: run_plan(scenario, overrides, seed, find, repeats, precision, jobs, on_probe,
                                     hw_list, tps, max_extension, qps, on_attempt, on_candidate))
    runs = sum(len(a.seeds) for p in result.probes for a in p.attempts)
    simulated = sum(a.requests * len(a.seeds) for p in result.probes for a in p.attempts)
    if find == "min_cost":
        _print_table("kvsim plan --find min_cost", *pt.cost_table(result))
        if result.best is None:
            _fail("no candidate meets the SLO (the table says why each has no answer)")
    else:
        title = f"kvsim plan --find {find}: {printable(scenario or 'default scenario')}"
        _print_table(title, *pt.probe_table(result))
    files = _guard(lambda: write_plan(folder, result, str(scenario or "default scenario")))
    wall = time.perf_counter() - t0
    answer = pt.cost_answer_line(result) if find == "min_cost" else pt.answer_line(result)
    console.print(printable(f"{answer}; {len(result.probes)} probes ({runs} runs, {simulated:,} simulated "
                            f"requests) in {wall:.1f} s; wrote {', '.join(files)} to {out}/"))


def _print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title, show_header=True)
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i == 0 or col in ("verdict", "note", "hardware") else "right",
                         overflow="fold")
    for row in rows:
        table.add_row(*(printable(c) for c in row))
    console.print(table)


def _kv_dtype_flag(text: str) -> str | dict:
    """--kv-dtype: a name, or a mapping in YAML flow syntax ({bits: 4}, {rope: bf16, rest: fp8})."""
    from kvsim.scenario import parse_value

    return parse_value(text, "--kv-dtype") if text.lstrip().startswith("{") else text


def _int_list(text: str, flag: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise KvsimError(f"{flag} {excerpt(text)}: expected whole numbers N,N,...") from None


@app.command()
def sweep(
    grid_file: Path = typer.Argument(..., help="Sweep YAML: scenario, set, grid and/or points, repeats."),
    out: Path = typer.Option(Path("sweep_out"), "--out", help="Folder for sweep.parquet and sweep.json; a "
                             "rerun into it skips the runs it already holds."),
    backend: str = typer.Option("process", "--backend", help="process (a local process pool) or ray."),
    address: str | None = typer.Option(None, "--address", help="ray: an existing cluster (HOST:PORT, "
                                       "ray://HOST:PORT or auto); default: a local Ray instance."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", min=1, max=MAX_SWEEP_JOBS,
                             help="Simulations at once (process pool workers; local Ray CPUs)."),
    seed: int | None = typer.Option(None, "--seed", help="Override simulation.seed of every point."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress",
                                         help="Progress bar (default: on a terminal)."),
) -> None:
    """Run every point of a sweep file (x repeats); one Parquet row per run, every summary figure a column."""
    from kvsim.sweep.backends import check_backend, run_tasks
    from kvsim.sweep.grid import load_sweep
    from kvsim.sweep.table import previous_rows, write_sweep

    t0 = time.perf_counter()
    _guard(lambda: check_backend(backend, address))  # (before the grid: its points may take long to check)
    sw = _guard(lambda: load_sweep(grid_file, seed))
    folder = _guard(lambda: _output_folder(out, "sweep", grid_file, keep_foreign=True))  # (resumable)
    done = previous_rows(folder.path, sw)
    todo = [t for t in sw.tasks if t.scenario_hash not in done]
    rows = list(done.values())
    err_console.print(f"{len(sw.tasks)} runs: {len(done)} already in {printable(out)}, {len(todo)} to run "
                      f"({backend})")
    show = sys.stderr.isatty() if progress is None else progress
    last_write = time.monotonic()

    def save() -> list[str]:
        """Write the rows done so far (kept: files kvsim did not write there, e.g. .DS_Store)."""
        return write_sweep(_output_folder(out, "sweep", grid_file, keep_foreign=True), sw, rows)

    def consume(bar=None, task_id=None) -> None:
        nonlocal last_write
        try:
            for _task, row in run_tasks(sw.scenario, todo, backend, jobs, address):
                rows.append(row)
                if bar is not None:
                    bar.advance(task_id)
                if time.monotonic() - last_write > CHECKPOINT_S:  # keep what is done if interrupted
                    save()
                    last_write = time.monotonic()
        except (KvsimError, WorkerError) as exc:  # a point failed: keep the runs done, for a rerun to skip
            new = len(rows) - len(done)
            if not new:
                raise
            save()
            runs = "1 run" if new == 1 else f"{new} runs"
            kept = type(exc)(f"{exc}; the {runs} done before it kept in {printable(out)}/ (a rerun skips "
                             f"{'it' if new == 1 else 'them'})")
            raise kept from exc.__cause__

    if show and todo:
        from rich.progress import Progress

        with Progress(console=err_console, transient=True) as bar:
            task_id = bar.add_task("sweeping", total=len(todo))
            _guard(lambda: consume(bar, task_id))
    else:
        _guard(lambda: consume())
    files = _guard(save)
    console.print(f"{len(sw.tasks)} runs ({len(todo)} simulated now) in {time.perf_counter() - t0:.1f} s; "
                  f"wrote {', '.join(files)} to {printable(out)}/")


CHECKPOINT_S = 30.0
"""kvsim sweep writes the rows done so far at most this often (and at the end)."""


@app.command()
def validate(scenario: Path = typer.Argument(..., help="Scenario YAML to check."),
             set_: list[str] = typer.Option([], "--set", metavar=SET_METAVAR,
                                            help="Override a key before validating.")) -> None:
    """Check a scenario: schema, model, hardware, capacity and the workload (traces are read).
    Prints the resolved KV capacity and the number of requests."""
    from kvsim.engine.simulation import Simulation
    from kvsim.scenario import load_scenario

    def check():
        sim = Simulation(load_scenario(scenario, set_))
        return sim, len(sim.build_requests())

    sim, n_requests = _guard(check)
    deps = sim.deployments

    def pool(d, fleet: bool) -> str:
        hw = printable(d.hw.name)
        who = f"{d.replicas} x {d.role.name} {hw}" if fleet else f"on {hw}"
        return (f"{who} (tp={d.tp}), {d.num_blocks} KV blocks of {d.block_size} tokens = "
                f"{d.num_blocks * d.block_size} tokens per replica")

    what = (pool(deps[0], False) if sim.sc.cluster is None
            else "; ".join(pool(d, True) for d in deps))
    console.print(f"{printable(scenario)}: ok — {printable(sim.model.name)} {what}; {n_requests} requests")


@app.command()
def models() -> None:
    """List built-in model architectures: their layer groups and KV bytes per token."""
    from kvsim.specs.catalog import get_model, list_models
    from kvsim.specs.footprint import format_bytes
    from kvsim.specs.footprint_report import groups_summary

    table = Table(show_header=True)
    table.add_column("model", no_wrap=True)
    table.add_column("layers")
    table.add_column("layer groups", overflow="fold")
    for col in ("params", "KV/token (bf16)"):
        table.add_column(col, no_wrap=True)
    for name in list_models():
        m = get_model(name)
        table.add_row(name, str(m.num_layers), groups_summary(m, short=True), f"{m.num_params / 1e9:.1f}B",
                      format_bytes(m.kv_bytes_per_token("bf16")))
    console.print(table)


@app.command()
def hardware() -> None:
    """List hardware profiles. A profile file that does not load makes the whole listing one error line
    naming it (and how many more are broken), exit 2 and no table: the error contract's one line."""
    from kvsim.specs.footprint import format_bytes
    from kvsim.specs.hardware import HardwareSpec, scan_hardware

    table = Table(show_header=True)
    for col in ("profile", "device", "memory", "HBM bandwidth", "bf16 peak", "host link", "USD/GPU-h"):
        table.add_column(col)
    broken = []
    for path, hw in scan_hardware():
        if not isinstance(hw, HardwareSpec):
            broken.append(str(hw))
            continue
        bf16 = hw.peak_flops.get("bf16") or hw.peak_flops.get("fp16") or hw.peak_flops.get("fp32", 0)
        table.add_row(printable(path.stem.lower()), printable(hw.name), format_bytes(hw.memory_bytes),
                      f"{hw.hbm_bandwidth / 1e9:.0f} GB/s", f"{bf16 / 1e12:.0f} TFLOP/s",
                      f"{hw.host_link_bandwidth / 1e9:.0f} GB/s",
                      f"{hw.usd_per_gpu_hour:.2f}" if hw.usd_per_gpu_hour else "-")
    if broken:
        more = f" (and {len(broken) - 1} more broken profile files)" if len(broken) > 1 else ""
        _say(f"error: {broken[0]}{more}")
        raise typer.Exit(code=2)
    console.print(table)


@app.command()
def footprint(
    model: str = typer.Argument(..., help="Catalog name, model YAML or HF config.json."),
    tokens: int = typer.Option(..., "--tokens", min=1, max=10**12, help="Tokens of context to size."),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="auto, fp32, fp16, bf16, fp8, fp8_e4m3, fp8_e5m2,"
                                 " int8, int4, nvfp4, or a mapping such as '{bits: 3.5, group_size: 128,"
                                 " scale_bits: 16}' or '{rope: bf16, rest: fp8}'."),
    tp: int = typer.Option(1, "--tp", min=1, max=1024, help="Tensor-parallel size."),
    ep: int | None = typer.Option(None, "--ep", min=1, max=1024 * 1024, help="Expert-parallel size (vLLM's"
                                  " --enable-expert-parallel: tp x data-parallel size): routed experts split"
                                  " over it, the rest over --tp."),
    hardware: str = typer.Option("h100-sxm", "--hardware", help="Hardware profile for the fit."),
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization", min=0.01, max=1.0),
    block_size: int = typer.Option(16, "--block-size", min=1, max=4096),
    max_loras: int = typer.Option(0, "--max-loras", min=0, max=1024, help="LoRA adapter slots (vLLM's"
                                  " --max-loras) taken from the KV memory; 0: no LoRA."),
    max_lora_rank: int = typer.Option(16, "--max-lora-rank", min=1, max=512, help="The slots' rank."),
) -> None:
    """KV bytes per token and for N tokens (per layer group and in total), the page plan, and how many
    sequences fit on a device after the weights (rows, also when the weights do not fit at this TP)."""
    from kvsim.specs.catalog import get_model
    from kvsim.specs.footprint_report import footprint_rows
    from kvsim.specs.hardware import load_hardware
    from kvsim.specs.kv_precision import kv_precision

    def compute():
        dtype = _kv_dtype_flag(kv_dtype)
        m = get_model(model)
        precision = kv_precision(dtype, m.weight_dtype)
        hw = load_hardware(hardware)
        lora_bytes = 0.0
        if max_loras:
            from kvsim.lora.sizing import check_model, slot_bytes

            check_model(m, "drop --max-loras")
            m.validate_tp(tp)
            lora_bytes = max_loras * slot_bytes(m, max_lora_rank, tp)
        rows = footprint_rows(m, hw, precision, tp, gpu_memory_utilization, block_size, tokens, ep,
                              lora_bytes)
        return m, hw, precision, rows

    m, hw, precision, rows = _guard(compute)
    title = f"{printable(m.name)}, KV {printable(precision.name)}, tp={tp}"
    title += "" if ep is None else f", ep={ep}"
    table = Table(title=title, show_header=False)

    table.add_column("what")
    table.add_column("value", justify="right")
    for what, value in rows:
        table.add_row(printable(what), printable(value))
    console.print(table)


@app.command()
def calibrate(
    profile: str = typer.Option("cpu", "--profile", help="Hardware profile to fit (hardware_profiles/"
                                "NAME.yaml)."),
    device: str = typer.Option("cpu", "--device", help="torch device to measure on: cpu, cuda, cuda:1."),
    model: str = typer.Option("llama-3-8b", "--model", help="Model whose GEMM shapes and KV block size are"
                              " measured: catalog name, model YAML, or a scenario YAML."),
    grid: str | None = typer.Option(None, "--grid", help="cpu, gpu or smoke (default: gpu on cuda, else"
                                    " cpu)."),
    budget_s: float = typer.Option(240.0, "--budget-s", min=1, max=86400, help="Wall-clock budget for"
                                   " measuring."),
    kernel: list[str] = typer.Option([], "--kernel", help="Measure only this kernel (repeatable)."),
    fit_only: bool = typer.Option(False, "--fit-only", help="Refit stored measurements (--measurements)"
                                  " without measuring."),
    check: str | None = typer.Option(None, "--check", help="Re-measure a subset of a stored baseline"
                                     " (calibration/DEVICE/) here; fail when a kernel is slower. Writes"
                                     " nothing."),
    tolerance: float = typer.Option(0.25, "--tolerance", min=0, max=1000, help="--check: allowed slowdown"
                                    " (0.25 = 25%)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of block ids, inputs and case order."),
    out: Path = typer.Option(Path("calibrate_out"), "--out", help="Output folder for measurements.csv and"
                             " the fitted PROFILE.yaml."),
    measurements: Path | None = typer.Option(None, "--measurements", help="--fit-only: the measurements"
                                             " to refit; --check: the baseline (default calibration/"
                                             "PROFILE/measurements.csv)."),
    install: bool = typer.Option(False, "--install", help="Also put the fit in place of the shipped one"
                                 " (hardware_profiles/PROFILE.yaml, calibration/PROFILE/), keeping the"
                                 " previous pair in calibration/PROFILE/previous/."),
    force: bool = typer.Option(False, "--force", help="--install even a fit worse than the stored one."),
    threads: int = typer.Option(1, "--threads", min=1, max=1024, help="torch threads on a CPU device."),
    nice: int = typer.Option(0, "--nice", min=-20, max=19, help="Add to the measuring process's nice"
                             " value (e.g. -10, as root, on a shared CPU)."),
    tables: bool = typer.Option(False, "--tables", help="Print PROFILE's measured kernel tables"
                                " (calibration/PROFILE/kernels), their held-out accuracy and, with"
                                " --measurements, those measurements against them. Writes nothing."),
) -> None:
    """Time attention, GEMM and copy kernels and fit the cost model; write the measurements and the fitted
    profile to OUT, and with --install make them the shipped calibration."""
    if tables:
        from kvsim.calibrate.tables import main_tables

        code = _guard(lambda: main_tables(profile, measurements, lambda m: console.print(printable(m))))
        raise typer.Exit(code=code or 0)
    from kvsim.calibrate.command import main as calibrate_main

    code = _guard(lambda: calibrate_main(profile, device, model, grid, budget_s, kernel, fit_only, check,
                                         tolerance, seed, out, measurements, install, force,
                                         log=lambda m: console.print(printable(m)), threads=threads,
                                         nice=nice))
    raise typer.Exit(code=code or 0)


@app.command()
def hitrate(
    source: Path = typer.Argument(..., help="Scenario YAML, Mooncake trace (.jsonl) or Azure trace (.csv)."),
    capacities: str | None = typer.Option(None, "--capacities", help="Comma-separated cache sizes in "
                                          "--unit (default: 16 log-spaced points up to the working set)."),
    unit: str = typer.Option("blocks", "--unit", help="blocks, tokens or gib (GiB of KV)."),
    block_size: int | None = typer.Option(None, "--block-size", min=1, max=4096,
                                          help="Engine block size (default: the scenario's, else 16)."),
    sample_rate: float = typer.Option(1.0, "--sample-rate", help="SHARDS spatial sampling rate in (0, 1]."),
    requests: int | None = typer.Option(None, "--requests", min=1, max=10_000_000,
                                        help="Use only the first N requests."),
    set_: list[str] = typer.Option([], "--set", metavar=SET_METAVAR,
                                   help="Override a scenario key (repeatable)."),
    model: str | None = typer.Option(None, "--model", help="For traces: the model --unit gib sizes KV by."),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="For traces with --model: KV dtype."),
    tiers: str | None = typer.Option(None, "--tiers", help="KV tiers top to bottom, NAME=CAPACITY in --unit: "
                                     "gpu (default, or gpu=pool: one replica's KV pool), then any of cpu, "
                                     "ssd, remote in that order (0: empty), e.g. cpu=256,ssd=4000. Prints "
                                     "the hit rate each tier serves; writes tiers.csv, tiers_sweep.csv and "
                                     "tiers.png."),
    placement: str | None = typer.Option(None, "--placement", help="With --tiers: exclusive (default: a "
                                         "block in one tier, demoted down the chain) or inclusive (each "
                                         "tier a superset of the one above; tiers must grow down)."),
    sweep_tier: str | None = typer.Option(None, "--sweep-tier", help="NAME=CAP,CAP,...: capacities (in "
                                          "--unit) of one tier to plot the total hit rate against, the "
                                          "others as --tiers (default: the first tier below gpu, from 0 "
                                          "to the working set)."),
    out: Path = typer.Option(Path("hitrate"), "--out", help="Folder for hitrate.csv and hitrate.png (and "
                             "the tiers files)."),
) -> None:
    """LRU prefix-cache hit rate against cache capacity, in one pass (stack distances); with --tiers, the
    hit rate each tier of a GPU / CPU / SSD chain serves."""
    from kvsim.sweep import hitrate_run as hr

    if placement is not None and tiers is None and sweep_tier is None:
        _fail("--placement: only with --tiers or --sweep-tier")
    folder = _guard(lambda: _output_folder(out, "hitrate", source))
    result = _guard(lambda: hr.compute(source, set_, requests, block_size, model, _kv_dtype_flag(kv_dtype),
                                       sample_rate, capacities, unit, tiers, placement, sweep_tier))

    def write() -> None:
        with folder as tmp:
            hr.write_files(tmp, result)

    _guard(write)
    for table in hr.tables(result):
        console.print(table)
    console.print(hr.footer(result, out))


@app.command()
def policies() -> None:
    """List every pluggable choice (layouts, prefix caches, eviction and sparsity policies, ...)."""
    from kvsim.registry import all_policies

    table = Table(show_header=True)
    for col in ("scenario key", "name", "what it does"):
        table.add_column(col)
    for key, name, text in all_policies():
        table.add_row(key, name, text)
    console.print(table)


@app.command()
def schema() -> None:
    """Print the JSON Schema of a scenario file (every key with its default, unit and description, and
    vLLM's names for it), e.g. `kvsim schema > scenario.schema.json` for an editor."""
    from kvsim.scenario_schema import json_schema

    sys.stdout.write(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")


@app.command()
def version() -> None:
    """Print the kvsim version."""
    console.print(__version__)


PROGRAM_GC_THRESHOLD = 20_000
"""The collector's generation-0 threshold where kvsim is the program (`main()`; Python's default: 700):
what a command makes mostly lives on (typer's parsing, the loop's requests and records), and at 700 the
collector's passes over it were ~2% of a `kvsim run`'s CPU (89 collections of the Azure run, 5 at 20,000)."""


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def one_blas_thread() -> None:
    """Before numpy is imported: its OpenBLAS runs one thread, unless the user set one of
    BLAS_THREAD_VARIABLES (which OpenBLAS reads, in that order). OpenBLAS starts a thread per core when it
    loads and each spins before it sleeps, a sixth of a short run's CPU on two cores; the command line does
    no multi-threaded linear algebra (the simulation none at all), and `--jobs` workers inherit the
    setting."""
    if not any(name in os.environ for name in BLAS_THREAD_VARIABLES):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def system_arrow_allocator() -> None:
    """Before pyarrow is imported: its buffers come from the C library's malloc (Arrow's "system" pool),
    unless the user set ARROW_DEFAULT_MEMORY_POOL. Arrow's default pool (mimalloc) takes fresh memory for
    each reading thread, which the kernel zeroes a 2 MiB huge page at a time: about a tenth of a perf
    profile of reading the kernel tables and simulating the Azure trace. Whole Azure run: 0.53-0.63 ->
    0.52-0.54 s CPU (user + system, 6 runs each, alternating). Where kvsim is a library, the program
    chooses."""
    os.environ.setdefault(ARROW_POOL_VARIABLE, "system")


def main(program: bool = False) -> None:
    """Console entry point. Every failure is one line on stderr: usage errors (bad flags, bad option
    values) and KvsimErrors exit 2, SIGINT 130, SIGTERM 143; anything else is a kvsim bug, reported as
    one `internal error` line with exit 3. KVSIM_DEBUG=1 shows its traceback, and Python warnings.
    `program` (the `kvsim` command itself, see program()): SIGINT and SIGTERM are left to their default
    action when it returns, since the process is ending; otherwise the handlers it found are put back."""
    global _PROGRAM
    _PROGRAM = True
    gc.set_threshold(PROGRAM_GC_THRESHOLD, *gc.get_threshold()[1:])

    if not os.environ.get("KVSIM_DEBUG"):  # library warnings are not kvsim output; the fuzz suite sees them
        warnings.simplefilter("ignore")
    one_blas_thread()
    system_arrow_allocator()
    before = interrupts.catch_signals()  # SIGTERM unwinds like SIGINT: temporary folders are removed
    try:
        code = _main()
        interrupts.raise_swallowed()
        interrupts.drop_interrupts()  # (the command is over: a signal from here on is not an error)
    except KeyboardInterrupt:  # (a signal after the command returned, before its exit status was read)
        code = _interrupted()
    finally:
        interrupts.restore_signals(before, default=program)
    if code:
        raise SystemExit(code)


def program() -> None:
    """The `kvsim` command (its console script, `python -m kvsim.cli`): main() in a process of its own."""
    main(program=True)


def app_for(args: list[str]) -> typer.Typer:
    """The app that parses `args`: when the first one names a command, an app of the root options and that
    command alone, else the whole app. Typer builds the options of every command it holds before parsing,
    so a `kvsim run` need not pay for the other commands' (the same usage, help and errors: only the
    root's help and an unknown command's error list the commands, and neither starts with a command)."""
    name = args[0] if args else ""
    for info in app.registered_commands:
        if (info.name or info.callback.__name__.lower().replace("_", "-")) == name:
            one = typer.Typer(**APP_SETTINGS)
            one.registered_callback = app.registered_callback
            one.registered_commands = [info]
            return one
    return app


def _main() -> int:
    try:
        rc = app_for(sys.argv[1:])(standalone_mode=False, prog_name="kvsim")
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        _say("error: aborted")
        return 130
    except Exception as exc:
        if interrupts.interrupt_behind(exc) is not None:  # (an interrupt, turned into an error)
            return _interrupted()
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `kvsim`: one line, not the help
            _say("error: kvsim: missing command (kvsim run simulates the default scenario; kvsim -h lists "
                 "the commands)")
            return 2
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            # a click/typer usage error: name the command and say what was wrong, on one line
            ctx = getattr(exc, "ctx", None)
            where = f"{ctx.command_path}: " if ctx is not None else ""
            _say(f"error: {where}{exc.format_message()}")
            return exc.exit_code or 2
        if os.environ.get("KVSIM_DEBUG"):
            raise
        _say(_internal_error(exc))
        return 3
    if rc == 130:  # typer's answer to KeyboardInterrupt: Ctrl-C, or SIGTERM (interrupts.Terminated)
        return _interrupted()
    return rc if isinstance(rc, int) else 0


def _interrupted() -> int:
    terminated = interrupts.terminated()
    _say("error: terminated" if terminated else "error: interrupted")
    return 143 if terminated else 130


def _say(line: str) -> None:
    """Print one line to stderr: whitespace (newlines included) collapsed, no markup."""
    err_console.print(printable(" ".join(line.split())), soft_wrap=True)


def _internal_error(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "error: out of memory (a scenario or input too large for this machine?)"
    if isinstance(exc, RecursionError):
        return "error: input nested too deeply"
    from kvsim.errors import WorkerError, excerpt

    what = str(exc) if isinstance(exc, WorkerError) else f"{type(exc).__name__}: {excerpt(str(exc), 120)}"
    return f"error: internal error, please report it: {what} (KVSIM_DEBUG=1 shows the traceback)"


if __name__ == "__main__":
    program()
