import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from kvsim.errors import KvsimError
from kvsim.metrics import plots
from kvsim.metrics.report import headline, json_text, render_report, write_outputs
from kvsim.metrics.summary import build_summary

FILES = {"summary.json", "requests.parquet", "timeline.parquet", "report.md", "run.json",
         "kv_usage.png", "concurrency.png", "latency_cdf.png", "latency_over_time.png", "report.html",
         ".kvsim-manifest.json"}
DETERMINISTIC = FILES - {"run.json", ".kvsim-manifest.json"}


@pytest.fixture
def run(frames, meta):
    requests, timeline = frames
    return build_summary(requests, timeline, meta), requests, timeline


def _siblings(parent):
    return sorted(p.name for p in parent.iterdir())


def test_write_outputs_creates_all_files(tmp_path, run):
    summary, requests, timeline = run
    out = write_outputs(tmp_path / "out", summary, requests, timeline, {"wall_s": 0.25})
    assert out == (tmp_path / "out").absolute()
    assert {p.name for p in out.iterdir()} == FILES
    assert _siblings(tmp_path) == ["out"]  # no temp folder left behind
    assert json.loads((out / "summary.json").read_text()) == json.loads(json_text(summary))
    assert (out / "summary.json").read_text().endswith("}\n")
    assert json.loads((out / "run.json").read_text()) == {"wall_s": 0.25}
    report = (out / "report.md").read_text()
    assert "# kvsim report: hand" in report
    assert "| requests completed / total | 2 / 4 |" in report
    assert "![KV cache usage](kv_usage.png)" in report


def test_parquet_roundtrip_without_index(tmp_path, run):
    summary, requests, timeline = run
    out = write_outputs(tmp_path / "out", summary, requests, timeline, {})
    back = pd.read_parquet(out / "requests.parquet")
    pd.testing.assert_frame_equal(back, requests)
    tl = pq.read_table(out / "timeline.parquet")
    assert tl.column_names == list(timeline.columns)  # no __index_level_0__
    assert tl.schema.metadata is None or b"pandas" not in tl.schema.metadata


def test_outputs_byte_identical_across_writes(tmp_path, run):
    summary, requests, timeline = run
    a = write_outputs(tmp_path / "a", summary, requests, timeline, {"wall_s": 1.0})
    first = {name: (a / name).read_bytes() for name in DETERMINISTIC}
    b = write_outputs(tmp_path / "b", summary, requests, timeline, {"wall_s": 2.0})
    write_outputs(a, summary, requests, timeline, {"wall_s": 3.0})  # rewrite in place
    for name, data in first.items():
        assert (b / name).read_bytes() == data, name
        assert (a / name).read_bytes() == data, name


def test_earlier_output_is_replaced_but_a_user_file_in_it_blocks_that(tmp_path, run):
    out = write_outputs(tmp_path / "out", *run, {"wall_s": 1.0})
    write_outputs(out, *run, {"wall_s": 2.0})
    assert json.loads((out / "run.json").read_text()) == {"wall_s": 2.0}
    (out / "stale.txt").write_text("the user's")
    with pytest.raises(KvsimError, match="'stale.txt', which kvsim did not write"):
        write_outputs(out, *run, {})
    assert (out / "stale.txt").read_text() == "the user's"
    assert _siblings(tmp_path) == ["out"]


def test_refuses_to_replace_unrelated_folder(tmp_path, run):
    out = tmp_path / "home"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    (out / "summary.json").write_text("{}\n")  # a stray summary.json does not make it kvsim's
    with pytest.raises(KvsimError, match="not a kvsim output folder"):
        write_outputs(out, *run, {})
    assert (out / "notes.txt").read_text() == "keep me"
    assert _siblings(tmp_path) == ["home"]
    empty = tmp_path / "empty"
    empty.mkdir()
    write_outputs(empty, *run, {})
    assert {p.name for p in empty.iterdir()} == FILES


def test_failure_in_plotting_leaves_no_out_dir(tmp_path, run, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(plots, "write_plots", boom)
    with pytest.raises(RuntimeError, match="plotting failed"):
        write_outputs(tmp_path / "out", *run, {})
    assert _siblings(tmp_path) == []


def test_failure_keeps_previous_outputs(tmp_path, run, monkeypatch):
    out = write_outputs(tmp_path / "out", *run, {})
    previous = (out / "summary.json").read_bytes()
    monkeypatch.setattr(plots, "write_plots", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        write_outputs(out, *run, {"wall_s": 9})
    assert _siblings(tmp_path) == ["out"]
    assert (out / "summary.json").read_bytes() == previous


def test_out_path_that_is_a_file(tmp_path, run):
    target = tmp_path / "out"
    target.write_text("x")
    with pytest.raises(KvsimError, match="not a folder"):
        write_outputs(target, *run, {})
    assert target.read_text() == "x"


def test_headline_and_inline_model(run):
    summary = dict(run[0])
    assert headline(summary) == ("llama-3-8b on h100-sxm · TP=1 x 2 replica(s) · workload chat at 1.5 "
                                 "sessions/s · seed 7 · cost model roofline · kvsim 0.1.0")
    summary["model"] = {"name": "tiny", "num_layers": 2}
    summary["scenario"] = None
    assert headline(summary).startswith("tiny on h100-sxm · TP=? x 2 replica(s)")
    assert render_report(summary, []).startswith("# kvsim report: run\n")


def test_headline_names_a_cluster_pools():
    summary = {"model": "llama-3.1-8b", "hardware": "h100-sxm",
               "scenario": {"cluster": {"pools": []}, "workload": {"kind": "synthetic"}},
               "fleet": {"pools": [{"replicas": 2, "role": "prefill", "hardware": "h100-sxm",
                                    "tensor_parallel_size": 1},
                                   {"replicas": 1, "role": "decode", "hardware": "h200",
                                    "tensor_parallel_size": 2}]}}
    assert headline(summary).startswith(
        "llama-3.1-8b on 2 x prefill h100-sxm TP=1 + 1 x decode h200 TP=2 · workload synthetic")
