"""Start-up: the heavy libraries are imported where they are used, not with `kvsim.cli` (docs/architecture.md,
"Lazy imports"). Each check runs in a fresh interpreter and reads sys.modules; no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("matplotlib", "pyarrow", "pyarrow.parquet", "pandas", "numpy", "scipy", "torch")


def loaded_after(code: str, cwd: Path = ROOT) -> dict[str, bool]:
    """Run `code` in a fresh interpreter, then say which of HEAVY are in its sys.modules."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))\n"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                         cwd=cwd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_importing_the_cli_imports_no_heavy_library():
    loaded = loaded_after("import kvsim.cli")
    assert not any(loaded.values()), loaded


def test_help_imports_no_heavy_library():
    loaded = loaded_after("import sys\nfrom kvsim.cli import main\nsys.argv = ['kvsim', '--help']\n"
                          "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n")
    assert not any(loaded.values()), loaded


def test_the_run_path_imports_neither_matplotlib_nor_parquet_nor_torch_until_used():
    loaded = loaded_after("import kvsim.cli, kvsim.scenario, kvsim.engine.simulation, kvsim.metrics.summary,"
                          " kvsim.metrics.report, kvsim.metrics.plots, kvsim.output_folder")
    assert not loaded["matplotlib"] and not loaded["pyarrow.parquet"], loaded
    assert not loaded["torch"] and not loaded["scipy"], loaded
    # the run path's summary and outputs read the recorder's columns: pandas only where a frame is built
    loaded = loaded_after("import kvsim.cli, kvsim.scenario, kvsim.engine.simulation, kvsim.metrics.summary,"
                          " kvsim.metrics.report, kvsim.output_folder, kvsim.api")
    assert not loaded["pandas"] and not loaded["pyarrow"], loaded


def test_a_run_imports_matplotlib_and_parquet_to_write_them_and_never_torch(tmp_path):
    out = tmp_path / "out"
    loaded = loaded_after("import sys\nfrom kvsim.cli import main\n"
                          f"sys.argv = ['kvsim', 'run', '--set', 'simulation.requests=3', '--no-progress',"
                          f" '--out', {str(out)!r}]\nmain()\n", cwd=tmp_path)
    assert (out / "kv_usage.png").is_file() and (out / "requests.parquet").is_file()
    assert loaded["matplotlib"] and loaded["pyarrow.parquet"], loaded
    assert not loaded["torch"] and not loaded["scipy"], loaded
