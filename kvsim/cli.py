"""The `kvsim` command line (typer). Thin: parse, load the scenario, call the library, print."""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kvsim import __version__
from kvsim.errors import KvsimError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="kvsim: KV-cache capacity planning for LLM serving, by discrete-event simulation.")
console = Console()
err_console = Console(stderr=True)


def _fail(msg: str) -> None:
    err_console.print(f"error: {msg}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def _guard(fn):
    """Run fn, turning KvsimError into a one-line error and a non-zero exit."""
    try:
        return fn()
    except KvsimError as exc:
        _fail(str(exc))


@app.command()
def run(
    scenario: Path | None = typer.Argument(None, help="Scenario YAML; omit for the built-in default."),
    set_: list[str] = typer.Option([], "--set", help="Override a key: --set kv.block_size=32 (repeatable)."),
    seed: int | None = typer.Option(None, "--seed", help="Override simulation.seed."),
    out: Path = typer.Option(Path("out"), "--out", help="Output folder (replaced atomically)."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress",
                                            help="Progress bar (default: on a terminal)."),
) -> None:
    """Simulate one scenario and write summary.json, Parquet tables, report.md and plots to OUT."""
    from kvsim.scenario import load_scenario

    sc = _guard(lambda: load_scenario(scenario, set_, seed))
    show = sys.stderr.isatty() if progress is None else progress
    result, wall, peak = _guard(lambda: _simulate(sc, show))
    from kvsim.metrics.report import write_outputs
    from kvsim.metrics.summary import build_summary, summary_table_rows

    summary = build_summary(result.requests, result.timeline, result.meta)
    n_req = len(result.requests)
    run_info = {
        "wall_s": round(wall, 3),
        "simulated_requests_per_wall_s": round(n_req / wall, 1) if wall > 0 else None,
        "peak_rss_mib": round(peak / 2**20, 1),
        "iterations": int(len(result.timeline)),
        "kvsim_version": __version__,
    }
    _guard(lambda: write_outputs(out, summary, result.requests, result.timeline, run_info))
    table = Table(title=f"kvsim: {sc.name}", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary_table_rows(summary):
        table.add_row(key, value)
    console.print(table)
    console.print(f"{n_req} requests in {wall:.2f} s wall ({run_info['simulated_requests_per_wall_s']} "
                  f"simulated requests per wall-second); outputs in {out}/")


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

            result = Simulation(sc, tick).run()
    else:
        result = Simulation(sc).run()
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return result, wall, peak


@app.command()
def validate(scenario: Path = typer.Argument(..., help="Scenario YAML to check."),
             set_: list[str] = typer.Option([], "--set", help="Override a key before validating.")) -> None:
    """Check a scenario file: schema, model, hardware and capacity. Prints the resolved capacity."""
    from kvsim.scenario import load_scenario
    from kvsim.specs.catalog import get_model
    from kvsim.specs.footprint import kv_capacity
    from kvsim.specs.hardware import load_hardware

    def check():
        sc = load_scenario(scenario, set_)
        model = get_model(sc.model)
        hw = load_hardware(sc.hardware)
        cap = kv_capacity(model, hw, sc.kv.dtype, sc.parallelism.tensor_parallel_size,
                          sc.kv.gpu_memory_utilization, sc.kv.block_size)
        tr = sc.workload.trace
        if sc.workload.kind == "trace" and tr is not None and not Path(tr.path).exists():
            raise KvsimError(f"{scenario}: workload.trace.path: file not found: {tr.path}")
        return sc, model, hw, cap

    sc, model, hw, cap = _guard(check)
    console.print(f"{scenario}: ok — {model.name} on {hw.name} (tp={sc.parallelism.tensor_parallel_size}), "
                  f"{cap.num_blocks} KV blocks of {sc.kv.block_size} tokens = {cap.tokens} tokens")


@app.command()
def models() -> None:
    """List built-in model architectures and their KV bytes per token."""
    from kvsim.specs.catalog import get_model, list_models
    from kvsim.specs.footprint import format_bytes

    table = Table(show_header=True)
    for col in ("model", "attention", "layers", "kv heads", "head dim", "params", "KV/token (bf16)"):
        table.add_column(col)
    for name in list_models():
        m = get_model(name)
        table.add_row(name, m.attention, str(m.num_layers), str(m.num_kv_heads), str(m.head_dim),
                      f"{m.num_params / 1e9:.1f}B", format_bytes(m.kv_bytes_per_token("bf16")))
    console.print(table)


@app.command()
def hardware() -> None:
    """List hardware profiles."""
    from kvsim.specs.footprint import format_bytes
    from kvsim.specs.hardware import list_hardware, load_hardware

    table = Table(show_header=True)
    for col in ("profile", "device", "memory", "HBM bandwidth", "bf16 peak", "host link"):
        table.add_column(col)
    for name in list_hardware():
        hw = _guard(lambda name=name: load_hardware(name))
        bf16 = hw.peak_flops.get("bf16") or hw.peak_flops.get("fp16") or hw.peak_flops.get("fp32", 0)
        table.add_row(name, hw.name, format_bytes(hw.memory_bytes), f"{hw.hbm_bandwidth / 1e9:.0f} GB/s",
                      f"{bf16 / 1e12:.0f} TFLOP/s", f"{hw.host_link_bandwidth / 1e9:.0f} GB/s")
    console.print(table)


@app.command()
def footprint(
    model: str = typer.Argument(..., help="Catalog name, model YAML or HF config.json."),
    tokens: int = typer.Option(..., "--tokens", min=1, help="Tokens of context to size."),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="fp32, fp16, bf16, fp8, int8 or int4."),
    tp: int = typer.Option(1, "--tp", min=1, help="Tensor-parallel size."),
    hardware: str = typer.Option("h100-sxm", "--hardware", help="Hardware profile for the fit."),
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization", min=0.01, max=1.0),
    block_size: int = typer.Option(16, "--block-size", min=1),
) -> None:
    """KV bytes per token and for N tokens, and how many tokens of KV fit on a device after weights."""
    from kvsim.specs.catalog import get_model
    from kvsim.specs.dtypes import dtype_bytes
    from kvsim.specs.footprint import format_bytes, kv_capacity
    from kvsim.specs.hardware import load_hardware

    def compute():
        dtype_bytes(kv_dtype)
        m = get_model(model)
        hw = load_hardware(hardware)
        cap = kv_capacity(m, hw, kv_dtype, tp, gpu_memory_utilization, block_size)
        return m, hw, cap

    m, hw, cap = _guard(compute)
    per_tok = m.kv_bytes_per_token(kv_dtype, tp)
    table = Table(title=f"{m.name}, KV {kv_dtype}, tp={tp}", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("KV bytes per token (per GPU)", f"{per_tok:,.0f} B ({format_bytes(per_tok)})")
    table.add_row(f"KV for {tokens:,} tokens (per GPU)", format_bytes(m.kv_bytes(tokens, kv_dtype, tp)))
    table.add_row("weights per GPU", format_bytes(cap.weight_bytes))
    table.add_row(f"KV capacity on {hw.name}",
                  f"{cap.tokens:,} tokens ({cap.num_blocks:,} blocks of {block_size})")
    table.add_row(f"sequences of {tokens:,} tokens that fit", f"{cap.tokens // tokens:,}")
    console.print(table)


@app.command()
def version() -> None:
    """Print the kvsim version."""
    console.print(__version__)


def main() -> None:
    """Console entry point: usage errors (bad flags, bad option values) become one line too."""
    try:
        rc = app(standalone_mode=False, prog_name="kvsim")
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        err_console.print("error: aborted", markup=False, highlight=False)
        raise SystemExit(130) from None
    except Exception as exc:
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        # a click/typer usage error: name the command and say what was wrong, on one line
        ctx = getattr(exc, "ctx", None)
        where = f"{ctx.command_path}: " if ctx is not None else ""
        msg = " ".join(exc.format_message().split())
        err_console.print(f"error: {where}{msg}", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(exc.exit_code or 2) from None
    if isinstance(rc, int) and rc:
        raise SystemExit(rc)


if __name__ == "__main__":
    main()
