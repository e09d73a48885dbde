"""`kvsim plan`: search a knob for the answer a capacity planner asks for, each probe a full simulation.

- `max_rate`: the highest `workload.arrival.rate` at which every SLO objective holds: from the scenario's
  rate, doubling (or halving) until the SLO flips, then bisection until the gap between the best rate
  that holds and the lowest that fails is within `precision` of the former.
- `min_replicas`: the fewest `parallelism.replicas` that hold the SLO at the scenario's load: doubling
  from 1, then bisection on the integers.
- `min_cost`: for each hardware profile x tensor-parallel size given, the fewest replicas that hold the
  SLO; the answer is the cheapest of those fleets per hour (summary `cost`).

Each probe is judged on runs that reached steady state, lengthened until the verdict is stable
(kvsim/sweep/probe.py): holds, fails, unstable (the backlog grows) or undecided (counted as failing). The
answer is the monotone envelope of the verdicts: the highest value that holds below every value that does
not (max_rate), the lowest that holds above every one that does not (min_replicas). With `repeats` K > 1
each run has K seeds and an objective holds when the upper end of the 95% interval of its value
(kvsim/sweep/repeats.py) is within the threshold. Rates are the scenario's `workload.arrival.rate` (sessions
per second for chat, episodes for agentic: kvsim/workload/config.py RATE_UNITS) and, for every probe,
the offered request rate it means (x requests per arrival); `qps` gives min_replicas / min_cost a target
in requests per second. docs/metrics.md (kvsim plan) defines plan.json.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvsim.errors import KvsimError, excerpt
from kvsim.output_folder import OutputFolder, folder_for
from kvsim.scenario import Scenario, load_scenario
from kvsim.schema import MAX_RATE, MIN_RATE
from kvsim.sweep.probe import MAX_EXTENSION, Attempt, Probe, Prober
from kvsim.sweep.repeats import seeds
from kvsim.workload.config import rate_unit
from kvsim.workload.request import requests_per_arrival

FINDS: dict[str, str] = {
    "max_rate": "workload.arrival.rate",
    "min_replicas": "parallelism.replicas",
    "min_cost": "parallelism.replicas",
}
"""--find choice -> the scenario key it searches."""
OnProbe = Callable[["Plan", Probe], None]
"""Called with the plan and each probe as it is decided."""
OnAttempt = Callable[["Plan", float, Attempt], None]
"""Called with the plan, the knob value and each run of a probe as it finishes."""

NEEDS_SLO = "kvsim plan needs an SLO: --slo METRIC.PNN=SECONDS (e.g. ttft_s.p99=2) or slo: in the scenario"
MAX_BISECTIONS = 60
"""Bisection steps at most (the precision is at least MIN_PRECISION, so it ends long before)."""
MIN_PRECISION = 1e-4
"""The finest --precision: bisecting a factor-2 bracket down to it takes 14 probes (a float's spacing,
about 2.2e-16 of the rate, is far below it)."""
MAX_PROBES = 64
"""Probes at most in one search (one candidate's, for min_cost). The widest max_rate search, from
MIN_RATE doubling to MAX_RATE (41) and bisecting to MIN_PRECISION (14), takes at most 55; min_replicas up to
MAX_REPLICAS takes 21: reaching it is a one-line error with the bracket found so far."""
MAX_PLAN_REPEATS = 100
"""--repeats at most for a plan: every run of every probe simulates each seed (kvsim run allows
MAX_REPEATS, one scenario's seeds once)."""
RATIO_REQUESTS = 100_000
"""Requests per arrival is counted over a stream of at least this many requests."""
MAX_HALVINGS = 10
"""Halvings from the scenario's rate before max_rate says no rate meets the SLO (a factor of 1024: far
below it the run is unloaded and latency no longer falls)."""
MAX_REPLICAS = 1024


@dataclass(slots=True)
class Plan:
    """A finished search: the answer (None: no value holds), the probes in the order run."""

    find: str
    key: str
    slo: dict[str, dict[str, float]]
    repeats: int
    precision: float | None
    unit: str = "requests/s"
    """What the knob counts: RATE_UNITS of the workload (max_rate) or replicas."""
    requests_per_arrival: float = 1.0
    max_extension: int = MAX_EXTENSION
    qps: float | None = None
    """min_replicas / min_cost: the target in requests per second (None: the scenario's rate)."""
    probes: list[Probe] = field(default_factory=list)
    answer: float | None = None
    failing: float | None = None
    """The nearest value that does not hold (above the answer for max_rate, below for min_replicas)."""
    note: str = ""
    """What bounds the answer when the search does not (the largest rate tried still holds)."""

    def at(self, value: float | None) -> Probe | None:
        return next((p for p in self.probes if p.value == value), None)

    def requests_per_s(self, value: float | None) -> float | None:
        """The offered request rate of a max_rate value (value x requests per arrival)."""
        return None if value is None or self.find != "max_rate" else value * self.requests_per_arrival

    def doc(self) -> dict[str, Any]:
        best = self.at(self.answer)
        rps = self.requests_per_s(self.answer) if self.find == "max_rate" else (
            None if best is None else best.requests_per_s)
        return {"find": self.find, "key": self.key, "unit": self.unit, "answer": self.answer,
                "answer_requests_per_s": rps, "failing": self.failing,
                "failing_requests_per_s": self.requests_per_s(self.failing),
                "requests_per_arrival": self.requests_per_arrival, "qps": self.qps, "note": self.note,
                "precision": self.precision, "repeats": self.repeats, "confidence": 0.95, "slo": self.slo,
                "max_extension": self.max_extension,
                "margin": None if best is None else {m: o["margin_s"] for m, o in best.objectives.items()},
                "probes": [p.doc() for p in self.probes]}


class Planner:
    """Runs probes of one scenario (path + overrides + seed) for one --find, remembering each (a probe at a
    value already tried is the same probe)."""

    def __init__(self, scenario: str | Path | None, overrides: list[str], seed: int | None, find: str,
                 repeats: int = 1, jobs: int = 1, on_probe: OnProbe | None = None,
                 max_extension: int = MAX_EXTENSION, qps: float | None = None,
                 on_attempt: OnAttempt | None = None) -> None:
        _check_find(find)
        self.path = None if scenario is None else str(scenario)
        self.overrides = list(overrides)
        self.find = find
        self.key = FINDS[find]
        self.on_probe = on_probe
        self.on_attempt = on_attempt
        base = load_scenario(self.path, self.overrides, seed)
        if base.slo is None:
            raise KvsimError(NEEDS_SLO)
        _check_knob(base, find, qps)
        self.ratio = _requests_per_arrival(base)
        if qps is not None:  # the target in requests/s, as the workload's own rate
            self.overrides.append(f"workload.arrival.rate={_rate_text(qps / self.ratio)}")
            base = load_scenario(self.path, self.overrides, seed)
        self.base = base
        self.rate = _offered(base, self.ratio)
        self.prober = Prober(self.path, self.overrides, base, seeds(base.simulation.seed, repeats), jobs,
                             max_extension)
        unit = rate_unit(base.workload.kind) if find == "max_rate" else "replicas"
        self.plan = Plan(find, self.key, base.slo, repeats, None, unit, self.ratio, max_extension, qps)
        self._seen: dict[float, Probe] = {}

    def start(self) -> float:
        """The knob's starting value: the scenario's rate, or 1 replica."""
        return float(self.base.workload.arrival.rate) if self.find == "max_rate" else 1

    def probe(self, value: float) -> Probe:
        if value in self._seen:
            return self._seen[value]
        if len(self.plan.probes) >= MAX_PROBES:
            raise KvsimError(f"kvsim plan stopped at its limit of {MAX_PROBES} probes without an answer: "
                             f"{_bracket(self.plan)}")
        text = _rate_text(value) if self.find == "max_rate" else str(int(value))
        rps = value * self.ratio if self.find == "max_rate" else self.rate

        def attempt(a: Attempt) -> None:
            if self.on_attempt is not None:
                self.on_attempt(self.plan, value, a)

        try:
            p = self.prober.probe(value, [f"{self.key}={text}"], rps, attempt)
        except KvsimError as exc:
            raise KvsimError(f"probe {self.key}={text}: {exc}") from None
        last = p.decided
        if p.verdict == "undecided" and last is not None and last.steady.cause in ("requests", "ramp"):
            raise KvsimError(f"probe {self.key}={text}: runs too short to judge even at {last.requests:,} "
                             f"requests ({last.steady.reason}): raise simulation.requests or --max-extension")
        self._seen[value] = p
        self.plan.probes.append(p)
        if self.on_probe is not None:
            self.on_probe(self.plan, p)
        return p


def _rate_text(rate: float) -> str:
    return repr(float(rate))


def _requests_per_arrival(sc: Scenario) -> float:
    """Requests per arrival of the scenario's workload (kvsim/workload/request.py requests_per_arrival),
    over a stream of at least RATIO_REQUESTS requests (1 for a trace or a closed loop)."""
    if not _rate_driven(sc):
        return 1.0
    from kvsim.engine.simulation import Simulation

    sim = sc.simulation
    longer = sc
    if sim.requests is not None and sim.requests < RATIO_REQUESTS:
        longer = sc.model_copy(update={"simulation": sim.model_copy(update={"requests": RATIO_REQUESTS})})
        longer._base_dir = sc._base_dir
    return requests_per_arrival(Simulation(longer).build_requests())


def _rate_driven(sc: Scenario) -> bool:
    """Whether workload.arrival.rate sets the load (not a trace's timestamps or a closed loop's users)."""
    return sc.workload.kind != "trace" and sc.workload.arrival.process != "closed_loop"


def _offered(sc: Scenario, ratio: float) -> float | None:
    """The scenario's offered request rate (rate x requests per arrival; None for a trace or closed loop)."""
    if not _rate_driven(sc):
        return None
    return float(sc.workload.arrival.rate) * ratio


def _check_knob(sc: Scenario, find: str, qps: float | None = None) -> None:
    closed = sc.workload.arrival.process == "closed_loop"
    if find == "max_rate":
        if sc.workload.kind == "trace" or sc.workload.mix:
            raise KvsimError("--find max_rate searches workload.arrival.rate; this workload has none "
                             f"(kind {sc.workload.kind}{', a mix' if sc.workload.mix else ''})")
        if closed:
            raise KvsimError("--find max_rate searches workload.arrival.rate; a closed loop's users and "
                             "think time set this workload's rate (vary workload.arrival.users with kvsim "
                             "compare)")
        if qps is not None:
            raise KvsimError("--qps is the load of --find min_replicas and min_cost; max_rate searches it")
    if find in ("min_replicas", "min_cost"):
        if sc.cluster is not None:
            raise KvsimError(f"--find {find} varies parallelism.replicas; this scenario's cluster: sets its "
                             "pools (drop cluster: or vary a pool's replicas with kvsim compare)")
        if qps is not None and (sc.workload.kind == "trace" or closed):
            what = "a trace's timestamps" if sc.workload.kind == "trace" else "a closed loop's users"
            raise KvsimError(f"--qps sets workload.arrival.rate; {what} set this workload's rate"
                             + (" (scale it with workload.trace.time_scale)" if not closed else ""))
    if qps is not None and not (_number(qps) and math.isfinite(qps) and qps > 0):
        shown = qps if _number(qps) else excerpt(qps)
        raise KvsimError(f"--qps {shown}: give a request rate > 0 (requests per second)")


def _bracket(plan: Plan) -> str:
    """Where a search stands, as text: the envelope's holding and failing values so far."""
    if plan.find == "max_rate":
        lo, hi = _holds_below_fail(plan.probes)
    else:
        hi, lo = _holds_above_fail(plan.probes)
    held = "nothing" if lo is None else f"{lo:g}"
    failed = "nothing" if hi is None else f"{hi:g}"
    return f"{plan.key} holds at {held} and fails at {failed} so far"


def _holds_below_fail(probes: list[Probe]) -> tuple[float | None, float | None]:
    """max_rate's monotone envelope: (the highest value that holds below every value that does not, the
    lowest value that does not hold), None where there is none."""
    fails = [p.value for p in probes if not p.holds]
    hi = min(fails, default=None)
    lo = max((p.value for p in probes if p.holds and (hi is None or p.value < hi)), default=None)
    return lo, hi


def _holds_above_fail(probes: list[Probe]) -> tuple[float | None, float | None]:
    """min_replicas' monotone envelope: (the highest value that does not hold, the lowest value that holds
    above every value that does not)."""
    fails = [p.value for p in probes if not p.holds]
    lo = max(fails, default=None)
    hi = min((p.value for p in probes if p.holds and (lo is None or p.value > lo)), default=None)
    return lo, hi


def find_max_rate(pl: Planner, precision: float) -> Plan:
    """Bracket the highest rate that holds by doubling / halving from the start, then bisect between the
    envelope's best holding rate and its lowest failing one."""
    plan = pl.plan
    plan.precision = precision
    r = pl.start()
    if pl.probe(r).holds:
        while True:
            if r >= MAX_RATE:
                rps = plan.requests_per_s(r)
                plan.note = (f"holds up to the largest rate tried, {r:g} {plan.unit} ({rps:.4g} requests/s): "
                             "workload.arrival.rate's upper bound")
                break
            r = min(2 * r, MAX_RATE)
            if not pl.probe(r).holds:
                break
    else:
        for _ in range(MAX_HALVINGS):
            if r / 2 < MIN_RATE:
                break
            r /= 2
            if pl.probe(r).holds:
                break
        else:
            raise KvsimError(f"no rate meets the SLO: at {r:.3g} {plan.unit} ({MAX_HALVINGS} halvings from "
                             f"{pl.start():g}) {_worst(pl.probe(r))}")
        if not pl.probe(r).holds:
            raise KvsimError(f"no rate meets the SLO: at {r:.3g} {plan.unit} (the lowest rate allowed) "
                             f"{_worst(pl.probe(r))}")
    for _ in range(MAX_BISECTIONS):
        lo, hi = _holds_below_fail(plan.probes)
        if lo is None or hi is None or hi - lo <= precision * lo:
            break
        mid = (lo + hi) / 2
        if not lo < mid < hi:  # (adjacent floats: nothing lies between them)
            break
        pl.probe(mid)
    plan.answer, plan.failing = _holds_below_fail(plan.probes)
    if plan.answer is None:
        raise KvsimError(f"no rate meets the SLO below the lowest failing rate, {plan.failing:g} {plan.unit}")
    return plan


def find_min_replicas(pl: Planner) -> Plan:
    """Double the replicas from 1 until the SLO holds, then bisect between the envelope's highest failing
    count and its lowest holding one."""
    plan = pl.plan
    n = 1
    last: Probe | None = None
    while not (p := pl.probe(n)).holds:
        if n >= MAX_REPLICAS:
            raise KvsimError(f"no replica count up to {MAX_REPLICAS} meets the SLO at this load: {_worst(p)}")
        if (last is not None and p.verdict == last.verdict == "fails"
                and _excess(p) >= 0.99 * _excess(last)):  # (a doubling that no longer helps: latency floor)
            raise KvsimError(f"more replicas do not meet the SLO (going from {n // 2} to {n} no longer "
                             f"lowers it: one request's own latency, not the load): at {n} {_worst(p)}")
        last = p
        n = min(2 * n, MAX_REPLICAS)
    while True:
        lo, hi = _holds_above_fail(plan.probes)
        if hi - (lo or 0) <= 1:
            break
        pl.probe((int(lo or 0) + int(hi)) // 2)
    plan.failing, plan.answer = _holds_above_fail(plan.probes)
    return plan


def _over(o: dict[str, Any]) -> float:
    """An objective's bound / threshold (inf when it has no value)."""
    return float("inf") if o["bound_s"] is None else o["bound_s"] / o["threshold_s"]


def _excess(p: Probe) -> float:
    """The largest bound / threshold over the objectives that fail (0 when none does)."""
    return max((_over(o) for o in p.objectives.values() if not o["holds"]), default=0.0)


def _worst(p: Probe) -> str:
    """Why a probe does not hold, as text: the objective furthest over its threshold, or the verdict."""
    if p.verdict in ("unstable", "undecided"):
        return f"{p.verdict}: {p.reason}"
    missed = [(m, o) for m, o in p.objectives.items() if not o["holds"]]
    if not missed:
        return "every objective holds"
    m, o = max(missed, key=lambda mo: _over(mo[1]))
    got = "no value" if o["bound_s"] is None else f"{o['bound_s']:.4g} s"
    return f"{m} {o['percentile']} is {got} against {o['threshold_s']:g} s"


@dataclass(slots=True)
class Candidate:
    """min_cost: one (hardware, tensor parallel size) and the fewest replicas of it that hold the SLO."""

    hardware: str
    tp: int
    plan: Plan | None
    note: str = ""
    """Why it has no answer (the model does not fit, no replica count holds the SLO)."""

    @property
    def best(self) -> Probe | None:
        return None if self.plan is None else self.plan.at(self.plan.answer)

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.best is None else self.best.usd_per_hour

    def doc(self) -> dict[str, Any]:
        replicas = None if self.plan is None else self.plan.answer
        gpus = None if replicas is None else int(replicas) * self.tp
        probes = [] if self.plan is None else [p.doc() for p in self.plan.probes]
        best = self.best
        return {"hardware": self.hardware, "tensor_parallel_size": self.tp, "replicas": replicas,
                "gpus": gpus, "usd_per_hour": self.usd_per_hour,
                "usd_per_million_output_tokens": None if best is None else best.usd_per_million_output_tokens,
                "usd_per_million_tokens": None if best is None else best.usd_per_million_tokens,
                "requests_per_s": None if self.plan is None else _offered_of(self.plan),
                "note": self.note, "probes": probes}


def _offered_of(plan: Plan) -> float | None:
    return next((p.requests_per_s for p in plan.probes), None)


@dataclass(slots=True)
class CostPlan:
    """min_cost: every candidate, and the cheapest that holds the SLO (fewer GPUs on a tie). At one load
    every candidate serves the same tokens, so the cheapest per hour is the cheapest per million tokens."""

    slo: dict[str, dict[str, float]]
    repeats: int
    candidates: list[Candidate]
    qps: float | None = None
    find: str = "min_cost"
    key: str = "hardware x parallelism.tensor_parallel_size x parallelism.replicas"

    @property
    def best(self) -> Candidate | None:
        ok = [c for c in self.candidates if c.usd_per_hour is not None]
        return min(ok, key=lambda c: (c.usd_per_hour, int(c.plan.answer) * c.tp), default=None)

    @property
    def probes(self) -> list[Probe]:
        return [p for c in self.candidates if c.plan is not None for p in c.plan.probes]

    def doc(self) -> dict[str, Any]:
        best = self.best
        return {"find": self.find, "key": self.key, "slo": self.slo, "repeats": self.repeats, "qps": self.qps,
                "confidence": 0.95, "answer": None if best is None else {
                    k: v for k, v in best.doc().items() if k != "probes"},
                "candidates": [c.doc() for c in self.candidates]}


def find_min_cost(scenario: str | Path | None, overrides: list[str], seed: int | None, hardware: list[str],
                  tps: list[int], repeats: int, jobs: int, on_probe: OnProbe | None,
                  max_extension: int = MAX_EXTENSION, qps: float | None = None,
                  on_attempt: OnAttempt | None = None,
                  on_candidate: Callable[[str, int], None] | None = None) -> CostPlan:
    """For each hardware x TP, the fewest replicas that hold the SLO (find_min_replicas); the cheapest
    fleet per hour of those is the answer. A combination whose model does not fit, or that no replica
    count up to MAX_REPLICAS serves within the SLO, is listed with the reason."""
    if not hardware or not tps:
        raise KvsimError("--find min_cost needs --hardware NAME,... and --tp N,... to search over")
    _check_candidates(hardware, tps)
    base = load_scenario(None if scenario is None else str(scenario), overrides, seed)
    if base.slo is None:
        raise KvsimError(NEEDS_SLO)
    _check_knob(base, "min_cost", qps)
    seeds(base.simulation.seed, repeats)
    candidates: list[Candidate] = []
    for hw in hardware:
        for tp in tps:
            if on_candidate is not None:
                on_candidate(hw, tp)
            over = [*overrides, f"hardware={hw}", f"parallelism.tensor_parallel_size={tp}"]
            try:  # (the model may not fit this hardware at this TP: a candidate without an answer)
                pl = Planner(scenario, over, seed, "min_cost", repeats, jobs, on_probe, max_extension, qps,
                             on_attempt)
            except KvsimError as exc:
                candidates.append(Candidate(hw, tp, None, str(exc)))
                continue
            try:
                plan = find_min_replicas(pl)
            except KvsimError as exc:
                candidates.append(Candidate(hw, tp, pl.plan, str(exc)))
                continue
            cand = Candidate(hw, tp, plan)
            if cand.usd_per_hour is None:
                cand.note = f"no USD per GPU-hour for {hw}: set pricing.usd_per_gpu_hour"
            candidates.append(cand)
    return CostPlan(base.slo, repeats, candidates, qps)


def run_plan(scenario: str | Path | None, overrides: list[str], seed: int | None, find: str,
             repeats: int = 1, precision: float = 0.02, jobs: int = 1,
             on_probe: OnProbe | None = None, hardware: list[str] | None = None,
             tps: list[int] | None = None, max_extension: int = MAX_EXTENSION, qps: float | None = None,
             on_attempt: OnAttempt | None = None,
             on_candidate: Callable[[str, int], None] | None = None) -> Plan | CostPlan:
    """The search `find` on the scenario (see the module docstring); at most MAX_PROBES probes, each of
    `repeats` (at most MAX_PLAN_REPEATS) seeds."""
    _check_find(find)  # (first: a misspelt --find with --hardware is about --find)
    _check_precision(precision)
    _check_repeats(repeats)
    if find != "min_cost" and (hardware or tps):  # (they used to be ignored without a word)
        raise KvsimError(f"--hardware and --tp (kvsim.plan: hardware, tps) are the candidates of --find "
                         f"min_cost; --find {excerpt(find)} runs the scenario's hardware and "
                         "tensor_parallel_size (set them with --set)")
    if find == "min_cost":
        return find_min_cost(scenario, overrides, seed, hardware or [], tps or [], repeats, jobs, on_probe,
                             max_extension, qps, on_attempt, on_candidate)
    pl = Planner(scenario, overrides, seed, find, repeats, jobs, on_probe, max_extension, qps, on_attempt)
    return find_max_rate(pl, precision) if find == "max_rate" else find_min_replicas(pl)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_find(find: Any) -> None:
    if not isinstance(find, str) or find not in FINDS:  # (a list raised TypeError: unhashable)
        raise KvsimError(f"--find {excerpt(find)}: choose one of {', '.join(FINDS)}")


def _check_precision(precision: Any) -> None:
    """--precision (kvsim.plan's `precision`): a fraction in [MIN_PRECISION, 1); below it the bisection
    needs more probes than a plan runs, and far below a float cannot tell the rates apart."""
    if not (_number(precision) and MIN_PRECISION <= precision < 1):
        shown = precision if _number(precision) else excerpt(precision)
        raise KvsimError(f"--precision {shown} (kvsim.plan: precision): give a fraction in "
                         f"[{MIN_PRECISION:g}, 1), e.g. 0.02; a finer step is more than the search can "
                         "resolve")


def _check_repeats(repeats: Any) -> None:
    """--repeats (kvsim.plan's `repeats`): a whole number from 1 to MAX_PLAN_REPEATS."""
    if not (isinstance(repeats, int) and not isinstance(repeats, bool) and 1 <= repeats <= MAX_PLAN_REPEATS):
        raise KvsimError(f"--repeats {excerpt(repeats)} (kvsim.plan: repeats): give 1 to {MAX_PLAN_REPEATS} "
                         "seeds per run for a plan")


def _check_candidates(hardware: Any, tps: Any) -> None:
    """min_cost's --hardware (kvsim.plan's `hardware`): names; --tp (`tps`): whole numbers >= 1."""
    if not isinstance(hardware, (list, tuple)) or not all(isinstance(h, str) and h for h in hardware):
        raise KvsimError(f"--hardware {excerpt(hardware)} (kvsim.plan: hardware): give a list of hardware "
                         "profile names")
    if not isinstance(tps, (list, tuple)) or not all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in tps):
        raise KvsimError(f"--tp {excerpt(tps)} (kvsim.plan: tps): give tensor-parallel sizes as whole "
                         "numbers >= 1")


def write_plan(out: str | Path | OutputFolder, plan: Plan | CostPlan, label: str = "") -> list[str]:
    """plan.json, plan.png and report.html into the output folder `out` (written whole,
    kvsim/output_folder.py); `label` names the scenario on the page."""
    from kvsim.sweep.plan_plot import plot_cost_plan, plot_plan
    from kvsim.sweep.plan_text import render_html

    with folder_for(out, "plan") as tmp:
        (tmp / "plan.json").write_text(json.dumps(plan.doc(), indent=2, sort_keys=True, allow_nan=False)
                                       + "\n", encoding="utf-8")
        if isinstance(plan, CostPlan):
            plot_cost_plan(tmp / "plan.png", plan)
        else:
            plot_plan(tmp / "plan.png", plan)
        (tmp / "report.html").write_text(render_html(plan, tmp / "plan.png", label), encoding="utf-8")
    return ["plan.json", "plan.png", "report.html"]
