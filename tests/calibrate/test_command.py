"""`kvsim calibrate` end to end on the CPU with the smoke grid, in a temporary profiles folder: measure,
refit, --check against its own baseline (passes) and against a baseline 100x faster (fails)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kvsim.calibrate.measurements import read_measurements, write_measurements
from kvsim.cli import app

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    (root / "hardware_profiles").mkdir()
    text = (REPO / "hardware_profiles" / "cpu.yaml").read_text()
    head = text[: text.index("calibration:")] if "\ncalibration:" in text else text
    (root / "hardware_profiles" / "toy.yaml").write_text(head.replace("# calibration:", "#")
                                                         + "calibration: null\n")
    mp = pytest.MonkeyPatch()
    mp.setenv("KVSIM_HARDWARE_DIR", str(root / "hardware_profiles"))
    model = root / "tiny.yaml"
    model.write_text("name: tiny\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nnum_kv_heads: 2\n"
                     "intermediate_size: 128\nvocab_size: 256\n")
    res = runner.invoke(app, ["calibrate", "--profile", "toy", "--grid", "smoke", "--budget-s", "20",
                              "--model", str(model)])
    assert res.exit_code == 0, res.output
    yield root
    mp.undo()


def test_measure_writes_csv_and_profile(calibrated):
    csv = calibrated / "calibration" / "toy" / "measurements.csv"
    prov, df = read_measurements(csv)
    assert prov["grid"] == "smoke" and prov["model_shapes"] == "tiny"
    kernels = {"paged_decode_torch", "contiguous_decode_sdpa", "prefill_torch", "gemm_torch", "copy_d2d"}
    assert kernels <= set(df.kernel)
    assert (df["median_s"] > 0).all() and (df["timed"].str.len() > 0).all()
    data = yaml.safe_load((calibrated / "hardware_profiles" / "toy.yaml").read_text())
    cal = data["calibration"]
    assert cal["source"] == "calibration/toy/measurements.csv"
    assert cal["terms"]["decode_attention"] == "paged_decode_torch"
    assert data["sources"]  # the rest of the profile is kept


def test_fit_only_refits_without_measuring(calibrated):
    res = runner.invoke(app, ["calibrate", "--profile", "toy", "--fit-only"])
    assert res.exit_code == 0, res.output
    assert "held-out MAPE" in res.output


def test_check_passes_against_itself_and_fails_against_a_faster_baseline(calibrated, tmp_path):
    csv = calibrated / "calibration" / "toy" / "measurements.csv"
    res = runner.invoke(app, ["calibrate", "--check", "toy", "--tolerance", "100"])
    assert res.exit_code == 0, res.output
    prov, df = read_measurements(csv)
    df["median_s"] /= 100
    fast = tmp_path / "fast.csv"
    write_measurements(fast, prov, df.to_dict("records"))
    res = runner.invoke(app, ["calibrate", "--check", "toy", "--out", str(fast), "--tolerance", "0.5"])
    assert res.exit_code == 1, res.output
    assert "SLOWER" in res.output


def test_check_refuses_another_device(calibrated, tmp_path):
    csv = calibrated / "calibration" / "toy" / "measurements.csv"
    other = tmp_path / "other.csv"
    shutil.copy(csv, other)
    other.write_text(other.read_text().replace("# device: ", "# device: Other "))
    res = runner.invoke(app, ["calibrate", "--check", "toy", "--out", str(other)])
    assert res.exit_code == 2 and "baseline measured on" in res.output
