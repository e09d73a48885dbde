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
