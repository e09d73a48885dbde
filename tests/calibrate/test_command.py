"""`kvsim calibrate` end to end on the CPU with the smoke grid, in a temporary profiles folder: measure into
an output folder, install, refit, --check against its own baseline (passes) and against a baseline 100x
faster (fails); the shipped profile changes only with --install, never for a worse fit unless forced."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kvsim.calibrate.measurements import read_measurements, write_measurements
from kvsim.calibrate.profile import write_calibration
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
                              "--model", str(model), "--out", str(root / "run"), "--install"])
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


def test_output_folder_holds_the_measurements_and_the_fitted_profile(calibrated):
    run = calibrated / "run"
    assert sorted(p.name for p in run.iterdir()) == [".kvsim-manifest.json", "measurements.csv", "toy.yaml"]
    assert (run / "measurements.csv").read_bytes() == (
        calibrated / "calibration" / "toy" / "measurements.csv").read_bytes()
    assert (run / "toy.yaml").read_text() == (calibrated / "hardware_profiles" / "toy.yaml").read_text()


def test_fit_only_refits_without_measuring_or_installing(calibrated, tmp_path):
    shipped = calibrated / "hardware_profiles" / "toy.yaml"
    before = shipped.read_bytes()
    res = runner.invoke(app, ["calibrate", "--profile", "toy", "--fit-only", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "held-out MAPE" in res.output and "is unchanged" in res.output
    assert shipped.read_bytes() == before
    assert (tmp_path / "o" / "toy.yaml").is_file()


def test_calibrate_out_must_be_a_folder_kvsim_owns(calibrated, tmp_path):
    notes = tmp_path / "notes.csv"
    notes.write_text("mine\n")
    res = runner.invoke(app, ["calibrate", "--profile", "toy", "--fit-only", "--out", str(notes)])
    assert res.exit_code == 2 and "not a folder" in res.output
    assert notes.read_text() == "mine\n"


def test_install_refuses_a_worse_fit_and_keeps_the_previous_one(calibrated, tmp_path):
    shipped = calibrated / "hardware_profiles" / "toy.yaml"
    stored = yaml.safe_load(shipped.read_text())["calibration"]
    better = dict(stored, provenance=dict(stored["provenance"], grid="cpu"))
    for by_dtype in better["kernels"].values():
        for fit in by_dtype.values():
            fit["heldout_mape"] = 0.0
    write_calibration(shipped, better, "pretend a real grid fitted perfectly")
    before = shipped.read_bytes()
    res = runner.invoke(app, ["calibrate", "--profile", "toy", "--fit-only", "--out", str(tmp_path / "a"),
                              "--install"])
    assert res.exit_code == 2 and "refusing a fit worse than the stored one" in res.output
    assert shipped.read_bytes() == before
    res = runner.invoke(app, ["calibrate", "--profile", "toy", "--fit-only", "--out", str(tmp_path / "b"),
                              "--install", "--force"])
    assert res.exit_code == 0, res.output
    backups = list((calibrated / "calibration" / "toy" / "previous").iterdir())
    assert len(backups) == 1 and (backups[0] / "toy.yaml").read_bytes() == before
    assert yaml.safe_load(shipped.read_text())["calibration"]["provenance"]["grid"] == "smoke"


def test_check_passes_against_itself_and_fails_against_a_faster_baseline(calibrated, tmp_path):
    csv = calibrated / "calibration" / "toy" / "measurements.csv"
    res = runner.invoke(app, ["calibrate", "--check", "toy", "--tolerance", "100"])
    assert res.exit_code == 0, res.output
    prov, df = read_measurements(csv)
    df["median_s"] /= 100
    fast = tmp_path / "fast.csv"
    write_measurements(fast, prov, df.to_dict("records"))
    res = runner.invoke(app, ["calibrate", "--check", "toy", "--measurements", str(fast), "--tolerance",
                              "0.5"])
    assert res.exit_code == 1, res.output
    assert "SLOWER" in res.output


def test_check_refuses_another_device(calibrated, tmp_path):
    csv = calibrated / "calibration" / "toy" / "measurements.csv"
    other = tmp_path / "other.csv"
    shutil.copy(csv, other)
    other.write_text(other.read_text().replace("# device: ", "# device: Other "))
    res = runner.invoke(app, ["calibrate", "--check", "toy", "--measurements", str(other)])
    assert res.exit_code == 2 and "baseline measured on" in res.output


def test_the_gate_applies_to_the_kernel_that_times_a_term_not_to_an_outranked_fallback(tmp_path, monkeypatch):
    """The stored H200 run: the Triton decode kernel times decode_attention and misses the ceiling (its
    held-out MAPE is ~0.47), so the fit is refused naming it; the torch reference it outranks (fp16 0.359)
    is not named. Without the Triton rows the torch reference times the term and is gated itself."""
    from kvsim.calibrate.command import fit_profile
    from kvsim.errors import KvsimError

    monkeypatch.delenv("KVSIM_HARDWARE_DIR", raising=False)  # the module's fixture points it at a toy repo
    csv = REPO / "calibration" / "h200" / "measurements.csv"
    with pytest.raises(KvsimError) as err:
        fit_profile("h200", csv)
    msg = str(err.value)
    assert "paged_decode_triton/bf16" in msg and "paged_decode_torch" not in msg
    prov, df = read_measurements(csv)
    rows = df[df["kernel"] != "paged_decode_triton"].to_dict("records")
    write_measurements(tmp_path / "m.csv", prov, rows)
    with pytest.raises(KvsimError, match="paged_decode_torch/fp16 0.359"):
        fit_profile("h200", tmp_path / "m.csv")
