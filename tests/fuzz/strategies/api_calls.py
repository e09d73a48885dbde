"""Python API calls (`api_cases`, run in the worker's API mode: see worker.py): `kvsim.run`, `load`,
`compare`, `sweep` and `plan` with good arguments and with wrong types and values (numbers, bytes,
objects, paths that are not there, NaN, dicts nested past Python's recursion limit, strings where lists
go and lists where strings go). Each call must return (a valid call: the documented type) or raise
`kvsim.KvsimError` with a one-line message; any other exception is a failure.

Arguments are Python source (`Src`), so a case's reproduction is the call itself."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import PASSWD_LINE, pick, small_scenario, to_yaml

# ---------------------------------------------------------------------------------------------------
# Python source for argument values


class Src:
    """An argument given as Python source (repr gives the text back)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


TINY = small_scenario(3)
DEEP = Src("_deep(10_000)")
"""A dict nested 10,000 deep (built by _deep, defined at the top of every call's source)."""
PRELUDE = ("def _deep(n):\n    d = {}\n    for _ in range(n):\n        d = {'x': d}\n    return d\n"
           "class _Odd:\n    def __repr__(self):\n        raise ValueError('no repr')\n")

# (value, verdict): verdict True = the call must raise KvsimError, None = either way
SCENARIO: tuple[tuple[Any, bool | None], ...] = (
    ("s.yaml", None), ("s.yaml", None), (Src("Path('s.yaml')"), None), (TINY, None),
    (Src("kvsim.load('s.yaml')"), None), (123, True), (1.5, True), (True, True), (b"s.yaml", True),
    (["s.yaml"], True), (Src("object()"), True), ("missing.yaml", True), (".", True), ("", True),
    ("/etc/passwd", True), ({"model": 5}, True), ({1: 2}, True), (DEEP, True),
    ({**TINY, "simulation": {"requests": Src("nan")}}, True), ({**TINY, "kv": {"block_size": 0}}, True),
    ({**TINY, "kv": None}, True), ({**TINY, "kv": [1]}, True), ({**TINY, "nonsense": 1}, True),
    (Src("_Odd()"), True), ({**TINY, "model": Src("_Odd()")}, True), ("t.csv", True), ("folder", True),
)
OVERRIDES: tuple[tuple[Any, bool | None], ...] = (
    (None, None), (None, None), ({}, None), ({"kv.block_size": 32}, None), ({"simulation.requests": 2}, None),
    ({"kv.prefix_cache": "hash", "kv.block_size": 32}, None), ("x", True), ("kv.block_size=32", True),
    ([("kv.block_size", 32)], True), ({1: 2}, True), ({None: 2}, True), ({"": 1}, True), ({"kv..x": 1}, True),
    ({"kv.block_size": None}, True), ({"kv.block_size": Src("nan")}, True), ({"kv.block_size": "x"}, True),
    ({"kv.block_size": Src("object()")}, True), ({"kv.block_size": [16]}, True), ({"kv": None}, True),
    ({"kv.blok_size": 16}, True), ({"kv.block_size": DEEP}, True), ({"kv.block_size": 10**40}, True),
    ({"kv.block_size": Src("_Odd()")}, True), ({"slo": {"ttft_s": {"p99": -1}}}, True),
    ({"workload.arrival.rate": Src("inf")}, True), ({"kv.block_size": b"16"}, None),
)
KWARGS: tuple[tuple[dict[str, Any], bool | None], ...] = (
    ({}, None), ({}, None), ({"kv__block_size": 32}, None), ({"simulation__requests": 2}, None),
    ({"kv__": 1}, True), ({"__": 1}, True), ({"kv__blok_size": 1}, True), ({"kv__block_size": None}, True),
    ({"simulation__requests": 0}, True), ({"kv__block_size": Src("nan")}, True),
)
VARY: tuple[tuple[Any, bool | None], ...] = (
    ({"kv.block_size": [16, 32]}, None), ({"kv.dtype": ["bf16", "fp8"]}, None),
    ({"kv.block_size": (16,)}, None),
    ({"kv.block_size": [16], "kv.prefix_cache": ["none", "hash"]}, None), ({"kv.block_size": "16"}, True),
    ({"kv.block_size": 16}, True), ({"kv.block_size": []}, True), ({}, True), (None, True), ([16, 32], True),
    ("kv.block_size=16,32", True), ({"kv.block_size": [None]}, True), ({"kv.block_size": [Src("nan")]}, True),
    ({5: [16]}, True), ({"": [16]}, True), ({"kv.block_size": [{"a": 1}]}, True),
    ({"kv.block_size": {16, 32}}, True), ({"kv.block_size": [16, 16]}, None),
    ({"kv.block_size": [DEEP]}, True),
    ({"kv.block_size": [Src("_Odd()")]}, True), ({"kv.block_size": b"16"}, True),
)
SEED: tuple[tuple[Any, bool | None], ...] = (
    (None, None), (None, None), (0, None), (7, None), (-1, True), ("x", True), (1.5, True), (2**70, True),
    (True, True), (Src("nan"), True), ([1], True),
)
JOBS: tuple[tuple[Any, bool | None], ...] = (
    (1, None), (1, None), (1, None), (2, None), (0, True), (-1, True), ("2", True), (1.5, True), (None, True),
    (True, True), (10**9, True), (Src("nan"), True),
)
SWEEP_SPEC: tuple[tuple[Any, bool | None], ...] = (
    ({"scenario": "s.yaml", "grid": {"kv.block_size": [16, 32]}}, None),
    ({"scenario": "s.yaml", "points": [{"kv.dtype": "fp8"}], "repeats": 2}, None),
    ("g.yaml", None), (Src("Path('g.yaml')"), None), (5, True), (None, True), ([], True),
    ("missing.yaml", True),
    ({"grid": 5}, True), ({"scenario": "s.yaml", "grid": {"kv.block_size": "16"}}, True),
    ({"scenario": "s.yaml", "repeats": True}, True), ({"scenario": 5}, True), ({"points": "abc"}, True),
    ({"scenario": "s.yaml", "grid": {"kv.block_size": [0]}}, True), ({"bogus": 1}, True),
    ({"scenario": "s.yaml", "grid": {f"k{i}": list(range(30)) for i in range(10)}}, True),
    ({"scenario": "s.yaml", "grid": {"simulation.seed": [0, 1]}, "repeats": 2}, True), (DEEP, True),
    ({"scenario": "s.yaml", "set": "x"}, True), ({"scenario": "s.yaml", "grid": {5: [16]}}, True),
    ({"scenario": "s.yaml", "grid": {"kv.block_size": (16, 32)}}, None),
)
BACKEND: tuple[tuple[dict[str, Any], bool | None], ...] = (
    ({}, None), ({}, None), ({"backend": "process"}, None), ({"backend": None}, True), ({"backend": 5}, True),
    ({"backend": "dask"}, True), ({"address": "127.0.0.1:1"}, True),
    ({"backend": "ray", "address": "127.0.0.1:1"}, True), ({"backend": "ray", "address": 5}, True),
    ({"backend": "ray", "address": ""}, True), ({"backend": "ray", "address": ["h:1"]}, True),
    ({"backend": ["process"]}, True),
)
FIND: tuple[tuple[Any, bool | None], ...] = (
    ("max_rate", None), ("min_replicas", None), ("min_cost", None), ("nope", True), (5, True), (None, True),
    (["max_rate"], True), ("", True),
)
SLO: tuple[tuple[Any, bool | None], ...] = (
    ({"ttft_s": {"p99": 2}}, None), ({"e2e_s": {"p50": 30}, "tpot_s": {"p90": 0.1}}, None),
    ("ttft_s.p99=2", True), ({}, True), (None, True), ({"ttft_s": 2}, True), ({"ttft_s": {"p99": -1}}, True),
    ({"ttft_s": {"p99": Src("nan")}}, True), ({"nope": {"p99": 1}}, True), ([("ttft_s", 2)], True),
    ({"ttft_s": {"p99": 1, "p50": 1}}, True), ({"ttft_s": {"p99": "2"}}, True), (DEEP, True),
)
PLAN_KW: tuple[tuple[dict[str, Any], bool | None], ...] = (
    ({}, None), ({}, None), ({"repeats": 2}, None), ({"precision": 0.5}, None), ({"max_extension": 2}, None),
    ({"repeats": 0}, True), ({"repeats": "3"}, True), ({"repeats": 101}, True), ({"precision": 1e-17}, True),
    ({"precision": "x"}, True), ({"precision": Src("nan")}, True), ({"max_extension": 0}, True),
    ({"max_extension": "2"}, True), ({"jobs": 0}, True), ({"jobs": "2"}, True), ({"qps": "x"}, True),
    ({"qps": -1}, True), ({"qps": Src("nan")}, True), ({"overrides": "x"}, True),
    ({"overrides": {1: 2}}, True),
    ({"overrides": {"kv.block_size": 0}}, True), ({"hardware": "h100-sxm"}, True), ({"tps": 1}, True),
    ({"tps": [0]}, True), ({"hardware": [5]}, True), ({"tps": [True]}, True), ({"hardware": [None]}, True),
)


def _args(*positional: Any, **keywords: Any) -> str:
    return ", ".join([repr(a) for a in positional] + [f"{k}={v!r}" for k, v in keywords.items()])


@st.composite
def api_cases(draw) -> Case:
    """One API call, its arguments drawn good or bad (most cases one bad argument)."""
    fn = draw(st.sampled_from(["run", "run", "load", "load", "compare", "sweep", "plan"]))
    mistake = draw(st.integers(0, 3)) > 0
    which = draw(st.integers(0, 3))  # the argument the mistake goes into
    files = {"s.yaml": to_yaml(TINY),
             "g.yaml": to_yaml({"scenario": "s.yaml", "grid": {"kv.block_size": [16]}}),
             "t.csv": "a,b\n1,2\n", "folder": None}
    returns = {"run": "Result", "load": "Scenario", "compare": "DataFrame", "sweep": "DataFrame",
               "plan": "dict"}[fn]
    bad = False

    def arg(pool, slot: int):
        nonlocal bad
        value, verdict = pick(draw, pool, mistake and which == slot)
        bad |= verdict
        return value

    if fn in ("run", "load"):
        scenario = arg(SCENARIO, 0)
        overrides = arg(OVERRIDES, 1)
        kw = arg(KWARGS, 2)
        args = _args(scenario, **({"overrides": overrides} if overrides is not None else {}), **kw)
        if mistake and ((which == 0 and (overrides or kw)) or (which == 1 and kw)):
            bad = False  # a later override may replace the bad value: a run or an error
    elif fn == "compare":
        scenario = arg(SCENARIO, 0)
        vary = arg(VARY, 1)
        seed = arg(SEED, 2)
        jobs = arg(JOBS, 3)
        if jobs == 2 and draw(st.integers(0, 3)):
            jobs = 1  # a process pool costs a second or two: drawn rarely
        args = _args(scenario, vary, overrides={"simulation.requests": 2}, seed=seed, jobs=jobs)
    elif fn == "sweep":
        spec = arg(SWEEP_SPEC, 0)
        backend = arg(BACKEND, 1)
        jobs = arg(JOBS, 2)
        if jobs == 2 and draw(st.integers(0, 3)):
            jobs = 1
        args = _args(spec, **backend, jobs=jobs)
    else:  # plan: the few-request scenario makes every probe "too short" at once (a KvsimError)
        scenario = arg(SCENARIO, 0)
        find = arg(FIND, 1)
        slo = arg(SLO, 2)
        kw = arg(PLAN_KW, 3)
        if find == "min_cost" and not {"hardware", "tps"} & set(kw):
            kw = {**kw, "hardware": ["h100-sxm"], "tps": [1]}
        if find != "min_cost" and {"hardware", "tps"} & set(kw):
            bad = True  # min_cost's candidates: no other search may ignore them silently
        if find == "max_rate" and "qps" in kw:
            bad = True
        kw = {"max_extension": 1, **kw}
        args = _args(scenario, find, slo, **kw)
        returns = ""  # (too short to judge: an error, or a plan; never a traceback)
    call = f"{PRELUDE}result = kvsim.{fn}({args})"
    expect = "fail" if bad else "pass" if fn in ("run", "load") and not mistake else "any"
    return Case("api", [], files, expect=expect, why=f"kvsim.{fn}", call=call, returns=returns,
                forbid=(PASSWD_LINE,))
