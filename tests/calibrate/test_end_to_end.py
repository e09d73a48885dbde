"""measure -> fit -> simulate: `kvsim run` on the CPU scenario is timed by the stored CPU calibration, and
summary.json says which model and which calibration timed it."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.specs.hardware import load_hardware

REPO = Path(__file__).resolve().parents[2]


def test_calibrated_run_on_the_cpu_profile(tmp_path):
    res = CliRunner().invoke(app, ["run", str(REPO / "workloads" / "cpu_calibrated.yaml"), "--set",
                                   "simulation.requests=12", "--out", str(tmp_path / "out"), "--no-progress"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    cm = summary["cost_model"]
    cal = load_hardware("cpu").calibration
    assert cm["model"] == "calibrated" and cm["hardware"] == "cpu"
    assert cm["calibration"]["sha256"] == cal["sha256"]
    assert cm["calibration"]["source"] == "calibration/cpu/measurements.csv"
    assert cm["terms"]["decode_attention"].startswith("paged_decode_torch/bf16")
    assert cm["terms"]["linear"].startswith("gemm_torch/bf16")
    assert summary["requests"]["completed"] == 12


def test_profile_without_calibration_fails_in_one_line(tmp_path):
    res = CliRunner().invoke(app, ["run", "--set", "cost.model=calibrated", "--set", "simulation.requests=5",
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "needs a calibration in hardware profile 'h100-sxm'" in res.output
