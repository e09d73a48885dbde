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


@pytest.mark.parametrize("dtype, blocks", [("{bits: 4}", "2048"), ("{rope: bf16, rest: fp8}", "1024")])
def test_kv_dtype_takes_a_mapping_as_footprint_does(tmp_path, dtype, blocks):
    """--kv-dtype {bits: 4} was refused as an unknown kv dtype (its own message offered the mapping);
    found by the fuzz suite. llama-3-8b: 2 MiB per bf16 block, so 1 GiB is 2,048 4-bit blocks and 1,024
    fp8 ones (no RoPE dims in its KV: all of it is `rest`)."""
    res = runner.invoke(app, ["hitrate", str(EXCERPT), "--unit", "gib", "--capacities", "1", "--model",
                              "llama-3-8b", "--kv-dtype", dtype, "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert next(csv.DictReader((tmp_path / "hitrate.csv").open()))["capacity_blocks"] == blocks


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


def hand_trace(tmp_path):
    """Ten 20-token prompts of one 512-token hash id each, output 1: with --block-size 16 each touches and
    looks up one block, its id's. Ids 0 0 1 0 2 3 1 4 0 2: lookup stack distances 1, 2, 4, 5, 5 (and five
    cold); 20 prompt blocks, 200 prompt tokens."""
    path = tmp_path / "hand.jsonl"
    path.write_text("".join(f'{{"timestamp": {1000 * i}, "input_length": 20, "output_length": 1, '
                            f'"hash_ids": [{h}]}}\n' for i, h in enumerate([0, 0, 1, 0, 2, 3, 1, 4, 0, 2])))
    return path


def rates(path, column):
    return {r["tier"]: float(r[column]) for r in csv.DictReader(path.open())}


def test_tiers_exclusive_and_inclusive_by_hand(tmp_path):
    trace = hand_trace(tmp_path)
    out = tmp_path / "ex"
    res = runner.invoke(app, ["hitrate", str(trace), "--block-size", "16", "--capacities", "1,3,5",
                              "--tiers", "gpu=1,cpu=2,ssd=2", "--sweep-tier", "cpu=0,1,2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "Exclusive KV tiers" in res.output and "tiers.png" in res.output
    # exclusive: gpu (0, 1], cpu (1, 3], ssd (3, 5]: hits 1, 1, 3 of 20 prompt blocks
    assert rates(out / "tiers.csv", "hit_rate_blocks") == pytest.approx(
        {"gpu": 0.05, "cpu": 0.05, "ssd": 0.15, "total": 0.25})
    assert rates(out / "tiers.csv", "hit_rate_tokens") == pytest.approx(
        {"gpu": 0.08, "cpu": 0.08, "ssd": 0.24, "total": 0.4})
    assert rates(out / "tiers.csv", "cumulative_hit_rate_blocks")["cpu"] == pytest.approx(0.1)
    # the chain at (1, 2, 2) is one LRU cache of 5 blocks; gpu + cpu one of 3
    curve = {int(r["capacity_blocks"]): float(r["hit_rate_blocks"])
             for r in csv.DictReader((out / "hitrate.csv").open())}
    assert curve[5] == pytest.approx(0.25) and curve[3] == pytest.approx(0.1)
    sweep = list(csv.DictReader((out / "tiers_sweep.csv").open()))
    assert [float(r["total_hit_rate_blocks"]) * 20 for r in sweep] == pytest.approx([2, 3, 5])
    assert (out / "tiers.png").stat().st_size > 0
    assert sorted(p.name for p in out.iterdir()) == [".kvsim-manifest.json", "hitrate.csv", "hitrate.png",
                                                     "tiers.csv", "tiers.png", "tiers_sweep.csv"]
    res = runner.invoke(app, ["hitrate", str(trace), "--block-size", "16", "--tiers", "gpu=1,cpu=2,ssd=4",
                              "--placement", "inclusive", "--out", str(out)])
    assert res.exit_code == 0, res.output
    # inclusive: gpu (0, 1], cpu (1, 2], ssd (2, 4]: one hit each
    assert rates(out / "tiers.csv", "hit_rate_blocks") == pytest.approx(
        {"gpu": 0.05, "cpu": 0.05, "ssd": 0.05, "total": 0.15})


def test_tiers_gpu_defaults_to_the_scenario_pool(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("workload: {kind: chat}\nsimulation: {requests: 100}\n"
                        "kv: {num_gpu_blocks_override: 3000}\n")
    out = tmp_path / "o"
    res = runner.invoke(app, ["hitrate", str(scenario), "--tiers", "cpu=1,ssd=2", "--unit", "gib",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader((out / "tiers.csv").open()))
    assert [r["tier"] for r in rows] == ["gpu", "cpu", "ssd", "total"]
    assert rows[0]["capacity_blocks"] == "3000" and rows[1]["capacity_gib"] == "1"
    parts = sum(float(r["hit_rate_tokens"]) for r in rows[:3])
    assert parts == pytest.approx(float(rows[3]["hit_rate_tokens"]))
    sweep = list(csv.DictReader((out / "tiers_sweep.csv").open()))
    assert sweep[0]["tier"] == "cpu" and sweep[0]["capacity_blocks"] == "0" and len(sweep) > 10
    totals = [float(r["total_hit_rate_tokens"]) for r in sweep]
    assert totals == sorted(totals)


@pytest.mark.parametrize(("args", "msg"), [
    (["--tiers", "gpu=1,hbm=5"], "--tiers: unknown tier 'hbm'"),
    (["--tiers", "gpu=1,cpu=-5"], "--tiers: cpu: capacity must be a finite number >= 0, got '-5'"),
    (["--tiers", "gpu=1,ssd=4,cpu=2"], "--tiers: 'cpu' after 'ssd': list tiers top to bottom"),
    (["--tiers", "gpu=4,cpu=2", "--placement", "inclusive"],
     "--tiers: with --placement inclusive each tier must be at least as large as the tiers above it"),
    (["--tiers", "gpu=4,cpu=8", "--placement", "inclusive", "--sweep-tier", "cpu=0,2"],
     "--sweep-tier: with --placement inclusive each tier must be at least as large"),
    (["--tiers", "cpu=4"], "--tiers: no KV pool to default the gpu tier to"),
    (["--tiers", "gpu=4", "--placement", "mirror"], "--placement: expected exclusive or inclusive"),
    (["--placement", "inclusive"], "--placement: only with --tiers or --sweep-tier"),
    (["--tiers", "gpu=4", "--sweep-tier", "cpu"], "--sweep-tier: expected NAME=CAPACITY,CAPACITY,..."),
])
def test_tier_errors_are_one_line_exit_2(tmp_path, args, msg):
    res = runner.invoke(app, ["hitrate", str(hand_trace(tmp_path)), *args, "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and msg in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()
