"""Regression gates on every hardware profile that carries a calibration (hardware_profiles/*.yaml with a
`calibration` key, fitted from calibration/<device>/measurements.csv): the stored measurements are the
ones fitted, refitting them reproduces the stored parameters, each kernel's held-out MAPE meets the gate
stated in the profile, and the fitted and measured numbers are physically sane."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kvsim.calibrate.command import fit_profile, repo_root
from kvsim.calibrate.fit import MAPE_CEILING
from kvsim.calibrate.measurements import file_sha256, read_measurements
from kvsim.specs.hardware import list_hardware, load_hardware

pytest.importorskip("scipy")
PROFILES = [name for name in list_hardware() if load_hardware(name).calibration]
MONOTONE_SLACK = 0.10
"""A measured time may fall by at most this fraction when batch or context grows (timing noise)."""


def test_the_cpu_profile_is_calibrated():
    assert "cpu" in PROFILES


def stored(name: str) -> tuple[dict, Path]:
    cal = load_hardware(name).calibration
    return cal, repo_root() / cal["source"]


@pytest.mark.parametrize("name", PROFILES)
def test_measurements_are_the_ones_fitted(name):
    cal, csv = stored(name)
    assert file_sha256(csv) == cal["sha256"]
    prov, _ = read_measurements(csv)
    assert prov["device"] == cal["provenance"]["device"]
    for key in ("driver", "torch", "triton", "kvsim", "date", "method"):
        assert prov[key]


@pytest.mark.parametrize("name", PROFILES)
def test_refit_reproduces_the_stored_parameters(name):
    cal, csv = stored(name)
    refit = fit_profile(name, csv)
    assert refit["terms"] == cal["terms"]
    assert refit["kernels"].keys() == cal["kernels"].keys()
    for kernel, by_dtype in cal["kernels"].items():
        for dtype, fit in by_dtype.items():
            new = refit["kernels"][kernel][dtype]
            assert new["params"] == pytest.approx(fit["params"], rel=1e-5, abs=1e-30), (kernel, dtype)
            assert new["heldout_mape"] == pytest.approx(fit["heldout_mape"], rel=1e-5)


@pytest.mark.parametrize("name", PROFILES)
def test_every_kernel_meets_its_gate(name):
    cal, _ = stored(name)
    for kernel, by_dtype in cal["kernels"].items():
        for dtype, fit in by_dtype.items():
            assert fit["heldout_mape"] <= fit["mape_gate"], (kernel, dtype)
            assert fit["heldout_mape"] <= MAPE_CEILING, (kernel, dtype)
            assert fit["heldout_worst"] >= fit["heldout_mape"]
            assert all(v >= 0 for v in fit["params"].values())  # so predictions grow with every feature


@pytest.mark.parametrize("name", PROFILES)
def test_fitted_rates_are_below_the_datasheet(name):
    hw = load_hardware(name)
    over = []
    for kernel, by_dtype in hw.calibration["kernels"].items():
        for dtype, fit in by_dtype.items():
            d = fit["derived"]
            for key in ("effective_bandwidth", "weight_bandwidth", "bandwidth"):
                if d.get(key, 0) >= hw.hbm_bandwidth:
                    over.append(f"{kernel}/{dtype} {key} {d[key]:.3g} >= datasheet {hw.hbm_bandwidth:.3g}")
            if d.get("effective_flops", 0) >= hw.flops(dtype):
                msg = f"{kernel}/{dtype} {d['effective_flops']:.3g} >= datasheet {hw.flops(dtype):.3g} FLOP/s"
                over.append(msg)
    assert not over, "\n".join(over)


def _monotone(df: pd.DataFrame, keys: list[str], axis: str) -> list[str]:
    bad = []
    for key, g in df.groupby(keys):
        t = g.sort_values(axis)["median_s"].to_numpy()
        for a, b in zip(t, t[1:], strict=False):
            if b < a * (1 - MONOTONE_SLACK):
                bad.append(f"{key}: {a:.3g} -> {b:.3g} s as {axis} grows")
    return bad


@pytest.mark.parametrize("name", PROFILES)
def test_measured_times_grow_with_batch_and_context(name):
    _, csv = stored(name)
    _, df = read_measurements(csv)
    dec = df[(df["kernel"].str.contains("decode")) & (df["ctx_kind"] == "uniform")].copy()
    dec["ctx_per_seq"] = dec["ctx_total"] // dec["batch"]
    layout = ["kernel", "dtype", "q_heads", "kv_heads", "head_dim", "block_size"]
    bad = _monotone(dec, layout + ["ctx_per_seq"], "batch")
    bad += _monotone(dec, layout + ["batch"], "ctx_per_seq")
    assert not bad, "\n".join(bad)
