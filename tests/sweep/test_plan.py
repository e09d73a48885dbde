"""kvsim/sweep/plan.py and `kvsim plan`: the searches stop where the SLO flips, within the precision; bad
input (no SLO, a workload without a rate, an infeasible SLO) is a one-line error with nothing written."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.errors import KvsimError
from kvsim.sweep import plan as plan_mod
from kvsim.sweep.plan import Probe, _judge, run_plan

SMALL = ["simulation.requests=150", "workload.kind=synthetic"]


def test_judge_uses_the_upper_bound_over_seeds():
    slo = {"ttft_s": {"p99": 1.0}}
    one = [{"slo": {"ttft_s": {"value_s": 0.9}}}]
    assert _judge(one, slo)[0] is True
    spread = [{"slo": {"ttft_s": {"value_s": v}}} for v in (0.5, 0.9, 1.1)]  # mean 0.83, upper bound > 1
    ok, obj = _judge(spread, slo)
    assert ok is False and obj["ttft_s"]["mean_s"] == pytest.approx(2.5 / 3)
    assert obj["ttft_s"]["bound_s"] > 1.0 and obj["ttft_s"]["margin_s"] < 0


def test_max_rate_brackets_then_bisects_to_the_precision():
    plan = run_plan(None, [*SMALL, "slo.ttft_s={p99: 0.2}"], None, "max_rate", precision=0.05)
    assert plan.at(plan.answer).holds and not plan.at(plan.failing).holds
    assert plan.answer < plan.failing <= plan.answer * 1.05
    assert plan.probes[0].value == 16.0  # the default scenario's rate first
    doc = plan.doc()
    assert doc["answer"] == plan.answer and len(doc["probes"]) == len(plan.probes)
    bound = plan.at(plan.answer).objectives["ttft_s"]["bound_s"]
    assert doc["margin"]["ttft_s"] == pytest.approx(0.2 - bound)


def test_min_replicas_is_the_first_count_that_holds(monkeypatch):
    """On a stand-in probe (the SLO holds from 5 replicas on) the search probes 1, 2, 4, 8, then 6, 5."""
    monkeypatch.setattr(plan_mod.Planner, "probe", _fake_probe(lambda n: 4.5 / n))
    plan = run_plan(None, ["slo.ttft_s={p99: 1}"], None, "min_replicas")
    assert plan.answer == 5 and plan.failing == 4
    assert [p.value for p in plan.probes] == [1, 2, 4, 8, 6, 5]


def _fake_probe(bound):
    """A stand-in Planner.probe: the TTFT bound at n replicas is bound(n), the threshold 1 s."""
    def fake(self, value):
        b = bound(value)
        p = Probe(value, b <= 1, {"ttft_s": {"bound_s": b, "holds": b <= 1, "margin_s": 1 - b,
                                             "threshold_s": 1, "percentile": "p99", "mean_s": b}})
        self.plan.probes.append(p)
        return p
    return fake


def test_min_replicas_stops_when_more_replicas_do_not_help(monkeypatch):
    monkeypatch.setattr(plan_mod.Planner, "probe", _fake_probe(lambda n: 3.0 if n == 1 else 1.5))
    with pytest.raises(KvsimError, match=r"more replicas do not meet the SLO \(going from 2 to 4 no longer "
                                         r"lowers it: .*\): at 4 ttft_s p99 is 1.5 s against 1 s"):
        run_plan(None, ["slo.ttft_s={p99: 1}"], None, "min_replicas")


def test_min_cost_picks_the_cheapest_fleet_that_holds(tmp_path):
    plan = run_plan(None, ["simulation.requests=60", "slo.ttft_s={p99: 5}"], None, "min_cost",
                    hardware=["h100-sxm", "a100-80gb"], tps=[1, 2])
    rows = {(c.hardware, c.tp): c for c in plan.candidates}
    assert set(rows) == {("h100-sxm", 1), ("h100-sxm", 2), ("a100-80gb", 1), ("a100-80gb", 2)}
    assert rows[("a100-80gb", 1)].usd_per_hour == 1.30  # one replica holds a 5 s TTFT
    assert plan.best is rows[("a100-80gb", 1)]
    doc = plan.doc()
    assert doc["answer"]["hardware"] == "a100-80gb" and doc["answer"]["gpus"] == 1
    from kvsim.sweep.plan import write_plan

    assert write_plan(tmp_path / "out", plan) == ["plan.json", "plan.png"]
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["find"] == "min_cost"


@pytest.mark.parametrize("args, needle", [
    (["--find", "max_rate"], "kvsim plan needs an SLO"),
    (["--find", "fastest", "--slo", "ttft_s.p99=1"], "--find 'fastest': choose one of max_rate, "
     "min_replicas"),
    (["--find", "max_rate", "--slo", "ttft_s.p99=1e-6"], "no rate meets the SLO: at 0.0156 req/s (10 "
     "halvings from 16) ttft_s p99 is "),
    (["--find", "max_rate", "--slo", "ttft_s.p99=1", "--precision", "2"], "--precision 2.0"),
    (["--find", "max_rate", "--slo", "ttft_s.p99=1", "--set", "workload.kind=trace",
      "--set", "workload.trace.path=x.csv"], "this workload has none (kind trace)"),
])
def test_plan_errors_are_one_line_and_write_nothing(tmp_path, args, needle):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["plan", *args, "--set", "simulation.requests=40", "--out", str(out)])
    assert res.exit_code != 0
    lines = res.output.strip().splitlines()
    assert lines[-1].startswith("error: ") and needle in lines[-1], res.output
    assert "Traceback" not in res.output
    assert not out.exists()


def test_max_rate_refuses_a_trace_workload():
    with pytest.raises(KvsimError, match="has none"):
        plan_mod._check_knob(type("S", (), {"workload": type("W", (), {"kind": "trace", "mix": []})()})(),
                             "max_rate")


def test_plan_command_writes_plan_json_and_plot(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["plan", "--find", "min_replicas", "--slo", "ttft_s.p99=5", "--set",
                                   "simulation.requests=40", "--repeats", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "plan.json").read_text())
    assert doc["find"] == "min_replicas" and doc["answer"] == 1 and doc["failing"] is None
    assert doc["repeats"] == 2 and doc["probes"][0]["holds"] is True
    assert (out / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "answer: parallelism.replicas = 1" in res.stdout
