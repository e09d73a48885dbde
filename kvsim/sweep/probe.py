"""One probe of `kvsim plan`: a knob value (a rate, a replica count) judged on runs that reached steady
state (kvsim/metrics/steady.py), lengthened until the verdict is stable.

A probe runs the scenario at 1x its length (`simulation.requests`, and `simulation.duration_s` if set),
each run with `repeats` seeds, and reads each run's steady-state status:

- `short` or `ambiguous` (the window holds too few requests, the warm-up is too long for the run, or the
  backlog trends up without clearly growing): the run is lengthened (the scale doubled, or raised at once
  to the power of two the window's shortfall asks for) and the probe runs again;
- `unstable` (the backlog grows), or stable with the objectives judged on the window's requests (`holds` /
  `fails`: each objective's value, or with repeats > 1 the 95% interval's upper bound over the seeds,
  within its threshold): a verdict.

A verdict stands when the next doubling gives the same one (a longer run confirms it), at once when it is
decisive (a clearly growing backlog, or an objective over FAILS_AT x its threshold), and when the run
cannot be lengthened (a trace has no more rows). Before it stands, a verdict within CLOSE of a threshold
with one seed is judged again on CLOSE_SEEDS more seeds' windows pooled with it. The scale never passes
`max_extension`; a probe that reaches it without two agreeing verdicts, or still short or ambiguous, is
`undecided` (it does not hold) and says why. The knob values of a plan are judged on the same seeds, so a
plan is deterministic. docs/metrics.md (kvsim plan) defines plan.json.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.errors import KvsimError, excerpt
from kvsim.metrics.steady import (
    MAX_WARMUP_FRACTION,
    SteadyState,
    needed_requests,
    steady_state,
    window_population,
    window_values,
)
from kvsim.schema import MAX_REQUESTS, MAX_SECONDS, objectives
from kvsim.sweep.repeats import interval

if TYPE_CHECKING:
    import pandas as pd

    from kvsim.scenario import Scenario

MAX_EXTENSION = 32
"""Default of --max-extension: a probe's runs grow to at most this many times the scenario's length."""
CLOSE = 0.05
"""A verdict whose value is within this fraction of a threshold is a close call (more seeds pooled)."""
CLOSE_SEEDS = 2
FAILS_AT = 1.5
"""A stable run whose objective is this many times its threshold fails beyond doubt (no confirmation)."""
VERDICTS = ("holds", "fails", "unstable", "undecided")
KEEP_COLUMNS = ("arrival_s", "finish_s", "rejected", "session", "output_len", "prompt_len", "n", "ttft_s",
                "tpot_s", "e2e_s", "queue_s")
"""The requests columns a probe reads (the rest of a run's frames are dropped in the worker)."""


def measure(path: str | None, overrides: list[str], seed: int) -> tuple[dict[str, Any], pd.DataFrame]:
    """One run: its summary and the columns of its requests frame a probe needs."""
    from kvsim.engine.simulation import Simulation
    from kvsim.metrics.summary import build_summary
    from kvsim.scenario import load_scenario

    res = Simulation(load_scenario(path, overrides, seed)).run()
    import pandas as pd  # (only where a probe's columns are kept)

    summary = build_summary(res.tables, None, res.meta)
    cols = [c for c in KEEP_COLUMNS if res.tables.has_request(c)]
    return summary, pd.DataFrame({c: res.tables.request(c) for c in cols})


@dataclass(slots=True)
class Attempt:
    """One length of a probe: its seeds' runs at `scale` x the scenario's length."""

    scale: int
    requests: int
    """Requests the first seed's run simulated."""
    seeds: list[int]
    steady: SteadyState
    """The least steady of the seeds' runs (unstable, short, ambiguous, then stable)."""
    verdict: str
    """holds, fails, unstable, short or ambiguous."""
    objectives: dict[str, dict[str, Any]]
    pooled: bool = False
    """The objectives are percentiles over the seeds' windows pooled (a close call)."""

    def doc(self) -> dict[str, Any]:
        return {"scale": self.scale, "requests": self.requests, "seeds": self.seeds, "verdict": self.verdict,
                "pooled": self.pooled, "objectives": self.objectives, **self.steady.doc()}


@dataclass(slots=True)
class Probe:
    """A knob value's verdict (VERDICTS; only `holds` holds), why, its objectives and steady-state figures
    (of the attempt that decided it), and every attempt in the order run."""

    value: float
    verdict: str
    reason: str
    objectives: dict[str, dict[str, Any]]
    attempts: list[Attempt] = field(default_factory=list)
    requests_per_s: float | None = None
    """The knob's offered request rate: value x requests per arrival (max_rate), or the scenario's."""
    usd_per_hour: float | None = None
    usd_per_million_output_tokens: float | None = None
    usd_per_million_tokens: float | None = None
    """At the window's served token rates (the steady-state load), summary cost.usd_per_hour over them."""

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    @property
    def decided(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def doc(self) -> dict[str, Any]:
        last = self.decided
        return {"value": self.value, "verdict": self.verdict, "holds": self.holds, "reason": self.reason,
                "objectives": self.objectives, "requests_per_s": self.requests_per_s,
                "window": None if last is None else last.steady.window.doc(),
                "usd_per_hour": self.usd_per_hour,
                "usd_per_million_output_tokens": self.usd_per_million_output_tokens,
                "usd_per_million_tokens": self.usd_per_million_tokens,
                "attempts": [a.doc() for a in self.attempts]}


def judge(values: list[dict[str, float | None]], slo: dict[str, dict[str, float]]) -> tuple[bool, dict]:
    """Whether every objective holds over the seeds' window values (the 95% interval's upper end, or the one
    value, within the threshold), and per objective its figures."""
    ok = True
    out: dict[str, dict[str, Any]] = {}
    for o in objectives(slo):
        iv = interval([v[o.metric] for v in values])
        bound = iv["high"]
        holds = o.holds(bound)
        ok &= holds
        out[o.metric] = {"percentile": o.stat, "threshold_s": o.threshold_s, "mean_s": iv["mean"],
                         "bound_s": bound, "margin_s": None if bound is None else o.threshold_s - bound,
                         "holds": holds}
    return ok, out


_ORDER = {"unstable": 0, "short": 1, "ambiguous": 2, "stable": 3}


class Prober:
    """Runs probes of one scenario (path + overrides) over a knob, each at growing lengths (module
    docstring), with `repeats` seeds per run."""

    def __init__(self, path: str | None, overrides: list[str], base: Scenario, seeds: list[int],
                 jobs: int = 1, max_extension: int = MAX_EXTENSION) -> None:
        if not (isinstance(max_extension, int) and not isinstance(max_extension, bool)
                and 1 <= max_extension <= 1024):  # (kvsim.plan's max_extension="2" raised TypeError)
            raise KvsimError(f"--max-extension {excerpt(max_extension)}: give 1 to 1024 (times the "
                             "scenario's length)")
        self.path = path
        self.overrides = list(overrides)
        self.slo = base.slo or {}
        self.seeds = seeds
        self.jobs = jobs
        self.max_extension = max_extension
        self.need = needed_requests(self.slo)
        self.base_requests = base.simulation.requests
        self.base_duration = base.simulation.duration_s
        self.trace = base.workload.kind == "trace"
        self.start_scale = 1
        """Where a probe starts: the scale at which the previous probe first reached a verdict (a run
        shorter than that was short or ambiguous there, and would most likely be again)."""
        self.first_decided: int | None = None

    def length_of(self, scale: int) -> list[str]:
        """The overrides that set a run of `scale` x the scenario's length."""
        out = []
        if self.base_requests is not None:
            out.append(f"simulation.requests={self.base_requests * scale}")
        if self.base_duration is not None:
            out.append(f"simulation.duration_s={self.base_duration * scale!r}")
        return out

    def _runs(self, knob: list[str], scale: int, seeds: list[int]) -> list[tuple[dict, pd.DataFrame]]:
        over = [*self.overrides, *knob, *self.length_of(scale)]
        if self.jobs <= 1 or len(seeds) <= 1:
            return [measure(self.path, over, s) for s in seeds]
        with ProcessPoolExecutor(max_workers=min(self.jobs, len(seeds))) as pool:
            return list(pool.map(measure, [self.path] * len(seeds), [over] * len(seeds), seeds))

    def _attempt(self, runs: list[tuple[dict, pd.DataFrame]], scale: int, seeds: list[int],
                 pooled: bool = False) -> Attempt:
        states = [steady_state(df, self.need) for _, df in runs]
        worst = min(range(len(states)), key=lambda i: (_ORDER[states[i].status],
                                                        -(states[i].backlog.growth_fraction or 0.0)))
        st = states[worst]
        if pooled:
            values = [_pooled_values([df for _, df in runs], states, self.slo)]
        else:
            values = [window_values(df, s.window, self.slo) for (_, df), s in zip(runs, states, strict=True)]
        holds, objs = judge(values, self.slo)
        verdict = ("holds" if holds else "fails") if st.status == "stable" else st.status
        return Attempt(scale, int(runs[0][0]["requests"]["total"]), seeds, st, verdict, objs, pooled)

    def probe(self, value: float, knob: list[str], requests_per_s: float | None,
              on_attempt: Callable[[Attempt], None] | None = None) -> Probe:
        """The verdict at one knob value (`knob`: the overrides that set it); see the module docstring."""
        attempts: list[Attempt] = []
        by_scale: dict[int, Attempt] = {}  # the attempt that gave each length's verdict
        scale = self.start_scale
        while True:
            runs = self._runs(knob, scale, self.seeds)
            att = self._attempt(runs, scale, self.seeds)
            exhausted = bool(attempts) and att.requests <= attempts[-1].requests or (
                self.trace and self.base_requests is not None and att.requests < self.base_requests * scale)
            self._add(attempts, att, on_attempt)
            limit = "no more requests to replay" if exhausted else self._limit(2 * scale)
            if att.verdict in ("short", "ambiguous"):
                if limit is None:
                    scale = self._next_scale(att, scale)
                    continue
                if att.verdict == "short" and exhausted:  # the whole workload: judge its window
                    att.verdict = "holds" if all(o["holds"] for o in att.objectives.values()) else "fails"
                    decided, reason = att.verdict, f"{att.steady.reason}; judged on it ({limit})"
                else:
                    decided = "undecided"
                    reason = f"{att.steady.reason} at {att.requests:,} requests ({limit})"
                break
            if att.verdict in ("holds", "fails") and len(self.seeds) == 1 and _close(att.objectives):
                pooled = self._close_call(knob, runs, scale)
                if pooled.verdict in ("short", "ambiguous"):  # (the extra seeds judge the objectives only)
                    holds = all(o["holds"] for o in pooled.objectives.values())
                    pooled.steady, pooled.verdict = att.steady, "holds" if holds else "fails"
                att = pooled
                self._add(attempts, att, on_attempt)
            before = by_scale[max(by_scale)] if by_scale else None
            by_scale[scale] = att
            if self.first_decided is None:
                self.first_decided = scale
            if before is not None and before.verdict == att.verdict:
                decided, reason = att.verdict, f"{att.steady.reason}; confirmed at {att.requests:,} requests"
                break
            if _decisive(att):
                decided = att.verdict
                reason = f"{att.steady.reason}; beyond doubt at {att.requests:,} requests"
                break
            if limit is not None:
                if before is not None:  # two lengths disagree and the run cannot grow
                    decided = "undecided"
                    reason = (f"{before.verdict} at {before.requests:,} requests but {att.verdict} at "
                              f"{att.requests:,}; no longer run to settle it ({limit})")
                else:
                    decided = att.verdict
                    reason = f"{att.steady.reason}; not confirmed by a longer run ({limit})"
                break
            scale *= 2
        if self.first_decided is not None:  # the next probe starts at the length this one first decided at
            self.start_scale, self.first_decided = self.first_decided, None
        probe = Probe(value, decided, reason, att.objectives, attempts, requests_per_s)
        summary, df = runs[0]
        probe.usd_per_hour = (summary.get("cost") or {}).get("usd_per_hour")
        probe.usd_per_million_output_tokens, probe.usd_per_million_tokens = _per_million(
            probe.usd_per_hour, df, steady_state(df, self.need))  # (the first seed's own window)
        return probe

    @staticmethod
    def _add(attempts: list[Attempt], att: Attempt, on_attempt: Callable[[Attempt], None] | None) -> None:
        attempts.append(att)
        if on_attempt is not None:
            on_attempt(att)

    def _next_scale(self, att: Attempt, scale: int) -> int:
        """The next scale for a short or ambiguous run: double it, or more at once when the window's request
        count or the warm-up says by how much (the power of two that covers the shortfall), within the
        limits."""
        w = att.steady.window
        factor = 2.0
        if att.verdict == "short":
            factor = max(factor, self.need / max(w.requests, 1))
            if w.end_s > 0:
                factor = max(factor, w.start_s / (MAX_WARMUP_FRACTION * w.end_s))
        nxt = scale * 2 ** max(1, math.ceil(math.log2(factor) - 1e-9))
        while self._limit(nxt) is not None and nxt > 2 * scale:
            nxt //= 2
        return nxt

    def _limit(self, scale: int) -> str | None:
        """Why a run of `scale` x the scenario's length is not allowed (None: it is)."""
        if scale > self.max_extension:
            return f"--max-extension {self.max_extension}"
        if self.base_requests is not None and self.base_requests * scale > MAX_REQUESTS:
            return f"{MAX_REQUESTS:,} requests per run"
        if self.base_duration is not None and self.base_duration * scale > MAX_SECONDS:
            return f"{MAX_SECONDS:g} s per run"
        return None

    def _close_call(self, knob: list[str], runs, scale: int) -> Attempt:
        """The attempt again with CLOSE_SEEDS more seeds, the objectives over the windows pooled."""
        extra = [self.seeds[-1] + i for i in range(1, CLOSE_SEEDS + 1)]
        more = self._runs(knob, scale, extra)
        return self._attempt([*runs, *more], scale, [*self.seeds, *extra], pooled=True)


def _pooled_values(frames: list[pd.DataFrame], states: list[SteadyState],
                   slo: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """Each objective's percentile over the union of the runs' window requests."""
    out: dict[str, float | None] = {}
    for o in objectives(slo):
        x = np.concatenate([window_population(df, st.window, o.metric)
                            for df, st in zip(frames, states, strict=True)])
        out[o.metric] = float(np.percentile(x, o.quantile)) if x.size else None
    return out


def _close(objs: dict[str, dict[str, Any]]) -> bool:
    return any(o["bound_s"] is not None and abs(o["bound_s"] / o["threshold_s"] - 1) < CLOSE
               for o in objs.values())


def _decisive(att: Attempt) -> bool:
    if att.verdict == "unstable":
        return att.steady.decisive
    if att.verdict == "fails":
        return any(not o["holds"] and (o["bound_s"] is None or o["bound_s"] >= FAILS_AT * o["threshold_s"])
                   for o in att.objectives.values())
    return False


def _per_million(usd_per_hour: float | None, df: pd.DataFrame,
                 st: SteadyState) -> tuple[float | None, float | None]:
    """USD per million output and total tokens at the window's served token rate."""
    w = st.window
    length = w.end_s - w.start_s
    if usd_per_hour is None or length <= 0:
        return None, None
    a = df["arrival_s"].to_numpy(np.float64)
    inside = (a >= w.start_s) & (a <= w.end_s) & df["finish_s"].notna().to_numpy()
    if "rejected" in df.columns:
        inside &= df["rejected"].to_numpy() == 0
    out_tok = float((df["output_len"].to_numpy(np.float64) * df["n"].to_numpy(np.float64))[inside].sum())
    total = out_tok + float(df["prompt_len"].to_numpy(np.float64)[inside].sum())

    def per(tokens: float) -> float | None:
        return usd_per_hour / (tokens / length * 3600) * 1e6 if tokens > 0 else None

    return per(out_tok), per(total)
