"""`kvsim plan`: search a knob for the answer a capacity planner asks for, each probe a full simulation.

- `max_rate`: the highest `workload.arrival.rate` at which every SLO objective holds: from the scenario's
  rate, doubling (or halving) until the SLO flips, then bisection until the gap between the best rate
  that holds and the lowest that fails is within `precision` of the former.
- `min_replicas`: the fewest `parallelism.replicas` that hold the SLO at the scenario's load: doubling
  from 1, then bisection on the integers.
- `min_cost`: for each hardware profile x tensor-parallel size given, the fewest replicas that hold the
  SLO; the answer is the cheapest of those fleets per hour (summary `cost`).

With `repeats` K > 1 each probe runs K seeds and an objective holds when the upper end of the 95%
interval of its value (kvsim/sweep/repeats.py) is within the threshold, so the answer holds with that
confidence rather than for one lucky seed. docs/metrics.md (kvsim plan) defines plan.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvsim.errors import KvsimError
from kvsim.output_folder import OutputFolder, folder_for
from kvsim.scenario import Scenario, load_scenario
from kvsim.sweep.repeats import interval, run_repeats, seeds

FINDS: dict[str, str] = {
    "max_rate": "workload.arrival.rate",
    "min_replicas": "parallelism.replicas",
    "min_cost": "parallelism.replicas",
}
"""--find choice -> the scenario key it searches."""

NEEDS_SLO = "kvsim plan needs an SLO: --slo METRIC.PNN=SECONDS (e.g. ttft_s.p99=2) or slo: in the scenario"
MAX_STEPS = 24
"""Doublings before the search gives up (a factor of about 1.7e7)."""
MAX_HALVINGS = 10
"""Halvings from the scenario's rate before max_rate says no rate meets the SLO (a factor of 1024: far
below it the run is unloaded and latency no longer falls)."""
MAX_REPLICAS = 1024


@dataclass(slots=True)
class Probe:
    """One value of the knob: whether every objective held, and per objective the figures."""

    value: float
    holds: bool
    objectives: dict[str, dict[str, Any]]
    usd_per_hour: float | None = None
    """The fleet's rental cost at this value (summary cost.usd_per_hour; None when a price is unknown)."""

    def doc(self) -> dict[str, Any]:
        return {"value": self.value, "holds": self.holds, "objectives": self.objectives,
                "usd_per_hour": self.usd_per_hour}


@dataclass(slots=True)
class Plan:
    """A finished search: the answer (None: no value holds), the probes in the order run."""

    find: str
    key: str
    slo: dict[str, dict[str, float]]
    repeats: int
    precision: float | None
    probes: list[Probe] = field(default_factory=list)
    answer: float | None = None
    failing: float | None = None
    """The nearest value that does not hold (above the answer for max_rate, below for min_replicas)."""

    def at(self, value: float | None) -> Probe | None:
        return next((p for p in self.probes if p.value == value), None)

    def doc(self) -> dict[str, Any]:
        best = self.at(self.answer)
        return {"find": self.find, "key": self.key, "answer": self.answer, "failing": self.failing,
                "precision": self.precision, "repeats": self.repeats, "confidence": 0.95, "slo": self.slo,
                "margin": None if best is None else {m: o["margin_s"] for m, o in best.objectives.items()},
                "probes": [p.doc() for p in self.probes]}


def _judge(summaries: list[dict[str, Any]], slo: dict[str, dict[str, float]]) -> tuple[bool, dict]:
    """Whether every objective holds over the seeds' summaries (the interval's upper end, or the one
    value, within the threshold), and per objective its figures."""
    ok = True
    out: dict[str, dict[str, Any]] = {}
    for metric, target in slo.items():
        ((stat, threshold),) = target.items()
        iv = interval([s["slo"][metric]["value_s"] for s in summaries])
        bound = iv["high"]
        holds = bound is not None and bound <= threshold
        ok &= holds
        out[metric] = {"percentile": stat, "threshold_s": threshold, "mean_s": iv["mean"], "bound_s": bound,
                       "margin_s": None if bound is None else threshold - bound, "holds": holds}
    return ok, out


class Planner:
    """Runs probes of one scenario (path + overrides + seed) for one --find, remembering each."""

    def __init__(self, scenario: str | Path | None, overrides: list[str], seed: int | None, find: str,
                 repeats: int = 1, jobs: int = 1, on_probe: Callable[[Probe], None] | None = None) -> None:
        if find not in FINDS:
            raise KvsimError(f"--find {find!r}: choose one of {', '.join(FINDS)}")
        self.path = None if scenario is None else str(scenario)
        self.overrides = list(overrides)
        self.find = find
        self.key = FINDS[find]
        self.jobs = jobs
        self.on_probe = on_probe
        base = load_scenario(self.path, self.overrides, seed)
        self.base = base
        if base.slo is None:
            raise KvsimError(NEEDS_SLO)
        _check_knob(base, find)
        self.seeds = seeds(base.simulation.seed, repeats)
        self.plan = Plan(find, self.key, base.slo, repeats, None)
        self._seen: dict[float, Probe] = {}

    def start(self) -> float:
        """The knob's starting value: the scenario's rate, or 1 replica."""
        return float(self.base.workload.arrival.rate) if self.find == "max_rate" else 1

    def probe(self, value: float) -> Probe:
        if value in self._seen:
            return self._seen[value]
        text = repr(float(value)) if self.find == "max_rate" else str(int(value))
        over = [*self.overrides, f"{self.key}={text}"]
        try:
            summaries = run_repeats(self.path, over, self.seeds, self.jobs)
        except KvsimError as exc:
            raise KvsimError(f"probe {self.key}={text}: {exc}") from None
        holds, objectives = _judge(summaries, self.plan.slo)
        p = Probe(value, holds, objectives, (summaries[0].get("cost") or {}).get("usd_per_hour"))
        self._seen[value] = p
        self.plan.probes.append(p)
        if self.on_probe is not None:
            self.on_probe(p)
        return p


def _check_knob(sc: Scenario, find: str) -> None:
    if find == "max_rate":
        if sc.workload.kind == "trace" or sc.workload.mix:
            raise KvsimError("--find max_rate searches workload.arrival.rate; this workload has none "
                             f"(kind {sc.workload.kind}{', a mix' if sc.workload.mix else ''})")
        if sc.workload.arrival.rate is None or sc.workload.arrival.rate <= 0:
            raise KvsimError("--find max_rate needs a workload.arrival.rate > 0 to start from")
    if find in ("min_replicas", "min_cost") and sc.cluster is not None:
        raise KvsimError(f"--find {find} varies parallelism.replicas; this scenario's cluster: sets its "
                         "pools (drop cluster: or vary a pool's replicas with kvsim compare)")


def find_max_rate(pl: Planner, precision: float) -> Plan:
    """Bracket the highest rate that holds by doubling / halving from the start, then bisect."""
    plan = pl.plan
    plan.precision = precision
    r = pl.start()
    lo = hi = None
    if pl.probe(r).holds:
        lo = r
        for _ in range(MAX_STEPS):
            r *= 2
            if not pl.probe(r).holds:
                hi = r
                break
            lo = r
        else:
            raise KvsimError(f"the SLO still holds at {lo:g} req/s ({MAX_STEPS} doublings): the rate does "
                             f"not bound it here (more requests? simulation.requests)")
    else:
        hi = r
        for _ in range(MAX_HALVINGS):
            r /= 2
            if pl.probe(r).holds:
                lo = r
                break
            hi = r
        else:
            raise KvsimError(f"no rate meets the SLO: at {r:.3g} req/s ({MAX_HALVINGS} halvings from "
                             f"{pl.start():g}) {_worst(pl.probe(r))}")
    while hi - lo > precision * lo:
        mid = (lo + hi) / 2
        if pl.probe(mid).holds:
            lo = mid
        else:
            hi = mid
    plan.answer, plan.failing = lo, hi
    return plan


def find_min_replicas(pl: Planner) -> Plan:
    """Double the replicas from 1 until the SLO holds, then bisect between the last two counts."""
    plan = pl.plan
    n, below = 1, 0
    last = None
    while not (p := pl.probe(n)).holds:
        below = n
        worst = _excess(p)
        if n >= MAX_REPLICAS:
            raise KvsimError(f"no replica count up to {MAX_REPLICAS} meets the SLO at this load: {_worst(p)}")
        if last is not None and worst >= 0.99 * last:  # (a doubling that no longer helps: latency floor)
            raise KvsimError(f"more replicas do not meet the SLO (going from {n // 2} to {n} no longer "
                             f"lowers it: one request's own latency, not the load): at {n} {_worst(p)}")
        last = worst
        n = min(2 * n, MAX_REPLICAS)
    hi = n
    lo = below
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pl.probe(mid).holds:
            hi = mid
        else:
            lo = mid
    plan.answer, plan.failing = hi, (lo or None)
    return plan


def _over(o: dict[str, Any]) -> float:
    """An objective's bound / threshold (inf when it has no value)."""
    return float("inf") if o["bound_s"] is None else o["bound_s"] / o["threshold_s"]


def _excess(p: Probe) -> float:
    """The largest bound / threshold over the objectives that fail (0 when none does)."""
    return max((_over(o) for o in p.objectives.values() if not o["holds"]), default=0.0)


def _worst(p: Probe) -> str:
    """The objective furthest over its threshold, as text."""
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
    def usd_per_hour(self) -> float | None:
        best = None if self.plan is None else self.plan.at(self.plan.answer)
        return None if best is None else best.usd_per_hour

    def doc(self) -> dict[str, Any]:
        replicas = None if self.plan is None else self.plan.answer
        gpus = None if replicas is None else int(replicas) * self.tp
        probes = [] if self.plan is None else [p.doc() for p in self.plan.probes]
        return {"hardware": self.hardware, "tensor_parallel_size": self.tp, "replicas": replicas,
                "gpus": gpus, "usd_per_hour": self.usd_per_hour, "note": self.note, "probes": probes}


@dataclass(slots=True)
class CostPlan:
    """min_cost: every candidate, and the cheapest that holds the SLO (fewer GPUs on a tie)."""

    slo: dict[str, dict[str, float]]
    repeats: int
    candidates: list[Candidate]
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
        return {"find": self.find, "key": self.key, "slo": self.slo, "repeats": self.repeats,
                "confidence": 0.95, "answer": None if best is None else {
                    k: v for k, v in best.doc().items() if k != "probes"},
                "candidates": [c.doc() for c in self.candidates]}


def find_min_cost(scenario: str | Path | None, overrides: list[str], seed: int | None, hardware: list[str],
                  tps: list[int], repeats: int, jobs: int,
                  on_probe: Callable[[Probe], None] | None) -> CostPlan:
    """For each hardware x TP, the fewest replicas that hold the SLO (find_min_replicas); the cheapest
    fleet per hour of those is the answer. A combination whose model does not fit, or that no replica
    count up to MAX_REPLICAS serves within the SLO, is listed with the reason."""
    if not hardware or not tps:
        raise KvsimError("--find min_cost needs --hardware NAME,... and --tp N,... to search over")
    base = load_scenario(None if scenario is None else str(scenario), overrides, seed)
    if base.slo is None:
        raise KvsimError(NEEDS_SLO)
    _check_knob(base, "min_cost")
    seeds(base.simulation.seed, repeats)
    candidates: list[Candidate] = []
    for hw in hardware:
        for tp in tps:
            over = [*overrides, f"hardware={hw}", f"parallelism.tensor_parallel_size={tp}"]
            try:  # (the model may not fit this hardware at this TP: a candidate without an answer)
                pl = Planner(scenario, over, seed, "min_cost", repeats, jobs, on_probe)
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
    return CostPlan(base.slo, repeats, candidates)


def run_plan(scenario: str | Path | None, overrides: list[str], seed: int | None, find: str,
             repeats: int = 1, precision: float = 0.02, jobs: int = 1,
             on_probe: Callable[[Probe], None] | None = None, hardware: list[str] | None = None,
             tps: list[int] | None = None) -> Plan | CostPlan:
    """The search `find` on the scenario (see the module docstring)."""
    if not 0 < precision < 1:
        raise KvsimError(f"--precision {precision}: give a fraction in (0, 1), e.g. 0.02")
    if find == "min_cost":
        return find_min_cost(scenario, overrides, seed, hardware or [], tps or [], repeats, jobs, on_probe)
    pl = Planner(scenario, overrides, seed, find, repeats, jobs, on_probe)
    return find_max_rate(pl, precision) if find == "max_rate" else find_min_replicas(pl)


def write_plan(out: str | Path | OutputFolder, plan: Plan | CostPlan) -> list[str]:
    """plan.json and plan.png into the output folder `out` (written whole, kvsim/output_folder.py)."""
    from kvsim.sweep.plan_plot import plot_cost_plan, plot_plan

    with folder_for(out, "plan") as tmp:
        (tmp / "plan.json").write_text(json.dumps(plan.doc(), indent=2, sort_keys=True, allow_nan=False)
                                       + "\n", encoding="utf-8")
        if isinstance(plan, CostPlan):
            plot_cost_plan(tmp / "plan.png", plan)
        else:
            plot_plan(tmp / "plan.png", plan)
    return ["plan.json", "plan.png"]
