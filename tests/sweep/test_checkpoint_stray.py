"""`kvsim sweep`: a file kvsim did not write appearing in the output folder mid-sweep (a file browser's
`.DS_Store`) is left untouched by the checkpoints, and the sweep finishes with all its rows."""

from __future__ import annotations

import pandas as pd
from typer.testing import CliRunner

import kvsim.cli as cli
import kvsim.sweep.backends as backends
from kvsim.cli import app


def test_stray_file_mid_sweep_is_kept_and_sweep_finishes(tmp_path, monkeypatch):
    grid = tmp_path / "grid.yaml"
    grid.write_text("set: {simulation.requests: 20}\ngrid:\n  kv.block_size: [16, 32]\n"
                    "  workload.arrival.rate: [2, 4]\n", encoding="utf-8")
    out = tmp_path / "out"
    real = backends.run_tasks

    def run_tasks(*args, **kwargs):
        for i, item in enumerate(real(*args, **kwargs)):
            if i == 1:  # after the first checkpoint wrote the folder
                (out / ".DS_Store").write_bytes(b"finder")
            yield item

    monkeypatch.setattr(backends, "run_tasks", run_tasks)
    monkeypatch.setattr(cli, "CHECKPOINT_S", -1.0)  # checkpoint after every row
    res = CliRunner().invoke(app, ["sweep", str(grid), "--out", str(out), "--jobs", "1", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert len(pd.read_parquet(out / "sweep.parquet")) == 4
    assert (out / ".DS_Store").read_bytes() == b"finder"
    assert not [p.name for p in tmp_path.iterdir() if ".old-" in p.name or ".tmp-" in p.name]


def test_a_rerun_into_a_sweep_folder_holding_a_stray_file_resumes_and_keeps_it(tmp_path):
    """The stray file stays after the sweep, so resuming or extending the sweep must not be refused for it
    (a folder without kvsim's manifest, or with a file kvsim wrote changed, still is)."""
    grid = tmp_path / "grid.yaml"
    grid.write_text("set: {simulation.requests: 20}\ngrid: {kv.block_size: [16, 32]}\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["sweep", str(grid), "--out", str(out), "--jobs", "1", "--no-progress"]
    assert CliRunner().invoke(app, args).exit_code == 0
    (out / ".DS_Store").write_bytes(b"finder")
    grid.write_text("set: {simulation.requests: 20}\ngrid: {kv.block_size: [16, 32, 64]}\n", encoding="utf-8")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "3 runs: 2 already in" in res.output
    assert len(pd.read_parquet(out / "sweep.parquet")) == 3 and (out / ".DS_Store").read_bytes() == b"finder"
    (out / "sweep.json").write_text("{}")  # a file kvsim wrote, changed: still refused
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "'sweep.json' was changed after kvsim wrote it" in res.output
