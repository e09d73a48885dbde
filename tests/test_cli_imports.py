"""Start-up: the heavy libraries are imported where they are used, not with `kvsim.cli` (docs/architecture.md,
"Lazy imports"). Each check runs in a fresh interpreter and reads sys.modules; no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


UNNEEDED = ("pandas", "matplotlib", "scipy", "torch", "pyarrow")
CHAT = ROOT / "workloads" / "chat.yaml"


def first_importer(module: str, code: str, cwd: Path = ROOT) -> dict[str, str | None]:
    """Run `code` in a fresh interpreter that notes, for each of `module` and UNNEEDED, the innermost kvsim
    module on the stack when it was first imported ('' when no kvsim module was; absent: never imported)."""
    probe = (
        "import sys, traceback\n"
        f"WATCH = {(module, *UNNEEDED)!r}\n"
        "seen = {}\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name in WATCH and name not in seen:\n"
        "            files = [f.filename for f in traceback.extract_stack() if '/kvsim/' in f.filename]\n"
        "            seen[name] = files[-1].rsplit('/kvsim/', 1)[1] if files else ''\n"
        "        return None\n"
        "sys.meta_path.insert(0, Spy())\n"
        f"{code}\n"
        "import json\n"
        "print(json.dumps(seen))\n")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_loading_a_scenario_imports_none_of_pandas_pyarrow_matplotlib_scipy_torch():
    seen = first_importer("numpy", "import kvsim.cli\nfrom kvsim.scenario import load_scenario\n"
                                   f"load_scenario({str(CHAT)!r}, ['simulation.requests=10'])")
    assert not any(m in seen for m in UNNEEDED), seen


def test_building_a_simulation_imports_no_plotting_parquet_scipy_torch_or_pandas():
    """Scenario loading and Simulation construction (the roofline cost model: no kernel tables to read)
    import no matplotlib, Parquet, scipy, torch or pandas (the result's frames are built only when asked)."""
    seen = first_importer("numpy", "import kvsim.cli\nfrom kvsim.scenario import load_scenario\n"
                                   "from kvsim.engine.simulation import Simulation\n"
                                   f"Simulation(load_scenario({str(CHAT)!r}, ['simulation.requests=10', "
                                   "'cost.model=roofline']))")
    assert not any(m in seen for m in ("matplotlib", "scipy", "torch")), seen
    assert "pandas" not in seen and "pyarrow" not in seen, seen


def test_the_run_command_is_parsed_by_an_app_of_that_command_alone():
    from kvsim.cli import app, app_for

    names = [c.name or c.callback.__name__.lower().replace("_", "-") for c in app.registered_commands]
    assert "run" in names and len(names) > 1
    for name in names:
        one = app_for([name, "--help"])
        assert [c.callback for c in one.registered_commands] == [
            c.callback for c in app.registered_commands if c.callback.__name__.replace("_", "-") == name]
        assert one.registered_callback is app.registered_callback
    for args in ([], ["--help"], ["-V"], ["runn"], ["--install-completion"]):
        assert app_for(args) is app


@pytest.mark.parametrize("args", [["run", "--help"], ["run", "--no-such-flag"], ["models", "--help"],
                                  ["footprint"], ["version"]])
def test_a_one_command_app_says_what_the_whole_app_says(args, monkeypatch, capsys):
    """The same output, error line and exit status through main() (one-command app) as through the
    whole app."""
    from kvsim.cli import _main, app

    outputs = []
    for pick in (None, app):
        if pick is not None:
            monkeypatch.setattr("kvsim.cli.app_for", lambda _args: app)
        monkeypatch.setattr("sys.argv", ["kvsim", *args])
        code = _main()
        outputs.append((code, *capsys.readouterr()))
    assert outputs[0] == outputs[1]


def test_a_short_run_without_plots_imports_neither_pandas_nor_matplotlib(tmp_path):
    """The default cost model's kernel tables are read as numpy columns (kvsim/specs/table_columns.py),
    the summary and the Parquet files are written from the recorder's columns: no pandas anywhere."""
    out = tmp_path / "out"
    loaded = loaded_after("import sys\nfrom kvsim.cli import main\n"
                          f"sys.argv = ['kvsim', 'run', {str(CHAT)!r}, '--set', 'simulation.requests=10', "
                          f"'--no-plots', '--no-progress', '--out', {str(out)!r}]\nmain()\n", cwd=tmp_path)
    assert (out / "requests.parquet").is_file() and (out / "summary.json").is_file()
    assert not loaded["pandas"] and not loaded["matplotlib"], loaded
    assert not loaded["torch"] and not loaded["scipy"], loaded


def test_run_collects_garbage_again_after_start_up(tmp_path):
    """`kvsim run` turns the cyclic collector off while it starts (kvsim.cli._start_up) and on again before
    the simulation loop, and after a failed start too."""
    import gc

    from typer.testing import CliRunner

    from kvsim.cli import app

    assert gc.isenabled()
    res = CliRunner().invoke(app, ["run", str(CHAT), "--set", "simulation.requests=3", "--no-plots",
                                   "--no-progress", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert gc.isenabled()
    res = CliRunner().invoke(app, ["run", str(CHAT), "--set", "simulation.requests=-3", "--no-plots",
                                   "--no-progress", "--out", str(tmp_path / "out2")])
    assert res.exit_code == 2
    assert gc.isenabled()
    gc.disable()  # a caller that holds the collector off keeps it off
    try:
        res = CliRunner().invoke(app, ["run", str(CHAT), "--set", "simulation.requests=3", "--no-plots",
                                       "--no-progress", "--out", str(tmp_path / "out3")])
        assert res.exit_code == 0 and not gc.isenabled()
    finally:
        gc.enable()
