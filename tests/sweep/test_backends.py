"""kvsim/sweep/backends.py and `kvsim sweep`: the process pool and a local Ray instance give the same
rows; resuming skips what a folder holds; a Ray address that does not answer is a one-line error."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.errors import KvsimError
from kvsim.sweep.backends import check_address, run_tasks
from kvsim.sweep.grid import load_sweep

SWEEP = """
set: {simulation.requests: 20}
grid: {kv.block_size: [16, 32], workload.arrival.rate: [2, 8]}
repeats: 2
"""


def _sweep(tmp_path, text=SWEEP):
    p = tmp_path / "sweep.yaml"
    p.write_text(text)
    return p


def test_process_pool_rows_equal_serial(tmp_path):
    sw = load_sweep(_sweep(tmp_path))
    serial = {t.scenario_hash: row for t, row in run_tasks(sw.scenario, sw.tasks, "process", 1)}
    pooled = {t.scenario_hash: row for t, row in run_tasks(sw.scenario, sw.tasks, "process", 2)}
    assert serial == pooled and len(serial) == 8


def test_sweep_command_resumes(tmp_path):
    path, out = _sweep(tmp_path), tmp_path / "out"
    first = CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), "--jobs", "1"])
    assert first.exit_code == 0, first.output
    df = pd.read_parquet(out / "sweep.parquet")
    assert len(df) == 8 and list(df.columns[:4]) == ["point", "repeat", "seed", "scenario_hash"]
    assert {"point.kv.block_size", "point.workload.arrival.rate", "latency.ttft_s.p99"} <= set(df.columns)
    again = CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), "--jobs", "1"])
    assert "8 already in" in again.output and "0 to run" in again.output
    assert pd.read_parquet(out / "sweep.parquet").equals(df)
    _sweep(tmp_path, SWEEP.replace("[2, 8]", "[2, 8, 16]"))  # extend the grid: only the new points run
    more = CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), "--jobs", "1"])
    assert "8 already in" in more.output and "4 to run" in more.output
    grown = pd.read_parquet(out / "sweep.parquet")
    assert len(grown) == 12
    old = grown[grown["point.workload.arrival.rate"] != 16].drop(columns=["point"]).reset_index(drop=True)
    assert old.equals(df.drop(columns=["point"]).reset_index(drop=True))


def test_unreachable_ray_address_is_one_line_within_seconds(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(KvsimError, match="no Ray cluster answers there"):
        check_address("127.0.0.1:1")
    assert time.monotonic() - t0 < 10
    with pytest.raises(KvsimError, match="expected HOST:PORT"):
        check_address("nowhere")
    res = CliRunner().invoke(app, ["sweep", str(_sweep(tmp_path)), "--backend", "ray", "--address",
                                   "127.0.0.1:1", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "error: --address '127.0.0.1:1': no Ray cluster answers" in res.output
    assert not (tmp_path / "o").exists()


def test_unknown_backend(tmp_path):
    res = CliRunner().invoke(app, ["sweep", str(_sweep(tmp_path)), "--backend", "dask", "--out",
                                   str(tmp_path / "o")])
    assert res.exit_code != 0 and "--backend 'dask': choose one of process, ray" in res.output


def test_local_ray_gives_the_process_pool_rows(tmp_path):
    ray = pytest.importorskip("ray")
    sw = load_sweep(_sweep(tmp_path))
    pooled = {t.scenario_hash: row for t, row in run_tasks(sw.scenario, sw.tasks, "process", 2)}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        on_ray = {t.scenario_hash: row for t, row in run_tasks(sw.scenario, sw.tasks, "ray", 2)}
    finally:
        ray.shutdown()
    assert on_ray == pooled


def test_ray_missing_says_how_to_install(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    sw = load_sweep(_sweep(tmp_path))
    with pytest.raises(KvsimError, match=r"needs Ray, which is not installed: pip install 'kvsim\[ray\]'"):
        list(run_tasks(sw.scenario, sw.tasks, "ray"))


def test_ray_start_failure_is_one_line(tmp_path, monkeypatch):
    """A cluster that accepts the connection but is no Ray (or Ray failing to start) is a KvsimError."""
    ray = pytest.importorskip("ray")

    def refuse(**kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379\nmore detail")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr("kvsim.sweep.backends.check_address", lambda address: None)
    sw = load_sweep(_sweep(tmp_path))
    with pytest.raises(KvsimError, match=r"^--address '10.0.0.1:6379': Ray did not start: Failed to connect "
                                         r"to Ray cluster at 10.0.0.1:6379$"):
        list(run_tasks(sw.scenario, sw.tasks, "ray", 2, "10.0.0.1:6379"))
