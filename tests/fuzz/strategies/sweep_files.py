"""`kvsim sweep` files and command lines (`sweep_cases`): small valid sweeps (grid, points, repeats over a
few-request scenario: at most 8 runs), sweep files with one mutation (bad axes and values, grids of up
to 10^15 runs, duplicate points, seeds that repeats already cover, wrong shapes, unknown keys, scenario
paths that are missing or folders), YAML-level abuse of the file, and --backend / --address / --jobs /
--seed / --out with good and bad values. A local Ray instance is never started (it takes seconds): ray
is drawn only with an address that cannot answer."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import PASSWD_LINE, Raw, pick, small_scenario, to_yaml
from .yaml_abuse import alias_bomb, deep_flow

# ---------------------------------------------------------------------------------------------------
# Axes: a scenario key and values that all run (each a few ms on the tiny scenario)

AXES: tuple[tuple[str, list[Any]], ...] = (
    ("kv.block_size", [16, 32, 8]), ("kv.dtype", ["bf16", "fp8", "int4"]),
    ("workload.arrival.rate", [2, 4.5, 100]), ("simulation.seed", [0, 10, 20]),
    ("hardware", ["h100-sxm", "a100-80gb", "h200"]), ("kv.prefix_cache", ["none", "hash", "radix"]),
    ("scheduler.max_num_seqs", [1, 4, 256]), ("model", ["llama-3-8b", "qwen2.5-7b", "llama-3.1-8b"]),
    ("parallelism.replicas", [1, 2]), ("router.policy", ["round_robin", "least_loaded", "prefix_aware"]),
    ("slo", [{"ttft_s": {"p99": 2}}, {"e2e_s": {"p50": 1}}]),
    ("pricing.usd_per_gpu_hour", [2.5, 0, 1e6]),
    ("kv", [{"block_size": 16}, {"prefix_cache": "hash", "dtype": "fp8"}]),
)
BAD_VALUES: tuple[tuple[str, Any], ...] = (
    ("kv.block_size", 0), ("kv.block_size", True), ("kv.block_size", Raw(".nan")), ("kv.dtype", "fp7"),
    ("workload.arrival.rate", -1), ("hardware", "nope"), ("model", "/etc/passwd"), ("nonsense", 1),
    ("kv.blok_size", 16), ("simulation.requests", 0), ("slo", {"ttft_s": 2}), ("router.policy", "best"),
    ("kv.tiers", [{"medium": "tape"}]), ("", 1), ("kv..block_size", 16), ("kv.block_size.x", 1),
)


def _some(draw, values: list[Any]) -> list[Any]:
    """One or two distinct values of an axis, in its order."""
    picked = draw(st.lists(st.sampled_from(range(len(values))), min_size=1, max_size=2, unique=True))
    return [values[i] for i in picked]


@st.composite
def valid_sweeps(draw) -> dict[str, Any]:
    """A sweep mapping of at most 8 runs over s.yaml."""
    doc: dict[str, Any] = {"scenario": "s.yaml"}
    if draw(st.booleans()):
        doc["set"] = {"simulation.requests": draw(st.sampled_from([2, 3])),
                      **({"kv.block_size": 32} if draw(st.booleans()) else {})}
    axes = draw(st.lists(st.sampled_from(AXES), max_size=2, unique_by=lambda a: a[0]))
    if axes:
        doc["grid"] = {key: _some(draw, values) for key, values in axes}
    if draw(st.booleans()) or not axes:
        key, values = draw(st.sampled_from(AXES))
        used = set(doc.get("grid", {}))
        if key not in used:
            doc["points"] = [{key: v} for v in _some(draw, values)]
    if draw(st.booleans()):
        doc["repeats"] = draw(st.sampled_from([1, 2]))
    return doc


def _runs(doc: dict[str, Any]) -> int:
    n = len(doc.get("points") or [{}]) * doc.get("repeats", 1)
    for values in (doc.get("grid") or {}).values():
        n *= len(values)
    return n


@st.composite
def broken_sweeps(draw) -> tuple[Any, str, str, dict[str, Any]]:
    """(sweep document or raw text, what is wrong, expect, extra files)."""
    doc = draw(valid_sweeps())
    extra: dict[str, Any] = {}
    how = draw(st.sampled_from([
        "bad-value", "bad-value", "axis-not-list", "axis-empty", "grid-not-map", "huge-grid", "just-over",
        "repeats", "dup-point", "seed-repeats", "points-shape", "unknown-key", "scenario", "set-shape",
        "set-bad", "text", "mapping-values", "seed-near-max"]))
    expect = "fail"
    if how == "bad-value":
        key, value = draw(st.sampled_from(BAD_VALUES))
        where = draw(st.sampled_from(["grid", "points", "set"]))
        if where == "grid":
            doc.setdefault("grid", {})[key] = [value]
        elif where == "points":
            doc["points"] = [*(doc.get("points") or []), {key: value}]
        else:
            doc["set"] = {**(doc.get("set") or {}), key: value}
            if key in doc.get("grid", {}) or any(key in pt for pt in doc.get("points") or []):
                expect = "any"  # (a point's or the grid's value replaces the shared one)
        how = f"{where} {key}: {value!r}"
    elif how == "axis-not-list":
        doc["grid"] = {"kv.block_size": draw(st.sampled_from([16, "16,32", {"a": 1}, None,
                                                              Raw("!!set {16}")]))}
    elif how == "axis-empty":
        doc["grid"] = {"kv.block_size": []}
    elif how == "grid-not-map":
        doc["grid"] = draw(st.sampled_from([[16, 32], "kv.block_size=16", 5, [{"kv.block_size": 16}]]))
    elif how in ("huge-grid", "just-over"):
        if how == "huge-grid":  # up to 30^10 = 5.9e14 runs, counted before anything is built
            axes = draw(st.integers(4, 10))
            doc["grid"] = {f"name{'x' * i}": list(range(30)) for i in range(axes)}
        else:  # 100,001 runs: one over the bound
            doc["grid"] = {"simulation.seed": list(range(100_001))}
            doc.pop("points", None)
            doc["repeats"] = 1
    elif how == "repeats":
        doc["repeats"] = draw(st.sampled_from([0, -1, 1001, True, "2", 1.5, None, Raw(".inf"), [2], 10**30]))
        expect = "any" if doc["repeats"] is None else "fail"
    elif how == "dup-point":
        doc["points"] = [{"kv.block_size": 16}, {"kv.block_size": 16}]
        doc.pop("grid", None)
    elif how == "seed-repeats":
        doc["grid"] = {"simulation.seed": [0, 1]}
        doc["repeats"] = 2
        doc.pop("points", None)
    elif how == "points-shape":
        doc["points"] = draw(st.sampled_from([{"kv.block_size": 16}, "x", [1, 2], [[{"a": 1}]], 5]))
    elif how == "unknown-key":
        doc[draw(st.sampled_from(["grids", "point", "repeat", "scenarios", "", "jobs"]))] = 1
    elif how == "scenario":
        target = draw(st.sampled_from(["missing.yaml", "folder", "/etc/passwd", 5, ["s.yaml"], "", "t.csv"]))
        doc["scenario"] = target
        extra = {"folder": None, "t.csv": "a,b\n1,2\n"}
    elif how == "set-shape":
        doc["set"] = draw(st.sampled_from([["kv.block_size=16"], "kv.block_size=16", 5]))
    elif how == "set-bad":
        doc["set"] = {"kv.block_size": 0}
    elif how == "text":
        text = draw(st.sampled_from(["", "[1, 2]\n", "grid: [\n", alias_bomb(9, 9), deep_flow(10_000),
                                     b"\xff\xfe",
                                     "grid: {kv.block_size: [16]}\ngrid: {kv.block_size: [32]}\n",
                                     "scenario: s.yaml\nrepeats: .nan\n"]))
        return text, "text", "fail", extra
    elif how == "mapping-values":  # mapping and list values on an axis: written as YAML text in the table
        doc["grid"] = {"slo": [{"ttft_s": {"p99": 2}}, {"ttft_s": {"p99": 3}}]}
        doc.pop("points", None)
        doc["repeats"] = 1
        expect = "pass"
    else:  # seeds near 2^63 - 1 with repeats
        doc["set"] = {**(doc.get("set") or {}), "simulation.seed": 2**63 - 2}
        doc["repeats"] = draw(st.sampled_from([2, 3]))
        doc.pop("grid", None)
        doc.pop("points", None)
        expect = "pass" if doc["repeats"] == 2 else "fail"
    return doc, how, expect, extra


BACKEND: tuple[tuple[list[str], bool | None], ...] = (
    ([], None), ([], None), ([], None), (["--backend", "process"], None), (["--backend", "Process"], True),
    (["--backend", ""], True), (["--backend", "dask"], True),
    (["--backend", "ray", "--address", "127.0.0.1:1"], True),
    (["--backend", "ray", "--address", "nohost"], True), (["--backend", "ray", "--address", "ray://"], True),
    (["--backend", "ray", "--address", ":"], True),
    (["--backend", "ray", "--address", "127.0.0.1:99999"], True),
    (["--backend", "ray", "--address", ""], True), (["--address", "127.0.0.1:1"], True),
    (["--address", "auto"], True), (["--backend", "process", "--address", "127.0.0.1:6379"], True),
    (["--backend", "ray", "--address", "[bold]x[/]:1"], True),
)
OPTIONS: tuple[tuple[list[str], bool | None], ...] = (
    ([], None), ([], None), (["--jobs", "1"], None), (["--jobs", "0"], True), (["--jobs", "1025"], True),
    (["--jobs", "x"], True), (["--seed", "3"], None), (["--seed", "-1"], True), (["--seed", "x"], True),
    (["--progress"], None), (["--out", "s.yaml"], True), (["--out", "."], True), (["--out", "folder"], None),
    (["--out", "g.yaml"], True), (["--bogus"], True),
)


@st.composite
def sweep_cases(draw) -> Case:
    """`kvsim sweep g.yaml` with a valid, broken or abused sweep file and good or bad options."""
    files: dict[str, Any] = {"s.yaml": to_yaml(small_scenario(3)), "folder": None, "folder/keep.md": "keep\n"}
    kind = draw(st.sampled_from(["valid", "valid", "broken", "broken", "broken"]))
    if kind == "valid":
        doc: Any = draw(valid_sweeps())
        how, expect = f"valid ({_runs(doc)} runs)", "pass"
    else:
        doc, how, expect, extra = draw(broken_sweeps())
        files.update(extra)
    files["g.yaml"] = doc if isinstance(doc, (str, bytes)) else to_yaml(doc)
    argv = ["sweep", "g.yaml", "--no-progress"]
    backend, verdict = pick(draw, BACKEND)
    bad = verdict
    options, verdict = pick(draw, OPTIONS)
    bad |= verdict
    if not verdict and kind == "valid" and draw(st.integers(0, 7)) == 0:
        options = ["--jobs", "2"]  # a process pool: a second or two, drawn rarely
    argv += backend + options
    if "--out" not in options:
        argv += ["--out", "sw"]
    if bad:
        expect = "fail"
    elif expect == "pass" and "folder" in options:
        expect = "fail"  # a folder holding the user's files is never an output folder
    elif expect == "pass" and "--seed" in options and "simulation.seed" in files["g.yaml"]:
        expect = "any"  # --seed gives every point one seed: a seed axis then repeats a scenario
    return Case("sweep", argv, files, expect=expect, why=f"{kind}: {how}", forbid=(PASSWD_LINE,),
                outputs=("sw/sweep.parquet",) if expect == "pass" and "--out" not in options else ())
