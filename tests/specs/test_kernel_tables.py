"""Kernel timing tables (kvsim/specs/kernel_tables.py): the shipped tables load in one schema with their
licence and provenance, a few rows pinned against the source, and bad files are one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.hardware import list_hardware
from kvsim.specs.kernel_tables import (
    SYSTEMS,
    TABLES,
    calibration_dir,
    has_kernel_tables,
    kernels_dir,
    load_kernel_tables,
)

SHIPPED = sorted(SYSTEMS.values())


def test_every_shipped_profile_has_a_hardware_profile_and_its_tables():
    assert set(SHIPPED) <= set(list_hardware())
    for profile in SHIPPED:
        assert has_kernel_tables(profile), profile
    assert calibration_dir() == Path(__file__).resolve().parents[2] / "calibration"


@pytest.mark.parametrize("profile", SHIPPED)
def test_tables_load_in_the_schema_with_their_provenance_and_licence(profile):
    kt = load_kernel_tables(profile)
    prov = kt.provenance
    assert prov["project"].startswith("NVIDIA AIConfigurator") and len(prov["commit"]) == 40
    assert prov["profile"] == profile and prov["licence"].startswith("Apache-2.0")
    assert "Apache License" in (kernels_dir(profile) / "LICENSE").read_text()
    # every device has the four families the cost model needs first
    assert {"prefill_attention", "decode_attention", "gemm", "allreduce"} <= set(kt.tables)
    for name, df in kt.tables.items():
        assert list(df.columns) == list(TABLES[name].columns)
        info = prov["tables"][name]
        assert len(df) == info["rows"] > 0
        assert info["source"].startswith(f"data/{prov['system']}/") and len(info["sha256"]) == 64
        assert (df["latency_s"] > 0).all()


def test_rows_pinned_against_the_source():
    # the source's first rows (milliseconds), read from aiconfigurator data/h200_sxm/.../0.24.0/
    kt = load_kernel_tables("h200")
    g = kt["gemm"]
    row = g[(g.dtype == "bfloat16") & (g.m == 32768) & (g.n == 65536) & (g.k == 12288)]
    assert row["latency_s"].tolist() == [63.8311767578125 / 1000]
    d = kt["decode_attention"].iloc[0].to_dict()
    assert d == {"kernel": "vllm_flash_attn_fa3", "batch": 32, "context": 1, "query": 1, "q_heads": 64,
                 "kv_heads": 1, "head_dim": 64, "dtype": "bfloat16", "kv_dtype": "bfloat16", "window": 0,
                 "latency_s": 0.011114666859308878 / 1000}
    assert kt.provenance["tables"]["gemm"]["version"] == "0.24.0"


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """A copy of the h200 tables under a KVSIM_CALIBRATION_DIR of the test's own."""
    shutil.copytree(kernels_dir("h200"), tmp_path / "h200" / "kernels")
    monkeypatch.setenv("KVSIM_CALIBRATION_DIR", str(tmp_path))
    return tmp_path / "h200" / "kernels"


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_a_profile_without_tables(copy):
    with pytest.raises(KvsimError) as e:
        load_kernel_tables("l40s")
    assert "hardware profile 'l40s' has no kernel tables" in _one_line(e)


@pytest.mark.parametrize("columns", [False, True])  # (the cost model reads Columns)
def test_truncated_table_is_named(copy, columns):
    path = copy / "gemm.parquet"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(KvsimError) as e:
        load_kernel_tables("h200", columns=columns)
    assert str(path) in _one_line(e) and "PROVENANCE.json" in str(e.value)
    with pytest.raises(KvsimError) as e:
        load_kernel_tables("h200", verify=False, columns=columns)
    assert _one_line(e).startswith(f"{path}: not a readable Parquet kernel table")


@pytest.mark.parametrize("columns", [False, True])
def test_bad_columns_and_latencies_are_named(copy, columns):
    import pandas as pd

    path = copy / "allreduce.parquet"
    df = pd.read_parquet(path)
    df.drop(columns=["gpus"]).to_parquet(path)
    with pytest.raises(KvsimError) as e:
        load_kernel_tables("h200", verify=False, columns=columns)
    assert _one_line(e) == f"{path}: missing column 'gpus' (docs/calibration.md, kernel tables)"
    bad = df.copy()
    bad.loc[3, "latency_s"] = -1.0
    bad.to_parquet(path)
    with pytest.raises(KvsimError) as e:
        load_kernel_tables("h200", verify=False, columns=columns)
    assert _one_line(e) == f"{path}: row 4: latency_s must be a finite number of seconds > 0, got -1.0"
    df.assign(gpus=df["gpus"].astype(float)).to_parquet(path)
    with pytest.raises(KvsimError) as e:
        load_kernel_tables("h200", verify=False, columns=columns)
    assert "column 'gpus' must hold integers" in _one_line(e)


def test_bad_provenance_is_named(copy):
    prov = copy / "PROVENANCE.json"
    prov.write_text("{not json")
    with pytest.raises(KvsimError) as e:
        load_kernel_tables("h200")
    assert _one_line(e).startswith(f"{prov}: not a provenance file")
    prov.write_text(json.dumps({"tables": {"warp_drive": {}}}))
    with pytest.raises(KvsimError) as e:
        load_kernel_tables("h200")
    assert "unknown kernel table 'warp_drive'" in _one_line(e)


def test_a_run_on_a_truncated_table_is_one_line_naming_the_file_and_writes_no_folder(copy, tmp_path):
    from typer.testing import CliRunner

    from kvsim.cli import app

    path = copy / "gemm.parquet"
    path.write_bytes(path.read_bytes()[:1000])
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["run", "--set", "hardware=h200", "--set", "simulation.requests=5",
                                   "--out", str(out), "--no-plots"])
    assert res.exit_code != 0
    lines = [line for line in res.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in res.output, res.output
    assert not out.exists()


def test_lazy_tables_read_each_file_once_per_process_and_hand_out_copies(copy):
    a = load_kernel_tables("h200", lazy=True)
    assert "gemm" in a and not a.tables._frames  # listed, not read
    first = a["allreduce"]
    assert set(a.tables._frames) == {"allreduce"}
    first.loc[first.index[0], "latency_s"] = 123.0  # a caller changing its frame ...
    b = load_kernel_tables("h200", lazy=True)
    assert b["allreduce"]["latency_s"].iloc[0] != 123.0  # ... does not change the next one's
    # a changed file is read again (its size and mtime differ)
    df = b["allreduce"].iloc[:10]
    df.to_parquet(copy / "allreduce.parquet")
    assert len(load_kernel_tables("h200", lazy=True, verify=False)["allreduce"]) == 10
