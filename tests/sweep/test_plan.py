"""kvsim/sweep/plan.py and `kvsim plan`: the searches bracket and bisect on the probes' verdicts (their
monotone envelope), stop within the precision or at the rate bound with a one-line answer, convert --qps to
the workload's own rate; bad input (no SLO, a workload without a rate, an infeasible SLO) is a one-line error
with nothing written."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.errors import KvsimError
from kvsim.schema import MAX_RATE
from kvsim.sweep import plan as plan_mod
from kvsim.sweep.plan import run_plan
from kvsim.sweep.probe import Probe, Prober, judge


def test_judge_uses_the_upper_bound_over_seeds():
    slo = {"ttft_s": {"p99": 1.0}}
    assert judge([{"ttft_s": 0.9}], slo)[0] is True
    ok, obj = judge([{"ttft_s": v} for v in (0.5, 0.9, 1.1)], slo)  # mean 0.83, upper bound > 1
    assert ok is False and obj["ttft_s"]["mean_s"] == pytest.approx(2.5 / 3)
    assert obj["ttft_s"]["bound_s"] > 1.0 and obj["ttft_s"]["margin_s"] < 0


def _fake(verdict_of):
    """A stand-in Prober.probe: the verdict at a value is verdict_of(value); the TTFT bound 0.5 or 2."""
    def fake(self, value, knob, requests_per_s, on_attempt=None):
        v = verdict_of(value)
        b = 0.5 if v == "holds" else 2.0
        return Probe(value, v, "stand-in", {"ttft_s": {"bound_s": b, "holds": v == "holds", "margin_s": 1 - b,
                                                       "threshold_s": 1, "percentile": "p99", "mean_s": b}},
                     requests_per_s=requests_per_s)
    return fake


def test_max_rate_brackets_then_bisects_to_the_precision(monkeypatch):
    """From the default scenario's 16 req/s: 16 holds, 32 fails, then bisection to within 5% of 21."""
    monkeypatch.setattr(Prober, "probe", _fake(lambda r: "holds" if r <= 21 else "unstable"))
    plan = run_plan(None, ["slo.ttft_s={p99: 1}"], None, "max_rate", precision=0.05)
    assert [p.value for p in plan.probes][:2] == [16.0, 32.0]
    assert plan.answer <= 21 < plan.failing <= plan.answer * 1.05
    doc = plan.doc()
    assert doc["unit"] == "requests/s" and doc["answer_requests_per_s"] == plan.answer
    assert doc["margin"]["ttft_s"] == pytest.approx(0.5)


def test_max_rate_answer_is_the_monotone_envelope(monkeypatch):
    """A value that holds above one that fails does not count: the answer lies below the lowest failing."""
    monkeypatch.setattr(Prober, "probe", _fake(lambda r: "undecided" if r == 24 else
                                               ("holds" if r <= 30 else "fails")))
    plan = run_plan(None, ["slo.ttft_s={p99: 1}"], None, "max_rate", precision=0.05)
    assert plan.failing == 24 and 16 <= plan.answer < 24  # 32 failed, 24 is undecided: below it


def test_max_rate_at_the_rate_bound_is_an_answer(monkeypatch):
    monkeypatch.setattr(Prober, "probe", _fake(lambda r: "holds"))
    plan = run_plan(None, ["slo.ttft_s={p99: 1}"], None, "max_rate")
    assert plan.answer == MAX_RATE and plan.failing is None
    assert plan.note.startswith("holds up to the largest rate tried, 1e+06 requests/s")


def test_min_replicas_is_the_first_count_that_holds(monkeypatch):
    """On a stand-in probe (the SLO holds from 5 replicas on) the search probes 1, 2, 4, 8, then 6, 5."""
    monkeypatch.setattr(Prober, "probe", _fake(lambda n: "holds" if n >= 5 else "unstable"))
    plan = run_plan(None, ["slo.ttft_s={p99: 1}"], None, "min_replicas")
    assert plan.answer == 5 and plan.failing == 4
    assert [p.value for p in plan.probes] == [1, 2, 4, 8, 6, 5]


def test_min_replicas_stops_when_more_replicas_do_not_help(monkeypatch):
    monkeypatch.setattr(Prober, "probe", _fake(lambda n: "fails"))
    with pytest.raises(KvsimError, match=r"more replicas do not meet the SLO \(going from 1 to 2 no longer "
                                         r"lowers it: .*\): at 2 ttft_s p99 is 2 s against 1 s"):
        run_plan(None, ["slo.ttft_s={p99: 1}"], None, "min_replicas")


def test_qps_is_set_as_the_workloads_own_rate(monkeypatch):
    """chat: --qps 35 requests/s is 35 / (requests per session) sessions per second."""
    seen = []

    def fake(self, value, knob, requests_per_s, on_attempt=None):
        seen.append(self.overrides[-1])
        return _fake(lambda n: "holds")(self, value, knob, requests_per_s)

    monkeypatch.setattr(Prober, "probe", fake)
    plan = run_plan("workloads/chat.yaml", ["slo.ttft_s={p99: 1}"], None, "min_replicas", qps=35.0)
    ratio = plan.requests_per_arrival
    assert 3.0 < ratio < 4.0  # 1..6 turns, uniform: 3.5 on average
    assert plan.qps == 35.0 and plan.probes[0].requests_per_s == pytest.approx(35.0)
    assert plan.doc()["answer_requests_per_s"] == pytest.approx(35.0)


def test_min_cost_picks_the_cheapest_fleet_that_holds():
    plan = run_plan(None, ["simulation.requests=600", "slo.ttft_s={p50: 5}", "workload.arrival.rate=2"],
                    None, "min_cost", hardware=["h100-sxm", "a100-80gb"], tps=[1, 2], max_extension=2)
    rows = {(c.hardware, c.tp): c for c in plan.candidates}
    assert set(rows) == {("h100-sxm", 1), ("h100-sxm", 2), ("a100-80gb", 1), ("a100-80gb", 2)}
    assert rows[("a100-80gb", 1)].usd_per_hour == 1.30  # one replica holds a 5 s TTFT
    assert plan.best is rows[("a100-80gb", 1)]
    doc = plan.doc()
    assert doc["answer"]["hardware"] == "a100-80gb" and doc["answer"]["gpus"] == 1
    per_million = doc["answer"]["usd_per_million_output_tokens"]
    assert per_million is not None and per_million > 0
    from kvsim.sweep.plan import write_plan

    files = write_plan_files(write_plan, plan)
    assert files == ["plan.json", "plan.png", "report.html"]


def write_plan_files(write_plan, plan):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        files = write_plan(Path(d) / "out", plan)
        assert json.loads((Path(d) / "out" / "plan.json").read_text())["find"] == plan.find
    return files


@pytest.mark.parametrize("args, needle", [
    (["--find", "max_rate"], "kvsim plan needs an SLO"),
    (["--find", "fastest", "--slo", "ttft_s.p99=1"], "--find 'fastest': choose one of max_rate, "
     "min_replicas"),
    (["--find", "max_rate", "--slo", "ttft_s.p50=1e-6"], "no rate meets the SLO: at 0.0156 requests/s (10 "
     "halvings from 16)"),
    (["--find", "max_rate", "--slo", "ttft_s.p99=1", "--max-extension", "1"], "runs too short to judge even "
     "at 40 requests (ramp-up"),
    (["--find", "max_rate", "--slo", "ttft_s.p99=1", "--precision", "2"], "--precision 2.0"),
    (["--find", "max_rate", "--slo", "ttft_s.p99=1", "--precision", "1e-17"], "--precision 1e-17"),
    (["--find", "max_rate", "--slo", "ttft_s.p99=1", "--qps", "5"],
     "--qps is the load of --find min_replicas"),
    (["--find", "min_replicas", "--slo", "ttft_s.p99=1", "--qps", "-1"], "--qps -1.0: give a request rate"),
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
        plan_mod._check_knob(type("S", (), {"workload": type("W", (), {
            "kind": "trace", "mix": [], "arrival": type("A", (), {"process": "poisson"})()})(),
            "cluster": None})(), "max_rate")


def test_plan_command_writes_plan_json_plot_and_page(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["plan", "--find", "min_replicas", "--slo", "ttft_s.p50=5", "--set",
                                   "simulation.requests=600", "--set", "workload.arrival.rate=2", "--repeats",
                                   "2", "--max-extension", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "plan.json").read_text())
    assert doc["find"] == "min_replicas" and doc["answer"] == 1 and doc["failing"] is None
    assert doc["repeats"] == 2 and doc["probes"][0]["holds"] is True
    assert doc["probes"][0]["verdict"] == "holds" and doc["probes"][0]["attempts"][0]["seeds"] == [0, 1]
    assert (out / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert "answer: parallelism.replicas = 1 replica at 2 requests/s" in " ".join(res.stdout.split())


def test_a_close_call_keeps_the_lengths_steady_status(monkeypatch):
    """A verdict within 5% of its threshold is judged again on 2 more seeds pooled; if an extra seed's run is
    short or ambiguous, the pooled objectives decide and the length's own steady state stands."""
    from kvsim.metrics.steady import Backlog, SteadyState, Window
    from kvsim.scenario import load_scenario
    from kvsim.sweep.probe import Attempt

    def steady(status):
        return SteadyState(Window(1.0, 9.0, 1000, 1.0, 1.0), Backlog(1, 1, 0, 0.0, 0.0), status, status)

    def obj(bound):
        return {"ttft_s": {"bound_s": bound, "holds": bound <= 1, "threshold_s": 1.0, "percentile": "p99",
                           "mean_s": bound, "margin_s": 1 - bound}}

    made = iter([Attempt(1, 100, [0], steady("stable"), "holds", obj(0.99)),
                 Attempt(1, 100, [0, 1, 2], steady("ambiguous"), "ambiguous", obj(0.98), pooled=True)])
    frame = pd.DataFrame({"arrival_s": [0.0], "finish_s": [1.0], "output_len": [2], "n": [1],
                          "prompt_len": [3]})
    monkeypatch.setattr(Prober, "_runs", lambda self, knob, scale, seeds: [({"requests": {"total": 100}},
                                                                             frame)] * len(seeds))
    monkeypatch.setattr(Prober, "_attempt", lambda self, runs, scale, seeds, pooled=False: next(made))
    base = load_scenario(None, ["slo.ttft_s={p99: 1}"])
    p = Prober(None, [], base, [0], max_extension=1).probe(16.0, ["workload.arrival.rate=16"], 16.0)
    assert p.verdict == "holds" and p.attempts[-1].steady.status == "stable" and p.attempts[-1].pooled


PRECISION_ERROR = ("--precision 1e-17 (kvsim.plan: precision): give a fraction in [0.0001, 1), e.g. 0.02; a "
                   "finer step is more than the search can resolve")


def test_a_precision_the_search_cannot_resolve_is_refused(tmp_path):
    """1e-17 is below a float's spacing at any rate (about 2.2e-16 of it): refused before any probe."""
    res = CliRunner().invoke(app, ["plan", "--find", "max_rate", "--slo", "ttft_s.p99=1", "--precision",
                                   "1e-17", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and res.output == f"error: {PRECISION_ERROR}\n"
    with pytest.raises(KvsimError, match=r"^--precision 'fine' \(kvsim.plan: precision\): give a fraction"):
        run_plan(None, ["slo.ttft_s={p99: 1}"], None, "max_rate", precision="fine")
    import kvsim

    with pytest.raises(KvsimError) as exc:
        kvsim.plan(None, "max_rate", {"ttft_s": {"p99": 1}}, precision=1e-17)
    assert str(exc.value) == PRECISION_ERROR


def test_the_widest_max_rate_search_fits_in_max_probes(monkeypatch):
    """From the lowest rate (1e-6): 40 probes doubling to 5.5e5, then 1e6 (the bound) fails and 13
    bisections reach the finest precision: 54 probes, within MAX_PROBES (64)."""
    monkeypatch.setattr(Prober, "probe", _fake(lambda r: "holds" if r <= 7e5 else "fails"))
    plan = run_plan(None, ["slo.ttft_s={p99: 1}", "workload.arrival.rate=1e-6"], None, "max_rate",
                    precision=plan_mod.MIN_PRECISION)
    assert len(plan.probes) == 54 <= plan_mod.MAX_PROBES
    assert plan.answer <= 7e5 < plan.failing <= plan.answer * (1 + plan_mod.MIN_PRECISION)


def test_a_search_stops_at_max_probes_with_its_bracket(monkeypatch):
    monkeypatch.setattr(Prober, "probe", _fake(lambda r: "holds" if r <= 21 else "fails"))
    monkeypatch.setattr(plan_mod, "MAX_PROBES", 4)
    with pytest.raises(KvsimError) as exc:
        run_plan(None, ["slo.ttft_s={p99: 1}"], None, "max_rate", precision=0.01)
    assert str(exc.value) == ("kvsim plan stopped at its limit of 4 probes without an answer: "
                              "workload.arrival.rate holds at 20 and fails at 24 so far")


def test_plan_repeats_are_bounded(tmp_path, monkeypatch, capsys):
    """As kvsim run's --repeats: typer's range on the flag (one line through the console entry point), and
    the library's own check for the Python API."""
    from kvsim.cli import main

    monkeypatch.setattr("sys.argv", ["kvsim", "plan", "--find", "max_rate", "--slo", "ttft_s.p99=1",
                                     "--repeats", "1000", "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    assert capsys.readouterr().err == ("error: kvsim plan: Invalid value for '--repeats': Input should be "
                                       f"less than or equal to {plan_mod.MAX_PLAN_REPEATS}\n")
    for bad in (1000, 0, True, 2.5):
        with pytest.raises(KvsimError) as exc:
            run_plan(None, ["slo.ttft_s={p99: 1}"], None, "max_rate", repeats=bad)
        want = f"--repeats {bad!r} (kvsim.plan: repeats): give 1 to 100 seeds per run for a plan"
        assert str(exc.value) == want


@pytest.mark.parametrize("tps, shown", [([0], "[0]"), ([2, -1], "[2, -1]"), ([True], "[True]"), (4, "4"),
                                        (["2"], "['2']")])
def test_min_cost_tps_must_be_positive_whole_numbers(tps, shown):
    import kvsim

    with pytest.raises(KvsimError) as exc:
        kvsim.plan(None, "min_cost", {"ttft_s": {"p99": 1}}, hardware=["h100-sxm"], tps=tps)
    assert str(exc.value) == (f"--tp {shown} (kvsim.plan: tps): give tensor-parallel sizes as whole numbers "
                              ">= 1")


def test_min_cost_tp_zero_on_the_command_line(tmp_path):
    res = CliRunner().invoke(app, ["plan", "--find", "min_cost", "--slo", "ttft_s.p99=1", "--hardware",
                                   "h100-sxm", "--tp", "0", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    want = "error: --tp [0] (kvsim.plan: tps): give tensor-parallel sizes as whole numbers >= 1\n"
    assert res.output == want


@pytest.mark.parametrize("find", ["max_rate", "min_replicas"])
def test_hardware_and_tp_are_refused_outside_min_cost(tmp_path, find):
    """--hardware / --tp with another --find were ignored without a word (found by the fuzz suite)."""
    res = CliRunner().invoke(app, ["plan", "--find", find, "--slo", "ttft_s.p99=2", "--hardware", "h200",
                                   "--out", str(tmp_path / "p")])
    assert res.exit_code == 2 and "are the candidates of --find min_cost" in res.output
    with pytest.raises(KvsimError, match="candidates of --find min_cost"):
        run_plan(None, ["slo={ttft_s: {p99: 2}}"], None, find, tps=[2])
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("kwargs, needle", [
    ({"find": ["max_rate"]}, "--find ['max_rate']: choose one of"),
    ({"find": "max_rate", "max_extension": "2"}, "--max-extension '2': give 1 to 1024"),
    ({"find": "max_rate", "max_extension": True}, "--max-extension True: give 1 to 1024"),
])
def test_plan_arguments_of_the_wrong_type_are_kvsim_errors(kwargs, needle):
    """kvsim.plan(find=[...]) and max_extension="2" raised TypeError (found by the fuzz suite's long mode)."""
    import kvsim

    find = kwargs.pop("find")
    with pytest.raises(KvsimError, match=re.escape(needle)):
        kvsim.plan(None, find, {"ttft_s": {"p99": 2}}, **kwargs)


def test_a_misspelt_find_with_hardware_is_refused_for_the_find():
    """--find is checked before the rule that --hardware / --tp belong to min_cost (the error named the
    rule, as if the misspelt --find were a valid search)."""
    with pytest.raises(KvsimError, match=re.escape("--find 'min_cots': choose one of")):
        run_plan(None, ["slo={ttft_s: {p99: 2}}"], None, "min_cots", hardware=["h200"])
