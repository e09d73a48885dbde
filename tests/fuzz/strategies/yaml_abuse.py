"""YAML-level abuse of the scenario file: alias bombs, deep nesting, duplicate keys, bad bytes and
encodings, wrong top-level shapes, tags, multiple documents (`yaml_cases`)."""

from __future__ import annotations

from cases import Case
from hypothesis import strategies as st

from .common import _base_scenario, run_argv, to_yaml

# ---------------------------------------------------------------------------------------------------
# YAML-level abuse


def alias_bomb(levels: int, fanout: int) -> str:
    lines = ["a0: &a0 [x]"]
    for i in range(1, levels):
        refs = ", ".join(f"*a{i - 1}" for _ in range(fanout))
        lines.append(f"a{i}: &a{i} [{refs}]")
    lines.append(f"name: *a{levels - 1}")
    return "\n".join(lines) + "\n"


def deep_flow(depth: int, opener: str = "[", closer: str = "]") -> str:
    return "name: " + opener * depth + closer * depth + "\n"


def deep_block(depth: int) -> str:
    return "".join(" " * i + "k:\n" for i in range(depth)) + " " * depth + "1\n"


@st.composite
def yaml_texts(draw) -> tuple[bytes | str | None, str, str]:
    """(scenario file content, how it is broken, expect). None means a folder in its place."""
    good = to_yaml(_base_scenario())
    kind = draw(st.sampled_from([
        "bomb", "deep-flow", "deep-map", "deep-block", "dup-key", "dup-section", "bad-utf8", "nul", "empty",
        "comment", "directory", "list-top", "scalar-top", "bom", "utf16", "crlf", "tabs", "recursive",
        "merge", "python-tag", "unhashable", "multi-doc", "long-line", "bad-indent", "null-top",
        "binary", "latin1-name", "control-chars", "huge-int", "anchor-reuse"]))
    if kind == "bomb":
        return alias_bomb(draw(st.integers(5, 12)), draw(st.integers(5, 10))), kind, "any"
    if kind == "deep-flow":
        return deep_flow(draw(st.sampled_from([100, 1000, 20000, 100000]))), kind, "any"
    if kind == "deep-map":
        d = draw(st.sampled_from([100, 1000, 20000]))
        return "name: " + "{a: " * d + "1" + "}" * d + "\n", kind, "any"
    if kind == "deep-block":
        return deep_block(draw(st.sampled_from([100, 1000, 3000]))), kind, "any"
    if kind == "dup-key":
        return "simulation: {requests: 5, requests: 6}\n", kind, "fail"
    if kind == "dup-section":
        return "kv: {block_size: 16}\nkv: {block_size: 32}\nsimulation: {requests: 5}\n", kind, "fail"
    if kind == "bad-utf8":
        return good.encode() + b"name: \xff\xfe\xc3\x28\n", kind, "fail"
    if kind == "nul":
        return good.encode() + b"name: a\x00b\n", kind, "fail"
    if kind == "empty":
        return b"", kind, "any"
    if kind == "comment":
        return "# nothing here\n", kind, "any"
    if kind == "directory":
        return None, kind, "fail"
    if kind == "list-top":
        return "- kv\n- scheduler\n", kind, "fail"
    if kind == "scalar-top":
        return draw(st.sampled_from(["hello\n", "42\n", ".nan\n", "[]\n", "''\n"])), kind, "fail"
    if kind == "bom":
        return "\ufeff" + good, kind, "any"
    if kind == "utf16":
        return good.encode("utf-16"), kind, "fail"
    if kind == "crlf":
        return good.replace("\n", "\r\n"), kind, "any"
    if kind == "tabs":
        return "kv:\n\tblock_size: 16\n", kind, "fail"
    if kind == "recursive":
        return draw(st.sampled_from(["name: &a [*a]\n", "kv: &k {sparsity: *k}\n",
                                     "workload: &w {mix: [*w], kind: mix}\n"])), kind, "fail"
    if kind == "merge":
        return "base: &b {block_size: 32}\nkv: {<<: *b}\n", kind, "fail"
    if kind == "python-tag":
        return "name: !!python/object/apply:os.system ['echo pwned']\n", kind, "fail"
    if kind == "unhashable":
        return "? [a, b]\n: 1\n", kind, "fail"
    if kind == "multi-doc":
        return good + "---\n" + good, kind, "fail"
    if kind == "long-line":
        return "name: " + "y" * draw(st.sampled_from([10_000, 1_000_000])) + "\n" + good, kind, "any"
    if kind == "bad-indent":
        return "kv:\n  block_size: 16\n block_size: 8\n", kind, "fail"
    if kind == "null-top":
        return "~\n", kind, "any"
    if kind == "binary":
        return bytes(range(256)) * 4, kind, "fail"
    if kind == "latin1-name":
        return ("name: caf\u00e9\n" + good).encode("latin-1", errors="replace"), kind, "fail"
    if kind == "control-chars":
        return "name: \"a\\x1b[31mred\\x07\"\n" + good, kind, "any"
    if kind == "huge-int":
        digits = draw(st.sampled_from([40, 400, 5000, 100_000]))
        return f"simulation: {{requests: 1{'0' * digits}}}\n", kind, "fail"
    # anchor-reuse: a legitimate alias (the same mapping used twice)
    return ("lens: &l {dist: fixed, value: 8}\n" + good), kind, "fail"


@st.composite
def yaml_cases(draw) -> Case:
    content, kind, expect = draw(yaml_texts())
    cmd = draw(st.sampled_from(["run", "validate", "hitrate", "compare"]))
    argv = {"run": run_argv(), "validate": ["validate", "s.yaml"],
            "hitrate": ["hitrate", "s.yaml", "--out", "h"],
            "compare": ["compare", "s.yaml", "--vary", "kv.block_size=16,32", "--set",
                        "simulation.requests=2", "--out", "c"]}[cmd]
    if kind in ("empty", "comment", "null-top") and cmd in ("run", "hitrate", "compare"):
        argv += ["--set", "simulation.requests=3"] if cmd != "compare" else []
    return Case("yaml", argv, {"s.yaml": content}, expect=expect, why=kind)
