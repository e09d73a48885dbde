"""`kvsim compare`: --vary parsing, the variant grid, identical request streams across layout variants,
the table, CSV, JSON and plots, and the CLI command."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.errors import KvsimError
from kvsim.sweep.columns import COLUMNS
from kvsim.sweep.compare import (
    Variant,
    compare_frame,
    grid,
    parse_vary,
    run_compare,
    streams_identical,
    table_rows,
    write_compare,
)

SCENARIO = """
name: tiny
model: llama-3-8b
hardware: h100-sxm
kv: {block_size: 16, num_gpu_blocks_override: 40, check_invariants: true}
scheduler: {max_num_seqs: 32, max_num_batched_tokens: 1024, max_model_len: 256}
workload:
  kind: synthetic
  arrival: {process: poisson, rate: 50.0}
  prompt_len: {dist: uniform, low: 10, high: 100}
  output_len: {dist: uniform, low: 5, high: 120}
simulation: {seed: 3, requests: 40}
"""
LAYOUTS = "kv.layout=paged,contiguous:max,contiguous:pow2,contiguous:oracle"


@pytest.fixture
def scenario(tmp_path):
    p = tmp_path / "tiny.yaml"
    p.write_text(SCENARIO)
    return p


def test_parse_vary_and_grid():
    axes = parse_vary(["kv.layout=paged, contiguous:max", "kv.block_size=16,32"])
    assert axes == [("kv.layout", ["paged", "contiguous:max"]), ("kv.block_size", [16, 32])]
    variants = grid(axes)
    assert [v.label for v in variants] == [
        "kv.layout=paged, kv.block_size=16", "kv.layout=paged, kv.block_size=32",
        "kv.layout=contiguous:max, kv.block_size=16", "kv.layout=contiguous:max, kv.block_size=32"]
    assert variants[1].overrides == ["kv.layout=paged", "kv.block_size=32"]
    assert variants[1].short_label == "paged, 32"
    assert Variant((("kv.check_invariants", True),)).overrides == ["kv.check_invariants=true"]


@pytest.mark.parametrize("items, message", [
    (["kv.layout"], "expected KEY=V1,V2"),
    (["=a,b"], "expected KEY=V1,V2"),
    (["kv.layout="], "no values"),
    (["a=1", "a=2"], "varied twice"),
    ([], "at least one"),
])
def test_parse_vary_errors(items, message):
    with pytest.raises(KvsimError, match=message):
        parse_vary(items)


def test_layouts_run_on_identical_streams(scenario, tmp_path):
    results = run_compare(scenario, [LAYOUTS])
    assert [r.variant.label for r in results] == [f"kv.layout={x}" for x in LAYOUTS[10:].split(",")]
    assert streams_identical(results)
    for r in results:
        assert r.summary["requests"]["completed"] == 40
        assert sum(r.summary["kv"]["breakdown"].values()) == pytest.approx(1.0)
        assert r.summary["scenario"]["kv"]["layout"] == r.variant.values[0][1]
    paged, cmax = results[0].summary, results[1].summary
    # max reserves max_model_len = 256 slots: at most 640 // 256 = 2 requests at once
    assert cmax["concurrency"]["max"] == 2 and paged["concurrency"]["max"] > 2
    assert paged["kv"]["breakdown"]["reservation"] == 0 and cmax["kv"]["breakdown"]["reservation"] > 0

    frame = compare_frame(results)
    assert list(frame["kv.layout"]) == ["paged", "contiguous:max", "contiguous:pow2", "contiguous:oracle"]
    assert frame["stream"].nunique() == 1
    files = write_compare(tmp_path / "out", results)
    csv = pd.read_csv(tmp_path / "out" / "compare.csv")
    assert len(csv) == 4 and "kv.breakdown.token_states" in csv.columns
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert doc["identical_streams"] and len(doc["variants"]) == 4
    for name in files:
        assert (tmp_path / "out" / name).stat().st_size > 0
    header, rows = table_rows(results)
    assert header[0] == "kv.layout" and len(header) == len(COLUMNS) + 1 and rows[0][0] == "paged"
    assert "attn mass" not in header and "kv_bound_concurrency" not in csv.columns  # no sparsity section

    again = run_compare(scenario, [LAYOUTS])
    write_compare(tmp_path / "again", again)
    for name in files:
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


def test_workload_axis_changes_the_stream(scenario):
    results = run_compare(scenario, ["workload.arrival.rate=5,50"], ["simulation.requests=10"])
    assert not streams_identical(results)


def test_bad_variant_fails_before_running(scenario):
    with pytest.raises(KvsimError, match="variant kv.layout=tiled: .*kv.layout"):
        run_compare(scenario, ["kv.layout=paged,tiled"])


def test_sparsity_policies_add_their_columns(scenario):
    results = run_compare(scenario, ["kv.sparsity.policy=none,streaming"],
                          ["kv.sparsity.budget_tokens=32", "kv.sparsity.min_tokens=16",
                           "simulation.requests=12"])
    assert streams_identical(results)
    header, rows = table_rows(results)
    labels = ["KV-bound conc.", "KV saved", "gain", "attn mass", "re-read lost", "recalled GiB", "stall s"]
    assert set(labels) <= set(header)
    cells = [dict(zip(header, row, strict=True)) for row in rows]
    assert [cells[0][k] for k in labels[1:]] == ["0.0%", "1.00x", "100.0%", "0.0%", "0.0", "0"]  # none
    streaming = results[1].summary["sparsity"]
    mass = cells[1]["attn mass"]
    assert mass == f"{100 * streaming['attention_mass_retained']:.1f}%" and mass != "100.0%"


def test_cli_compare(scenario, tmp_path):
    out = tmp_path / "cmp"
    res = CliRunner().invoke(app, ["compare", str(scenario), "--vary", "kv.layout=paged,contiguous:oracle",
                                   "--set", "simulation.requests=12", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "request streams: identical" in res.output and "contiguous:oracle" in res.output
    assert (out / "compare.csv").exists() and (out / "compare_breakdown.png").exists()
    bad = CliRunner().invoke(app, ["compare", str(scenario), "--vary", "kv.layout"])
    assert bad.exit_code == 2 and "expected KEY=V1,V2" in bad.output


def test_cli_compare_checks_its_output_folder_before_simulating(scenario, tmp_path, monkeypatch):
    from kvsim.sweep import compare

    monkeypatch.setattr(compare, "run_variant", lambda *a: pytest.fail("simulated before checking --out"))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "compare.csv").write_text("the user's table\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    for out, message in ((mine, "not a kvsim output folder"), (notes, "not a folder")):
        res = CliRunner().invoke(app, ["compare", str(scenario), "--vary", "kv.block_size=16,32",
                                       "--out", str(out)])
        assert res.exit_code == 2 and message in res.output
    assert (mine / "compare.csv").read_text() == "the user's table\n" and notes.read_text() == "mine"


@pytest.mark.parametrize("value", ["123", "[red]", ":smile:", ":thumbs_up: ok", "[/]", "a\x1bb", True, 16,
                                   0.5, "contiguous:max", [1, 2]])
def test_variant_overrides_give_back_the_parsed_value(value):
    from kvsim.scenario import parse_value
    from kvsim.sweep.compare import Variant

    (item,) = Variant((("name", value),)).overrides
    assert parse_value(item.partition("=")[2]) == value


def test_vary_values_may_be_flow_lists_and_mappings():
    axes = parse_vary(["kv.tiers=[],[{medium: cpu, capacity_gb: 64}]", "kv.block_size=16,32"])
    assert axes[0] == ("kv.tiers", [[], [{"medium": "cpu", "capacity_gb": 64}]])
    assert axes[1] == ("kv.block_size", [16, 32])


def test_parse_vary_takes_python_axes_as_given():
    """kvsim.compare hands its axes over as (key, values): a string with a comma stays one value."""
    assert parse_vary([("name", ["a,b", "c"]), ("kv.block_size", (16,))]) == [("name", ["a,b", "c"]),
                                                                              ("kv.block_size", [16])]
    with pytest.raises(KvsimError, match="varied twice"):
        parse_vary([("name", ["a"]), ("name", ["b"])])
