"""A sweep run in memory: a sweep file's path or its mapping -> the sweep.parquet table (what `kvsim
sweep` writes, without the folder). `kvsim.sweep(...)` (kvsim/api.py, and the callable package)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim.errors import MAX_SWEEP_JOBS, KvsimError, check_jobs
from kvsim.sweep.backends import check_backend, run_tasks
from kvsim.sweep.grid import load_sweep, sweep_from
from kvsim.sweep.table import frame


def sweep_table(spec: str | Path | dict[str, Any], backend: str = "process", jobs: int = 1,
                address: str | None = None) -> pd.DataFrame:
    """Every run of the sweep (`scenario`, `set`, `grid`, `points`, `repeats`) on `backend`, as one table."""
    if not isinstance(spec, (str, Path, dict)):
        raise KvsimError(f"spec: a sweep file's path or its mapping, got {type(spec).__name__}")
    check_jobs(jobs, MAX_SWEEP_JOBS)
    check_backend(backend, address)
    sw = sweep_from(copy.deepcopy(spec), "sweep", None) if isinstance(spec, dict) else load_sweep(spec)
    rows = [row for _, row in run_tasks(sw.scenario, sw.tasks, backend, jobs, address)]
    return frame(sw, rows)
