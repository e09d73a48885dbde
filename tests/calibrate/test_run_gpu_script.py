"""calibration/run_gpu.sh, the one prepared script for a GPU machine, run on the CPU with the smoke grid
into a temporary profiles folder: it checks the kernels, measures, fits and writes both result files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("triton")
REPO = Path(__file__).resolve().parents[2]
TINY_MODEL = ("name: tiny\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nnum_kv_heads: 2\n"
              "intermediate_size: 128\nvocab_size: 256\n")


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash")
def test_run_gpu_script_on_cpu(tmp_path):
    hw = tmp_path / "hardware_profiles"
    hw.mkdir()
    text = (REPO / "hardware_profiles" / "cpu.yaml").read_text()
    (hw / "toy.yaml").write_text(text[: text.index("# calibration:")] + "calibration: null\n")
    env = dict(os.environ, DEVICE="cpu", GRID="smoke", SELFTEST_CASES="1", PYTHON=sys.executable,
               KVSIM_HARDWARE_DIR=str(hw), OUT=str(tmp_path / "out"))
    (tmp_path / "out").mkdir()
    script = str(REPO / "calibration" / "run_gpu.sh")
    model = tmp_path / "tiny.yaml"
    model.write_text(TINY_MODEL)
    res = subprocess.run(["bash", script, "toy", "5", str(model)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "ok   triton" in res.stdout and "held-out MAPE" in res.stdout
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["measurements.csv", "run_gpu.log", "toy.yaml"]
    cal = yaml.safe_load((hw / "toy.yaml").read_text())["calibration"]
    assert cal["provenance"]["grid"] == "smoke"
