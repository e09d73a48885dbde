"""Command lines: argument lists for every subcommand, each flag drawn with good and bad values, and
sometimes an unknown flag or a stray argument (`cli_cases`)."""

from __future__ import annotations

import json
from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import PASSWD_LINE, TINY_SCENARIO
from .traces import mooncake_record

# ---------------------------------------------------------------------------------------------------
# Command lines

CLI_FILES: dict[str, Any] = {
    "s.yaml": TINY_SCENARIO, "t.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n",
    "t.jsonl": json.dumps(mooncake_record(0, 1000, 10)) + "\n"
    + json.dumps(mooncake_record(5, 600, 3)) + "\n",
    "file.txt": "a user's file\n", "folder": None, "folder/keep.md": "keep me\n",
}

# (value, verdict): verdict True = the whole command must fail, None = either way
SET_ITEMS: tuple[tuple[str, bool | None], ...] = (
    ("kv.block_size=32", None), ("x", True), ("=1", True), ("a..b=1", True), (".=1", True), ("kv.=1", None),
    ("kv=1", True), ("kv.block_size=", True), ("kv.block_size==3", True), ("name=[bold]x[/]", None),
    ("simulation.requests=2", None), ("workload.trace.path=/etc/passwd", None),
    ("kv.block_size={a: 1}", True),
    ("kv.block_size=[1", True), ("simulation=~", None), ("simulation.seed=-1", True),
    ("kv.block_size=.inf", True),
    ("workload.arrival.rate=.nan", True), ("kv.block_size=true", True), ("name=" + "n" * 20000, None),
    ("kv.block_size=1" + "0" * 5000, True), ("kv.block_size.x=1", True), ("simulation.requests=0", True),
    ("kv block_size=1", True), ("kv.layout=[bold]x[/]", True), ("name=:smile:", None), ("\x01=1", True),
    ("kv.block_size=16\nkv.dtype=fp8", True), ("workload.kind=trace", True),
)
VARY_ITEMS: tuple[tuple[str, bool | None], ...] = (
    ("kv.block_size=16,32", None), ("kv.block_size=", True), ("kv.block_size", True), ("=1,2", True),
    ("kv.block_size=16,,32", None), ("kv.block_size=16,16", None), ("kv.layout=paged,nonsense", True),
    ("simulation.requests=2,3", None), ("kv.block_size=.nan,16", True), ("x=1,2", True),
    ("kv.dtype=bf16,fp8", None), ("workload.n=1,999", True), ("kv.block_size=true,16", True),
    ("kv.block_size=" + ",".join(["16"] * 200), None),
)
INT_VALUES: tuple[tuple[str, bool | None], ...] = (
    ("1", None), ("2", None), ("0", None), ("-1", None), ("nan", True), ("", True), ("abc", True),
    ("1e3", True), ("99999999999999999999", None), ("1" + "0" * 5000, None), ("--", True), ("0x10", True),
    ("1000000000", None), ("10000000", None),
)
FLOAT_VALUES: tuple[tuple[str, bool | None], ...] = (
    ("0.5", None), ("1", None), ("0", None), ("-1", None), ("nan", True), ("inf", True), ("-inf", True),
    ("1e-300", None), ("1e400", True), ("", True), ("abc", True), ("2", None),
)
OUT_VALUES: tuple[tuple[str, bool | None], ...] = (
    ("out", None), ("nested/deeper/out", None), ("file.txt", True), ("folder", None), (".", None),
    ("..", None),
    ("", None), ("/dev/null", True), ("folder/keep.md", True), ("s.yaml", True),
)


def _pick(draw, pool: tuple[tuple[str, bool | None], ...]) -> tuple[str, bool]:
    value, verdict = draw(st.sampled_from(pool))
    return value, verdict is True


@st.composite
def cli_cases(draw) -> Case:
    """An argument list for one subcommand: its flags drawn with good and bad values, sometimes an
    unknown flag or a stray argument."""
    cmd = draw(st.sampled_from(["run", "run", "validate", "compare", "hitrate", "hitrate", "footprint",
                                "footprint", "models", "hardware", "policies", "version", "nonsense", ""]))
    argv: list[str] = [cmd] if cmd else []
    bad = cmd in ("nonsense",)
    opts: list[tuple[str, tuple[tuple[str, bool | None], ...]]] = []
    if cmd in ("run", "validate", "compare"):
        scenario, verdict = draw(st.sampled_from([("s.yaml", None), ("missing.yaml", True), ("folder", True),
                                                  ("/etc/passwd", True), ("-", True), ("t.csv", True)]))
        argv.append(scenario)
        bad |= verdict is True
        opts.append(("--set", SET_ITEMS))
        if cmd != "validate":
            opts += [("--seed", INT_VALUES), ("--out", OUT_VALUES)]
        if cmd == "compare":
            opts += [("--vary", VARY_ITEMS), ("--jobs", INT_VALUES)]
            if draw(st.booleans()):
                argv += ["--vary", "kv.block_size=16,32"]
    elif cmd == "hitrate":
        source, verdict = draw(st.sampled_from([("t.jsonl", None), ("t.csv", None), ("s.yaml", None),
                                                ("missing.jsonl", True), ("folder", True),
                                                ("/etc/passwd", True),
                                                ("file.txt", True)]))
        argv.append(source)
        bad |= verdict is True
        opts += [("--capacities", (("1,2,3", None), ("0", True), ("-1", True), ("nan", True), ("inf", True),
                                   ("1e30", None), ("", None), (",", None), ("abc", True),
                                   ("1" + "0" * 400, None),
                                   ("1.5", None))),
                 ("--unit", (("blocks", None), ("tokens", None), ("gib", None), ("parsecs", True))),
                 ("--block-size", INT_VALUES), ("--sample-rate", FLOAT_VALUES), ("--requests", INT_VALUES),
                 ("--model", (("llama-3-8b", None), ("nonexistent", None), ("", None))),
                 ("--kv-dtype", (("bf16", None), ("fp7", None), ("", None))), ("--out", OUT_VALUES)]
    elif cmd == "footprint":
        model, verdict = draw(st.sampled_from([("llama-3-8b", None), ("nonexistent", True), ("", True),
                                               ("/etc/passwd", True), ("folder", True),
                                               ("deepseek-v2-lite", None),
                                               ("[bold]x[/]", True)]))
        argv.append(model)
        bad |= verdict is True
        tokens, verdict = _pick(draw, INT_VALUES)
        argv += ["--tokens", tokens]
        bad |= verdict or tokens in ("0", "-1")
        opts += [("--kv-dtype", (("bf16", None), ("fp7", True), ("", True), ("int4", None))),
                 ("--tp", INT_VALUES), ("--hardware", (("h100-sxm", None), ("x", True), ("/etc/passwd", True),
                                                       ("", True), ("cpu", None))),
                 ("--gpu-memory-utilization", FLOAT_VALUES), ("--block-size", INT_VALUES)]
    last: dict[str, bool] = {}  # a single-valued option given twice: click keeps the last
    for _ in range(draw(st.integers(0, 3)) if opts else 0):
        flag, pool = draw(st.sampled_from(opts))
        value, verdict = _pick(draw, pool)
        if flag in ("--seed",) and value == "-1":
            verdict = True
        if flag in ("--jobs", "--tp", "--block-size", "--requests") and value in ("0", "-1"):
            verdict = True
        argv += [flag, value] if draw(st.integers(0, 4)) else [f"{flag}={value}"]
        if flag in ("--set", "--vary"):
            bad |= verdict
        else:
            last[flag] = verdict
    bad |= any(last.values())
    extra = draw(st.sampled_from([None] * 6 + ["--bogus", "-x", "stray", "--set", "--help", "--", "-"]))
    if extra is not None:
        argv.append(extra)
        bad |= extra in ("--bogus", "-x", "--set")
    if cmd in ("run", "compare", "hitrate") and "--out" not in " ".join(argv):
        argv += ["--out", "out"]
    if cmd in ("run", "compare") and not any("simulation.requests" in a for a in argv):
        argv += ["--set", "simulation.requests=2"]
    if "--help" in argv:
        bad = False  # click answers --help before it looks at anything else
    return Case("cli", argv, dict(CLI_FILES), expect="fail" if bad else "any", why=cmd or "no command",
                forbid=(PASSWD_LINE,))
