"""What `kvsim plan` prints (and report.html shows): a line per attempt and per probe, the probes' table,
the cost table and the answer, as plain text and rows, with units on every figure."""

from __future__ import annotations

from typing import Any

from kvsim.schema import objectives
from kvsim.sweep.plan import CostPlan, Plan
from kvsim.sweep.probe import Attempt, Probe


def secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g} s"


def _num(x: float | None, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def usd(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"${x:,.{digits}f}"


def value_text(plan: Plan, value: float | None) -> str:
    """A knob value with its unit, and the request rate it means for a max_rate plan."""
    if value is None:
        return "-"
    if plan.find != "max_rate":
        return f"{int(value)} replica{'s' if int(value) != 1 else ''}"
    rps = plan.requests_per_s(value)
    if plan.unit == "requests/s":
        return f"{value:.6g} requests/s"
    return f"{value:.6g} {plan.unit} ({rps:.4g} requests/s)"


def objectives_text(objectives: dict[str, dict[str, Any]]) -> str:
    return ", ".join(f"{m} {o['percentile']} {secs(o['bound_s'])}" for m, o in objectives.items())


def attempt_line(plan: Plan, value: float, a: Attempt, where: str = "") -> str:
    """One run of a probe (stderr while the search runs)."""
    pooled = f", {len(a.seeds)} seeds pooled" if a.pooled else ""
    return (f"  {where}{value_text(plan, value)} at {a.requests:,} requests{pooled}: {a.verdict} "
            f"({objectives_text(a.objectives)}; {a.steady.reason})")


def probe_line(plan: Plan, p: Probe, where: str = "") -> str:
    """A probe's verdict and why (stderr while the search runs)."""
    return (f"probe {where}{value_text(plan, p.value)}: {p.verdict} ({objectives_text(p.objectives)}): "
            f"{p.reason}")


def probe_table(plan: Plan) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the probes sorted by value: the knob (and the request rate it means where the
    knob counts sessions or episodes), the verdict, each objective, the backlog growth and the length of
    the run that decided it (plan.json has every figure)."""
    knob = plan.unit if plan.find == "max_rate" else "replicas"
    rates = plan.find != "max_rate" or plan.unit != "requests/s"
    header = [knob, *(["req/s"] if rates else []), "verdict"]
    header += [f"{o.metric} {o.stat} (<= {o.threshold_s:g} s)" for o in objectives(plan.slo)]
    header += ["backlog growth", "requests"]
    rows = []
    for p in sorted(plan.probes, key=lambda p: p.value):
        last = p.decided
        g = last.steady.backlog.growth_fraction if last is not None else None
        rows.append([
            f"{p.value:.6g}" if plan.find == "max_rate" else str(int(p.value)),
            *([_num(p.requests_per_s)] if rates else []), p.verdict,
            *(secs(o["bound_s"]) for o in p.objectives.values()),
            "-" if g is None else f"{100 * g:.2g}%", "-" if last is None else f"{last.requests:,}"])
    return header, rows


def answer_line(plan: Plan) -> str:
    """The answer with its units, the nearest failing value and the margin."""
    if plan.note:
        return f"answer: {plan.note}"
    best = plan.at(plan.answer)
    beyond = "" if plan.failing is None else f"; {value_text(plan, plan.failing)} does not hold"
    margin = ", ".join(f"{m} {secs(o['margin_s'])} under" for m, o in best.objectives.items())
    conf = f"; each objective's 95% upper bound over {plan.repeats} seeds" if plan.repeats > 1 else ""
    load = ""
    if plan.find != "max_rate":
        load = f" at {_num(best.requests_per_s)} requests/s" if best.requests_per_s is not None else ""
    return f"answer: {plan.key} = {value_text(plan, plan.answer)}{load}{beyond}{conf}; margin {margin}"


def cost_table(plan: CostPlan) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the min_cost candidates: hardware, TP, the fewest replicas, GPUs, USD per hour and
    per million output / total tokens at the steady-state load, and why a candidate has no answer."""
    header = ["hardware", "TP", "replicas", "GPUs", "USD/hour", "USD/M out tok", "USD/M tok", "note"]
    rows = []
    for c in plan.candidates:
        d = c.doc()
        rows.append([c.hardware, str(c.tp), "-" if d["replicas"] is None else str(int(d["replicas"])),
                     "-" if d["gpus"] is None else str(d["gpus"]), usd(d["usd_per_hour"]),
                     usd(d["usd_per_million_output_tokens"], 3), usd(d["usd_per_million_tokens"], 3), c.note])
    return header, rows


def cost_answer_line(plan: CostPlan) -> str:
    best = plan.best
    p = best.best
    load = "" if p.requests_per_s is None else f" at {p.requests_per_s:.4g} requests/s"
    return (f"answer: {best.hardware} TP{best.tp} x {int(best.plan.answer)} replicas{load}: "
            f"{usd(best.usd_per_hour)}/hour, {usd(p.usd_per_million_output_tokens, 3)} per million output "
            f"tokens, {usd(p.usd_per_million_tokens, 3)} per million tokens")


def render_html(plan: Plan | CostPlan, png, label: str = "") -> str:
    """report.html of a plan: the answer, the probes' (or candidates') table, plan.png, and each probe's
    verdict with why."""
    from kvsim.metrics import html

    title = f"kvsim plan --find {plan.find}" + (f": {label}" if label else "")
    slo = ", ".join(str(o) for o in objectives(plan.slo))
    if isinstance(plan, CostPlan):
        answer = cost_answer_line(plan) if plan.best is not None else "no candidate meets the SLO"
        header, rows = cost_table(plan)
        probes = [(f"{c.hardware} TP{c.tp} x ", c.plan, p) for c in plan.candidates if c.plan is not None
                  for p in c.plan.probes]
    else:
        answer = answer_line(plan) if plan.answer is not None or plan.note else "no answer"
        header, rows = probe_table(plan)
        probes = [("", plan, p) for p in plan.probes]
    blocks = [html.paragraph(answer, "answer"),
              html.heading("Candidates" if isinstance(plan, CostPlan) else "Probes"),
              html.table(header, rows),
              html.image(png, "plan"), html.heading("Every probe, in the order run"),
              html.bullets(probe_line(pl, p, where) for where, pl, p in probes)]
    return html.page(title, f"SLO {slo}; {plan.repeats} seed(s) per run", blocks)
