"""What `kvsim calibrate` does: measure a grid on a device, fit the models, write the measurements and the
fitted profile to an output folder (and, asked by name, install them). Torch is imported only by
`measure`; fitting needs numpy, pandas and scipy."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvsim.calibrate.cases import KERNELS
from kvsim.calibrate.fit import FOLDS, MAPE_CEILING, fit_all, paged_overhead, terms
from kvsim.calibrate.install import install as install_fit
from kvsim.calibrate.install import installed_source, measurements_path, profile_file, repo_root
from kvsim.calibrate.measurements import file_sha256, read_measurements, write_measurements
from kvsim.calibrate.profile import write_calibration
from kvsim.errors import KvsimError
from kvsim.inputs import load_yaml
from kvsim.output_folder import OutputFolder
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware
from kvsim.specs.model import ModelSpec


def resolve_model(text: str) -> ModelSpec:
    """A catalog name, a model YAML / config.json, or a scenario YAML whose `model` key names one."""
    path = Path(text)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        data = load_yaml(path, "scenario or model file")
        if isinstance(data, dict) and "model" in data and "num_layers" not in data:
            return get_model(data["model"])
    return get_model(text)


def measure(profile: str, device: str, model: ModelSpec, grid: str, budget_s: float, kernels: list[str],
            seed: int, out: Path, log: Callable[[str], None] = print, threads: int = 1,
            nice: int = 0) -> Path:
    """Time the grid on `device` and write calibration/<profile>/measurements.csv (or `out`). On a CPU
    torch runs `threads` threads: one by default, because on a small shared VM an OpenMP barrier turns
    every preemption of a sibling thread into a stall of tens of milliseconds. nice: the nice value added
    by main(), recorded in the method."""
    import torch

    from kvsim.calibrate.grid import build_grid, filter_by_memory
    from kvsim.calibrate.harness import HarnessConfig
    from kvsim.calibrate.harness import measure as run_grid
    from kvsim.calibrate.provenance import provenance
    from kvsim.calibrate.timing import Timer, default_flush_bytes

    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise KvsimError(f"--device {device}: torch {torch.__version__} sees no CUDA device")
    if dev.type == "cpu":
        torch.set_num_threads(threads)
        keep_heap_memory()
    unknown = sorted(set(kernels) - set(KERNELS))
    if unknown:
        raise KvsimError(f"--kernels: unknown kernel {unknown[0]!r}; known: {', '.join(KERNELS)}")
    triton_ok = dev.type == "cuda" and _has_triton()
    fp8_ok = dev.type == "cuda" and torch.cuda.get_device_capability(dev) >= (8, 9)
    cases = build_grid(grid, model, set(kernels), triton_ok=triton_ok, fp8_ok=fp8_ok)
    if dev.type == "cuda":
        memory = torch.cuda.get_device_properties(dev).total_memory * 0.8
        min_pool = 4 * 2**30
        timer = Timer(dev, default_flush_bytes(dev), warmup=3, repeats=10)
    else:
        memory = load_hardware(profile).memory_bytes * 0.5
        min_pool = 512 * 2**20 if grid != "smoke" else 4 * 2**20
        flush = default_flush_bytes(dev) if grid != "smoke" else 8 << 20
        timer = Timer(dev, flush, warmup=1, repeats=9, long_s=0.1, long_repeats=5)
    cases = filter_by_memory(cases, memory, min_pool)
    method = (f"median of {timer.repeats} repeats ({timer.long_repeats} when a call exceeds "
              f"{timer.long_s:g} s) after {timer.warmup} warm-up; "
              f"{'CUDA events' if dev.type == 'cuda' else 'time.perf_counter (CPU ops are synchronous)'}; "
              f"{timer.flush_bytes / 2**20:.0f} MiB flush buffer overwritten before every call; "
              f"{'CPU: glibc heap kept (no per-call page faults), ' if dev.type == 'cpu' else ''}KV and copy "
              f"pools >= {min_pool / 2**20:.0f} MiB with shuffled block ids; budget {budget_s:g} s"
              f"{f'; {threads} torch thread(s)' if dev.type == 'cpu' else ''}"
              f"{f'; nice {nice:+d}' if nice else ''}")
    log(f"{len(cases)} cases on {dev} ({grid} grid, budget {budget_s:g} s)")
    rows = run_grid(cases, HarnessConfig(dev, timer, budget_s, min_pool, seed), log)
    if not rows:
        raise KvsimError("no case was measured (budget too small?)")
    prov = provenance(dev, profile, method, model.name, grid, seed)
    write_measurements(out, prov, rows)
    log(f"wrote {len(rows)} rows to {out}")
    return out


def keep_heap_memory() -> bool:
    """Make glibc serve every allocation from the heap and never give freed memory back, so that the
    temporaries torch allocates on each CPU call stop costing fresh page faults (a serving engine reuses its
    buffers). Returns whether it took effect (glibc only)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_mmap_max, m_trim_threshold = -4, -1
        return bool(libc.mallopt(m_mmap_max, 0)) and bool(libc.mallopt(m_trim_threshold, 2**31 - 1))
    except (OSError, AttributeError):
        return False


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def fit_profile(profile: str, csv: Path, folds: int = FOLDS, source: str | None = None) -> dict[str, Any]:
    """Fit every kernel in csv and return the `calibration` mapping for PROFILE (nothing is written).
    source: the measurements file the mapping names (default: csv, relative to the repo root when it lies
    there). KvsimError if the held-out MAPE of a kernel that times a cost-model term (fit.terms: the
    first fitted of TERM_KERNELS' candidates) exceeds MAPE_CEILING; a fallback another kernel outranks (the
    torch reference beside the Triton decode kernel) is fitted and reported, not gated. Smoke grids are
    not gated."""
    hw = load_hardware(profile)
    prov, df = read_measurements(csv)
    kernels = fit_all(df, hw.peak_flops, folds)
    timing = set(terms(kernels).values())
    bad = [] if prov.get("grid") == "smoke" else [
        f"{k}/{dt} {f['heldout_mape']:.3f}" for k, by in kernels.items() if k in timing
        for dt, f in by.items() if f["heldout_mape"] > MAPE_CEILING]
    if bad:
        raise KvsimError(f"{csv}: held-out MAPE above {MAPE_CEILING}: {', '.join(bad)}")
    if source is None:
        try:
            source = str(csv.resolve().relative_to(repo_root().resolve()))
        except ValueError:
            source = str(csv)
    cal: dict[str, Any] = {
        "source": source, "sha256": file_sha256(csv),
        "provenance": {k: prov[k] for k in ("device", "driver", "torch", "triton", "kvsim", "date",
                                            "model_shapes", "grid") if k in prov},
        "fit": f"NNLS on relative error; {folds}-fold held-out MAPE and worst error per kernel and dtype; "
               f"gate = refit held-out MAPE bound, ceiling {MAPE_CEILING}",
        "terms": terms(kernels), "kernels": kernels,
    }
    overhead = paged_overhead(df)
    if overhead:
        cal["paged_over_contiguous"] = overhead
    return cal


def main(profile: str, device: str, model: str, grid: str | None, budget_s: float, kernels: list[str],
         fit_only: bool, check: str | None, tolerance: float, seed: int, out: Path,
         measurements: Path | None = None, install: bool = False, force: bool = False,
         log: Callable[[str], None] = print, threads: int = 1, nice: int = 0) -> int:
    """The `kvsim calibrate` command; returns its exit code (1 when --check finds a slower kernel).

    Measures (or, with fit_only, takes `measurements`) and fits; writes measurements.csv and PROFILE.yaml
    (the profile with the new `calibration` key) to the output folder `out`. The shipped profile changes
    only with install (kvsim/calibrate/install.py). --check re-measures against a stored baseline and
    writes nothing."""
    if check is not None or not fit_only:
        _prepare_measuring(nice)
    if check is not None:
        from kvsim.calibrate.check import run_check

        results = run_check(check, device, measurements or measurements_path(check), tolerance, log=log,
                            threads=threads)
        slow = [r for r in results if r.ratio > 1 + tolerance]
        log(f"{len(results) - len(slow)}/{len(results)} cases within {tolerance:.0%} of the baseline")
        return 1 if slow else 0
    shipped = profile_file(profile)
    load_hardware(profile)
    folder = OutputFolder(out, "calibrate")
    given = measurements or measurements_path(profile)
    if fit_only:
        read_measurements(given)
    fitted: dict[str, Any] | None = None
    failure: KvsimError | None = None
    with folder as tmp:
        csv = tmp / "measurements.csv"
        if fit_only:
            shutil.copyfile(given, csv)
        else:
            grid = grid or ("gpu" if device.startswith("cuda") else "cpu")
            measure(profile, device, resolve_model(model), grid, budget_s, kernels or list(KERNELS), seed,
                    csv, log, threads, nice)
        try:
            fitted = fit_profile(profile, csv, source=installed_source(profile))
        except KvsimError as exc:  # keep the measurements: they cost minutes of device time
            failure = exc
        else:
            shutil.copyfile(shipped, tmp / shipped.name)
            write_calibration(tmp / shipped.name, fitted, _comment(profile))
    if failure is not None:
        log(f"kept the measurements in {folder.given}/measurements.csv")
        raise failure
    for kernel, by in fitted["kernels"].items():
        for dtype, f in by.items():
            log(f"{kernel:24s} {dtype:5s} rows {f['rows']:4d}  held-out MAPE {f['heldout_mape']:.3f}  worst "
                f"{f['heldout_worst']:.3f}  gate {f['mape_gate']:.2f}")
    log(f"wrote {folder.given}/measurements.csv and {folder.given}/{shipped.name}")
    if install:
        install_fit(profile, folder.path / "measurements.csv", fitted, _comment(profile), force, log)
    else:
        log(f"{shipped} is unchanged (--install puts this fit in place)")
    return 0


def _comment(profile: str) -> str:
    return f"fitted by `kvsim calibrate` from {installed_source(profile)}; do not edit by hand"


def _prepare_measuring(nice: int) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise KvsimError("kvsim calibrate needs torch: pip install -e '.[calibrate]'") from None
    if nice:  # negative, as root: other work on a shared CPU interferes less with the timings
        try:
            os.nice(nice)
        except OSError as exc:
            raise KvsimError(f"--nice {nice}: {exc.strerror}") from None
