"""kvsim/api.py: kvsim.run / kvsim.load, the Python API, give what `kvsim run` writes."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import kvsim
from kvsim.cli import app
from kvsim.errors import KvsimError

WORKLOADS = Path(__file__).parents[1] / "workloads"


def test_run_matches_the_command_line(tmp_path):
    out = tmp_path / "out"
    cli = CliRunner().invoke(app, ["run", str(WORKLOADS / "rag.yaml"), "--set", "simulation.requests=40",
                                   "--set", "kv.block_size=32", "--no-plots", "--out", str(out)])
    assert cli.exit_code == 0, cli.output
    res = kvsim.run(WORKLOADS / "rag.yaml", simulation__requests=40, kv__block_size=32)
    assert json.loads((out / "summary.json").read_text()) == json.loads(json.dumps(res.summary))
    pd.testing.assert_frame_equal(res.requests, pd.read_parquet(out / "requests.parquet"))
    assert len(res.timeline) == len(pd.read_parquet(out / "timeline.parquet"))
    assert res.scenario.kv.block_size == 32
    assert "40/40 requests" in repr(res)


def test_overrides_by_dict_dicts_and_scenarios():
    a = kvsim.run(overrides={"simulation.requests": 20, "slo": {"ttft_s": {"p99": 1.0}}})
    assert a.summary["goodput"]["requests"] == int(a.requests["meets_slo"].sum())
    b = kvsim.run({"simulation": {"requests": 20}, "slo": {"ttft_s": {"p99": 1.0}}})
    assert b.summary == a.summary
    c = kvsim.run(a.scenario)  # a Scenario runs again as it is
    assert c.summary == a.summary
    assert kvsim.load(a.scenario, simulation__seed=3).simulation.seed == 3


@pytest.mark.parametrize("kwargs, needle", [
    ({"kv__blok_size": 16}, "kv.blok_size: unknown key"),
    ({"slo": {"ttfx": {"p99": 1}}}, "unknown metric 'ttfx'"),
    ({"overrides": {"kv..x": 1}}, "empty part"),
])
def test_errors_are_kvsim_errors(kwargs, needle):
    with pytest.raises(KvsimError, match=needle):
        kvsim.run(**kwargs)


def test_import_kvsim_stays_light():
    code = "import sys, kvsim; print('pandas' in sys.modules, 'kvsim.api' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        kvsim.nope  # noqa: B018


def test_compare_sweep_and_plan_from_python():
    df = kvsim.compare(None, {"kv.block_size": [16, 32]}, {"simulation.requests": 20})
    assert list(df["kv.block_size"]) == ["16", "32"] and df["stream"].nunique() == 1
    table = kvsim.sweep({"set": {"simulation.requests": 20}, "grid": {"workload.arrival.rate": [2, 4]},
                         "repeats": 2})
    assert len(table) == 4 and list(table["point.workload.arrival.rate"]) == [2, 2, 4, 4]
    assert list(table["seed"]) == [0, 1, 0, 1]
    importlib.import_module("kvsim.sweep.grid")  # kvsim.sweep is then the package, and still callable
    assert kvsim.sweep({"set": {"simulation.requests": 20}}).shape[0] == 1
    doc = kvsim.plan(None, "min_replicas", {"ttft_s": {"p50": 5.0}},
                     {"simulation.requests": 600, "workload.arrival.rate": 2}, max_extension=2)
    assert doc["answer"] == 1 and doc["find"] == "min_replicas"


def test_kvsim_error_is_importable_from_the_package():
    from kvsim import KvsimError as Exported

    assert Exported is KvsimError


@pytest.mark.parametrize("call, needle", [
    (lambda: kvsim.run(123), "scenario: a YAML path, a dict of sections, a Scenario or None, got int"),
    (lambda: kvsim.run(None, overrides="x"), "overrides: a dict of dotted keys to values, got str"),
    (lambda: kvsim.load(None, ["kv.block_size=32"]), "overrides: a dict of dotted keys to values, got list"),
    (lambda: kvsim.compare(None, {"kv.block_size": None}), "vary.kv.block_size: a non-empty list of values"),
    (lambda: kvsim.compare(None, {"kv.block_size": "16"}), "vary.kv.block_size: a non-empty list of values"),
    (lambda: kvsim.compare(None, {}), "vary: a non-empty dict of scenario key"),
    (lambda: kvsim.compare(None, [16, 32]), "vary: a non-empty dict of scenario key -> list of values, got "
                                            "list"),
])
def test_wrong_types_are_one_line_kvsim_errors(call, needle):
    with pytest.raises(KvsimError, match=needle) as exc:
        call()
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("call, needle", [
    (lambda: kvsim.load(None, {1: 2}), "overrides: keys are dotted scenario keys (strings), got int"),
    (lambda: kvsim.run(None, {None: 2}), "overrides: keys are dotted scenario keys (strings), got NoneType"),
    (lambda: kvsim.compare({"kv": {}}, {"kv.block_size": [16]}), "scenario: a YAML path or None, got dict"),
    (lambda: kvsim.compare(kvsim.load(None), {"kv.block_size": [16]}), "a YAML path or None, got Scenario"),
    (lambda: kvsim.compare(None, {"kv.block_size": [16]}, jobs="2"), "jobs: a whole number from 1 to 256"),
    (lambda: kvsim.compare(None, {"kv.block_size": [16]}, jobs=0), "jobs: a whole number from 1 to 256"),
    (lambda: kvsim.compare(None, {"kv.block_size": [object()]}), "kv.block_size: a Python object is not a"),
    (lambda: kvsim.compare(None, {5: [16]}), "vary: keys are dotted scenario keys (strings), got int"),
    (lambda: kvsim.sweep(5), "spec: a sweep file's path or its mapping, got int"),
    (lambda: kvsim.sweep({"grid": {"kv.block_size": [16]}}, jobs=True), "jobs: a whole number from 1 to"),
    (lambda: kvsim.sweep({"grid": {"kv.block_size": [16]}}, jobs=-1), "jobs: a whole number from 1 to 1024"),
    (lambda: kvsim.plan(None, "max_rate", {"ttft_s": {"p99": 2}}, overrides="x"), "overrides: a dict"),
    (lambda: kvsim.plan(None, "max_rate", {"ttft_s": {"p99": 2}}, jobs=0), "jobs: a whole number from 1"),
    (lambda: kvsim.plan(None, "min_replicas", {"ttft_s": {"p99": 2}}, qps="x"), "--qps 'x'"),
    (lambda: kvsim.plan({"kv": {}}, "max_rate", {"ttft_s": {"p99": 2}}), "a YAML path or None, got dict"),
])
def test_wrong_argument_types_found_by_the_fuzz_suite_are_kvsim_errors(call, needle):
    """Each of these raised a bare TypeError / AttributeError / RecursionError, quoted a whole scenario
    in its message, or (jobs=0, jobs=True) ran, before the fuzz suite's API mode found them."""
    with pytest.raises(KvsimError, match=re.escape(needle)) as exc:
        call()
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 300


def test_compare_keeps_a_value_with_a_comma_whole():
    df = kvsim.compare(None, {"name": ["a,b", "c"]}, {"simulation.requests": 2})
    assert list(df["name"]) == ["a,b", "c"]  # (it ran three variants, a, b and c)


def test_a_scenario_nested_past_the_recursion_limit_is_a_kvsim_error():
    deep: dict = {}
    node = deep
    for _ in range(sys.getrecursionlimit() + 100):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(KvsimError, match="nested too deeply") as exc:
        kvsim.load(deep)
    assert "\n" not in str(exc.value)


def test_a_sweep_point_failing_in_its_worker_is_the_commands_one_line():
    grid = {"set": {"simulation.requests": 5}, "grid": {"model": ["llama-3-8b", "llama-3-70b"]}}
    for jobs in (1, 2):
        with pytest.raises(KvsimError) as exc:
            kvsim.sweep(grid, jobs=jobs)
        assert str(exc.value).startswith("sweep point 1 (model=llama-3-70b): llama-3-70b weights (141.1 GB "
                                         "per GPU) exceed the 76.4 GB budget of h100-sxm")
        assert "\n" not in str(exc.value)


def test_a_run_with_nothing_completed_warns_with_the_commands_line():
    with pytest.warns(kvsim.KvsimWarning) as caught:
        res = kvsim.run(None, {"simulation.requests": 5, "scheduler.max_model_len": 64})
    assert [str(w.message) for w in caught] == [
        "0 of 5 requests completed: 5 refused (5 prompt longer than max_model_len); the latency figures of "
        "the summary are empty (scheduler.max_model_len, kv.gpu_memory_utilization and "
        "kv.num_gpu_blocks_override set the limits)"]
    assert res.refusals == {"prompt longer than max_model_len": 5}
    assert res.summary["requests"]["completed"] == 0 and res.summary["requests"]["rejected"] == 5
