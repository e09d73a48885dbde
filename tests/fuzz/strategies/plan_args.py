"""`kvsim plan` command lines (`plan_cases`): every --find kind and bad ones, --slo items (and the
scenario's own `slo:`), --qps, --hardware, --tp, --precision, --repeats, --max-extension, --jobs, --seed,
--set and --out, each drawn with good and bad values.

The scenario is a few requests long and --max-extension small, so a probe that passes the flag checks
is judged "too short" at once (a one-line error after the probe lines): plans that reach an answer take
seconds and are the hand-written cases in surfaces_regressions.py. --repeats and --max-extension stay at
most 2 and min_cost at most 4 candidates, so a case costs a few seconds at worst (under the 10 s limit
on a loaded machine)."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import PASSWD_LINE, pick, small_scenario, to_yaml

# ---------------------------------------------------------------------------------------------------
# Flag values: (value, verdict), verdict True = the whole command must fail

FIND: tuple[tuple[str, bool | None], ...] = (
    ("max_rate", None), ("max_rate", None), ("min_replicas", None), ("min_replicas", None),
    ("min_cost", None), ("min_cost", None), ("MAX_RATE", True), ("max-rate", True), ("", True),
    ("nope", True), ("min_cost ", True), ("[bold]x[/]", True), ("max_rate,min_cost", True),
)
SLO_ITEMS: tuple[tuple[str, bool | None], ...] = (
    ("ttft_s.p99=2", None), ("tpot_s.p90=0.05", None), ("e2e_s.p50=30", None), ("queue_s.p99.9=1", None),
    ("ttft_s.p100=5", None), ("e2e_s.p0.1=100", None), ("ttft_s.p99=1e-300", None), ("ttft_s.p99=1e9", None),
    ("ttft_s.p99", True), ("ttft_s=2", True), ("foo.p99=1", True), ("ttft_s.p0=1", True),
    ("ttft_s.p101=1", True), ("ttft_s.p99=-1", True), ("ttft_s.p99=0", True), ("ttft_s.p99=nan", True),
    ("ttft_s.p99=inf", True), ("ttft_s.p99=1e400", True), (".p99=1", True), ("ttft_s.=1", True),
    ("ttft_s.p99=abc", True), ("ttft_s.p99=2=3", True), ("TTFT_S.p99=1", True), ("ttft_s.P99=1", True),
    ("ttft_s.99=1", True), ("ttft_s.p99=", True), ("=", True), ("ttft_s.p99=true", True),
    ("ttft_s.p99=1e10", True), ("ttft_s.p-5=1", True), ("ttft_s.pnan=1", True), ("ttft_s.p99=[1]", True),
)
QPS: tuple[tuple[str, bool | None], ...] = (
    ("5", None), ("0.5", None), ("1e6", None), ("0", True), ("-1", True), ("nan", True), ("inf", True),
    ("1e300", True), ("1e-300", True), ("abc", True), ("", True), ("2e6", True),
)
HARDWARE: tuple[tuple[str, bool | None], ...] = (
    ("h100-sxm", None), ("h100-sxm,a100-80gb", None), ("h200,h200", None), ("nope", None), (",", None),
    ("", None), ("/etc/passwd", None), ("h100-sxm,,h200", None), ("[bold]x[/]", None),
)
TP: tuple[tuple[str, bool | None], ...] = (
    ("1", None), ("1,2", None), ("2,2", None), ("0", True), ("-1", True), ("1.5", True), ("abc", True),
    ("1,,2", None), (",", None), ("", None), ("3", None), ("2048", None), ("99999999999999999999", None),
    ("1e3", True), ("true", True),
)
PRECISION: tuple[tuple[str, bool | None], ...] = (
    ("0.05", None), ("0.0001", None), ("0.5", None), ("0.99", None), ("1e-17", True), ("0", True),
    ("-0.1", True), ("1", True), ("2", True), ("nan", True), ("inf", True), ("0.00009", True), ("abc", True),
)
REPEATS: tuple[tuple[str, bool | None], ...] = (
    ("1", None), ("2", None), ("0", True), ("-1", True), ("101", True), ("1000", True),
    ("1.5", True), ("abc", True), ("99999999999999999999", True),
)
MAX_EXTENSION: tuple[tuple[str, bool | None], ...] = (
    ("1", None), ("1", None), ("2", None), ("0", True), ("-3", True), ("1025", True),
    ("x", True),
)
JOBS: tuple[tuple[str, bool | None], ...] = (("1", None), ("1", None), ("2", None), ("0", True),
                                             ("257", True), ("x", True))
SEED: tuple[tuple[str, bool | None], ...] = (("0", None), ("7", None), ("-1", True),
                                             ("9223372036854775807", None), ("9223372036854775808", True),
                                             ("x", True))
SET: tuple[tuple[str, bool | None], ...] = (
    ("kv.block_size=32", None), ("workload.arrival.rate=50", None), ("parallelism.replicas=2", None),
    ("kv.block_size=0", True), ("workload.arrival.rate=.nan", True), ("workload.arrival.rate=0", True),
    ("simulation.requests=0", True), ("nonsense=1", True), ("slo={ttft_s: {p99: 2}}", None),
    ("slo=5", True), ("slo={ttft_s: {p99: -2}}", True), ("workload.kind=trace", True),
    ("simulation.duration_s=0.5", None), ("cost.model=roofline", None),
)
SCENARIO_SLO: tuple[tuple[Any, bool | None], ...] = (
    (None, None), ({"ttft_s": {"p99": 2.0}}, None), ({"e2e_s": {"p50": 10}, "tpot_s": {"p90": 0.1}}, None),
    ({"ttft_s": {"p99": 2, "p50": 1}}, True), ({"ttft_s": 2}, True), ({"nope": {"p99": 1}}, True),
    ("fast", True), ({}, None), ([{"ttft_s": {"p99": 2}}], True), ({"ttft_s": {"p99": None}}, True),
)
WORKLOADS: tuple[dict[str, Any], ...] = (
    {}, {"kind": "chat", "chat": {"turns": {"dist": "fixed", "value": 2}}},
    {"kind": "agentic", "agentic": {"steps": {"dist": "fixed", "value": 2}}},
    {"kind": "rag", "rag": {"passages": 50, "top_k": 2}},
)


@st.composite
def plan_cases(draw) -> Case:
    """A `kvsim plan` command line on a few-request scenario: --find and the flags its kind takes
    (and, sometimes, one it does not), each with a good value, and in most cases one bad one."""
    mistake = draw(st.sampled_from([None, None, "find", "slo", "scenario-slo", "flag", "flag", "flag", "set",
                                    "extension", "no-slo"]))
    find, bad = pick(draw, FIND, mistake == "find")
    sc = small_scenario(draw(st.sampled_from([5, 20])))
    sc["workload"]["arrival"] = {"rate": draw(st.sampled_from([2, 5, 50]))}
    wl = draw(st.sampled_from(WORKLOADS))
    if wl:
        sc["workload"] = {**wl, "arrival": sc["workload"]["arrival"],
                          "output_len": {"dist": "fixed", "value": 4}}
    if mistake == "scenario-slo" or (mistake != "no-slo" and draw(st.booleans())):
        slo, verdict = pick(draw, SCENARIO_SLO, mistake == "scenario-slo")
        if slo is not None:
            sc["slo"] = slo
        bad |= verdict
    argv = ["plan", "s.yaml", "--find", find]
    slos = [] if mistake == "no-slo" else draw(st.lists(st.sampled_from(
        [item for item in SLO_ITEMS if item[1] is not True]), min_size=0 if "slo" in sc else 1, max_size=2,
        unique_by=lambda item: item[0].split(".")[0]))
    if mistake == "slo":
        if slos and draw(st.booleans()):
            slos.append(slos[0])  # one metric twice
        else:
            slos.append(draw(st.sampled_from([item for item in SLO_ITEMS if item[1] is True])))
    for item, verdict in slos:
        argv += ["--slo", item]
        bad |= verdict is True
    metrics = [item.split(".")[0] for item, _ in slos]
    if len(set(metrics)) < len(metrics):
        bad = True  # one percentile per metric
    if not slos and "slo" not in sc:
        bad = True  # a plan needs an SLO
    flags: list[tuple[str, tuple[tuple[str, bool | None], ...]]] = [
        ("--precision", PRECISION), ("--repeats", REPEATS), ("--jobs", JOBS), ("--seed", SEED)]
    if find == "min_cost" or draw(st.integers(0, 5)) == 0:
        flags += [("--hardware", HARDWARE), ("--tp", TP)]
    if find in ("min_replicas", "min_cost") or draw(st.integers(0, 5)) == 0:
        flags.append(("--qps", QPS))
    given: dict[str, tuple[str, bool]] = {}
    chosen = [draw(st.sampled_from(flags)) for _ in range(draw(st.integers(0, 3)))]
    if find == "min_cost" and draw(st.integers(0, 4)):
        chosen += [("--hardware", HARDWARE), ("--tp", TP)]
    if mistake == "set" or draw(st.integers(0, 3)) == 0:
        chosen.append(("--set", SET))
    for i, (flag, pool) in enumerate(chosen):
        bad_one = (mistake == "flag" and i == 0) or (mistake == "set" and flag == "--set")
        value, verdict = pick(draw, pool, bad_one)
        if flag == "--jobs" and value == "2" and draw(st.integers(0, 3)):
            value = "1"  # a process pool costs a second: drawn rarely
        argv += [flag, value] if draw(st.booleans()) else [f"{flag}={value}"]
        if flag == "--set":
            bad |= verdict
        else:
            given[flag] = (value, verdict)  # a single-valued flag given twice: the last counts
    listed = {flag for flag in ("--hardware", "--tp")
              if flag in given and any(x.strip() for x in given[flag][0].split(","))}
    if find == "min_cost" and listed != {"--hardware", "--tp"}:
        bad = True  # min_cost needs both lists
    if find in ("max_rate", "min_replicas") and listed:
        bad = True  # candidates are min_cost's: another search must not ignore them silently
    if find == "max_rate" and "--qps" in given:
        bad = True  # --qps is min_replicas' and min_cost's load
    bad |= any(verdict for _, verdict in given.values())
    extension, verdict = pick(draw, MAX_EXTENSION, mistake == "extension")
    bad |= verdict
    argv += ["--max-extension", extension, "--out", "p"]
    return Case("plan", argv, {"s.yaml": to_yaml(sc)}, expect="fail" if bad else "any",
                why=f"plan --find {find!r}, mistake: {mistake}", forbid=(PASSWD_LINE,), progress=True)
