"""`import kvsim` and `kvsim run` never import torch or triton (they live in the optional extra)."""

from __future__ import annotations

import subprocess
import sys


def test_simulator_imports_no_torch():
    code = ("import kvsim, kvsim.cli, kvsim.engine.simulation, kvsim.cost.factory, kvsim.calibrate.command, "
            "kvsim.calibrate.fit, sys; bad = [m for m in ('torch', 'triton') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_calibrate_runs_without_the_simulator_dependencies():
    """The GPU machine's Python has torch, numpy, pandas, scipy, yaml, typer and rich but neither pydantic
    nor simpy: the calibrate command's whole import path must do without them."""
    code = ("import sys; sys.modules.update(pydantic=None, simpy=None); "
            "import kvsim.cli, kvsim.calibrate.command, kvsim.calibrate.check, kvsim.calibrate.fit, "
            "kvsim.calibrate.grid, kvsim.calibrate.selftest")
    subprocess.run([sys.executable, "-c", code], check=True)
