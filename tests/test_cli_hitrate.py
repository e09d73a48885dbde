"""`kvsim hitrate` through typer's CliRunner: trace and scenario inputs, units, CSV and plot, errors."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvsim import cli
from kvsim.cli import app

DATA = Path(__file__).parent / "data"
EXCERPT = DATA / "mooncake_conv_head50.jsonl"
runner = CliRunner()


@pytest.fixture(autouse=True)
def wide_console():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli.console, "_width", 200)
        yield


def test_trace_curve_table_csv_and_plot(tmp_path):
    out = tmp_path / "hr"
    res = runner.invoke(app, ["hitrate", str(EXCERPT), "--capacities", "100,1000,100000",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "50 requests" in res.output and "infinite-cache hit rate" in res.output
    rows = list(csv.DictReader((out / "hitrate.csv").open()))
    assert [int(r["capacity_blocks"]) for r in rows] == [100, 1000, 100000]
    rates = [float(r["hit_rate_tokens"]) for r in rows]
    assert rates == sorted(rates) and rates[-1] > 0  # the excerpt's requests share hash id 0
    assert all(r["capacity_gib"] == "" for r in rows)  # no model given
    assert (out / "hitrate.png").stat().st_size > 0


def test_units_tokens_and_gib(tmp_path):
    res = runner.invoke(app, ["hitrate", str(EXCERPT), "--unit", "tokens", "--capacities", "1600",
                              "--block-size", "32", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    row = next(csv.DictReader((tmp_path / "hitrate.csv").open()))
    assert (row["capacity_blocks"], row["capacity_tokens"]) == ("50", "1600")
    # llama-3-8b bf16: 128 KiB per token, 2 MiB per 16-token block: 1 GiB = 512 blocks
    res = runner.invoke(app, ["hitrate", str(EXCERPT), "--unit", "gib", "--capacities", "1",
                              "--model", "llama-3-8b", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    row = next(csv.DictReader((tmp_path / "hitrate.csv").open()))
    assert (row["capacity_blocks"], row["capacity_gib"]) == ("512", "1")


def test_scenario_input_marks_the_pool(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("workload: {kind: chat}\nsimulation: {requests: 100}\n"
                        "kv: {num_gpu_blocks_override: 3000}\n")
    res = runner.invoke(app, ["hitrate", str(scenario), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "3,000 *" in res.output and "one replica's KV pool" in res.output


def test_sampled_run_and_errors(tmp_path):
    res = runner.invoke(app, ["hitrate", str(EXCERPT), "--sample-rate", "0.5", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for args, msg in ((["--unit", "gib", "--capacities", "10"], "--unit gib: KV bytes per block unknown"),
                      (["--capacities", "10,x"], "--capacities: bad number 'x'"),
                      (["--sample-rate", "0"], "--sample-rate: must be in (0, 1]")):
        res = runner.invoke(app, ["hitrate", str(EXCERPT), *args, "--out", str(tmp_path)])
        assert res.exit_code == 2 and msg in res.output, res.output
    res = runner.invoke(app, ["hitrate", str(tmp_path / "x.txt")])
    assert res.exit_code == 2 and "expected a scenario (.yaml)" in res.output


def test_hitrate_never_overwrites_a_users_files(tmp_path, monkeypatch):
    mine = tmp_path / "analysis"
    mine.mkdir()
    (mine / "hitrate.csv").write_text("my own numbers\n")
    res = runner.invoke(app, ["hitrate", str(EXCERPT), "--out", str(mine)])
    assert res.exit_code == 2 and "not a kvsim output folder" in res.output
    assert (mine / "hitrate.csv").read_text() == "my own numbers\n"
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["hitrate", str(EXCERPT), "--out", "."])
    assert res.exit_code == 2 and "working directory" in res.output
    again = tmp_path / "hr"
    for _ in range(2):  # its own folder is replaced
        assert runner.invoke(app, ["hitrate", str(EXCERPT), "--out", str(again)]).exit_code == 0
    assert sorted(p.name for p in again.iterdir()) == [".kvsim-manifest.json", "hitrate.csv", "hitrate.png"]
