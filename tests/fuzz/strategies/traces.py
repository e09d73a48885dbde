"""Trace files: good Azure CSV and Mooncake JSONL rows (also used by valid workloads), and Azure,
Mooncake and `format: columns` traces with bad fields or bad structure, or trace paths that are not
trace files (`trace_cases`)."""

from __future__ import annotations

import json
from typing import Any

from cases import Case, Link
from hypothesis import strategies as st

from .common import PASSWD_LINE, run_argv, to_yaml

# ---------------------------------------------------------------------------------------------------
# Good rows: trace workloads of valid scenarios replay them; the broken traces below start from them


def azure_rows(draw, n: int) -> list[str]:
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(n):
        ctx = draw(st.integers(1, 2048))
        gen = draw(st.integers(1, 256))
        rows.append(f"2023-11-16 18:15:{i % 60:02d}.{draw(st.integers(0, 999999)):06d}0,{ctx},{gen}")
    return rows


def mooncake_record(ts: Any, n_in: int, n_out: int, first_id: int = 0) -> dict[str, Any]:
    return {"timestamp": ts, "input_length": n_in, "output_length": n_out,
            "hash_ids": list(range(first_id, first_id + -(-n_in // 512)))}


def mooncake_rows(draw, n: int) -> list[str]:
    rows = []
    for i in range(n):
        n_in = draw(st.integers(1, 3000))
        rows.append(json.dumps(mooncake_record(i * draw(st.integers(0, 2000)), n_in,
                                               draw(st.integers(1, 256)), draw(st.integers(0, 20)))))
    return rows


# ---------------------------------------------------------------------------------------------------
# Traces

AZURE_BAD_COUNTS: tuple[tuple[str, str], ...] = (
    ("inf", "fail"), ("-inf", "fail"), ("nan", "fail"), ("NaN", "fail"), ("1e19", "fail"), ("1e400", "fail"),
    ("true", "fail"), ("True", "fail"), ("-1", "fail"), ("3.5", "fail"), ("", "fail"), ("abc", "fail"),
    ("0x10", "fail"), ("9" * 400, "fail"), ("18446744073709551616", "fail"), ("1e3", "any"), ("12.0", "any"),
    ("-0", "any"), (" 12 ", "any"), ("\uff11\uff12", "any"), ("1_000", "any"), ("0", "any"),
    ("1e12", "any"), ("12 tokens", "fail"), ("١٢", "any"),
)
AZURE_BAD_TIMES: tuple[tuple[str, str], ...] = (
    ("nan", "fail"), ("inf", "fail"), ("-inf", "fail"), ("", "fail"), ("abc", "fail"), ("1e400", "fail"),
    ("2023-13-45 99:99:99", "fail"), ("2023-11-16T18:15:46", "any"), ("-5", "any"), ("1e12", "any"),
    ("2023-11-16 18:15:46.68059000000000000001", "any"), ("2023-11-16", "any"),
    ("0000-00-00 00:00:00", "fail"),
    ("9999-12-31 23:59:59.9999999", "any"), ("1e308", "any"),
)


@st.composite
def azure_files(draw) -> tuple[bytes | str, str, str]:
    """(content, what is wrong, expect) for an Azure-format CSV."""
    rows = azure_rows(draw, draw(st.integers(1, 8)))
    how = draw(st.sampled_from(["count"] * 4 + ["time"] * 2 + [
        "header-only", "empty", "no-header", "short-row", "long-field", "nul", "bad-utf8", "bom", "crlf",
        "quote", "binary", "extra-cols", "dup-header", "huge-rows"]))
    expect = "fail"
    if how in ("count", "time"):
        i = draw(st.integers(1, len(rows) - 1))
        ts, ctx, gen = rows[i].split(",")
        if how == "count":
            bad, expect = draw(st.sampled_from(AZURE_BAD_COUNTS))
            if draw(st.booleans()):
                ctx = bad
            else:
                gen = bad
        else:
            bad, expect = draw(st.sampled_from(AZURE_BAD_TIMES))
            ts = bad
        rows[i] = f"{ts},{ctx},{gen}"
        return "\n".join(rows) + "\n", f"{how} {bad!r} on line {i + 1}", expect
    if how == "header-only":
        return rows[0] + "\n", how, "fail"
    if how == "empty":
        return "", how, "fail"
    if how == "no-header":
        return "\n".join(rows[1:]) + "\n", how, "fail"
    if how == "short-row":
        rows.append("2023-11-16 18:15:46.1")
        return "\n".join(rows) + "\n", how, "fail"
    if how == "long-field":
        rows.append("2023-11-16 18:16:00.0,\"" + "1" * draw(st.sampled_from([200_000, 2_000_000])) + "\",5")
        return "\n".join(rows) + "\n", how, "fail"
    if how == "nul":
        return ("\n".join(rows) + "\n").replace(",", ",\x00", 1), how, "fail"
    if how == "bad-utf8":
        return ("\n".join(rows) + "\n").encode() + b"2023-11-16 18:16:00.0,\xff\xfe,5\n", how, "fail"
    if how == "bom":
        return "\ufeff" + "\n".join(rows) + "\n", how, "any"
    if how == "crlf":
        return "\r\n".join(rows) + "\r\n", how, "any"
    if how == "quote":
        return "\n".join(rows) + "\n\"2023-11-16 18:16:00.0,5,5\n", how, "fail"
    if how == "binary":
        return bytes(range(256)) * 8, how, "fail"
    if how == "extra-cols":
        return "\n".join(r + ",extra,more" for r in rows) + "\n", how, "any"
    if how == "dup-header":
        return rows[0] + "," + rows[0] + "\n" + "\n".join(r + "," + r for r in rows[1:]) + "\n", how, "any"
    # huge-rows: many rows, bounded by simulation.requests
    return rows[0] + "\n" + (rows[1] + "\n") * 50_000, how, "any"


MOONCAKE_BAD_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("timestamp", "NaN", "fail"), ("timestamp", "Infinity", "fail"), ("timestamp", "-Infinity", "fail"),
    ("timestamp", "1e400", "fail"), ("timestamp", "true", "fail"), ("timestamp", "\"12\"", "fail"),
    ("timestamp", "null", "fail"), ("timestamp", "1e308", "any"), ("timestamp", "-5", "any"),
    ("timestamp", "[1]", "fail"), ("timestamp", "1" + "0" * 400, "fail"),
    ("input_length", "true", "fail"), ("input_length", "1e19", "fail"), ("input_length", "1.5", "fail"),
    ("input_length", "-1", "fail"), ("input_length", "\"12\"", "fail"), ("input_length", "null", "fail"),
    ("input_length", "NaN", "fail"), ("input_length", "10000000000000000000", "fail"),
    ("input_length", "12.0", "any"), ("input_length", "0", "any"),
    ("output_length", "true", "fail"), ("output_length", "Infinity", "fail"), ("output_length", "-3", "fail"),
    ("output_length", "1e19", "fail"), ("output_length", "0", "any"), ("output_length", "false", "fail"),
    ("output_length", "99999999999999999999999", "fail"),
    ("hash_ids", "[true]", "fail"), ("hash_ids", "[\"a\"]", "fail"), ("hash_ids", "[[1]]", "fail"),
    ("hash_ids", "null", "any"), ("hash_ids", "{}", "fail"), ("hash_ids", "[1.5]", "fail"),
    ("hash_ids", "[1180591620717411303424]", "any"), ("hash_ids", "[-1]", "any"),
    ("hash_ids", "[NaN]", "fail"),
)


@st.composite
def mooncake_files(draw) -> tuple[bytes | str, str, str]:
    """(content, what is wrong, expect) for a Mooncake JSONL trace."""
    rows = mooncake_rows(draw, draw(st.integers(1, 8)))
    how = draw(st.sampled_from(["field"] * 6 + ["missing", "not-json", "array", "number", "empty-object",
                                                "bad-utf8", "long-line", "deep", "dup-key", "wrong-count",
                                                "empty", "blank-lines", "bom", "nul", "binary"]))
    i = draw(st.integers(0, len(rows) - 1))
    rec = json.loads(rows[i])
    if how == "field":
        key, raw, expect = draw(st.sampled_from(MOONCAKE_BAD_FIELDS))
        text = json.dumps(rec)
        old = json.dumps({key: rec[key]})[1:-1]
        rows[i] = text.replace(old, f"\"{key}\": {raw}")
        if key == "input_length" and expect == "any":
            pass  # hash_ids no longer match a changed input_length: may be refused
        return "\n".join(rows) + "\n", f"{key}: {raw} on line {i + 1}", expect
    expect = "fail"
    if how == "missing":
        key = draw(st.sampled_from(["timestamp", "input_length", "output_length"]))
        del rec[key]
        rows[i] = json.dumps(rec)
        return "\n".join(rows) + "\n", f"missing {key}", expect
    if how == "not-json":
        rows[i] = draw(st.sampled_from(["{", "hello", "{'timestamp': 1}", "{\"timestamp\": 1,}", "]"]))
    elif how == "array":
        rows[i] = "[0, 100, 10, [0]]"
    elif how == "number":
        rows[i] = "42"
    elif how == "empty-object":
        rows[i] = "{}"
    elif how == "bad-utf8":
        return ("\n".join(rows) + "\n").encode() + b"{\"timestamp\": \xff}\n", how, expect
    elif how == "long-line":
        rec["junk"] = "z" * draw(st.sampled_from([100_000, 5_000_000]))
        rows[i] = json.dumps(rec)
        expect = "any"
    elif how == "deep":
        d = draw(st.sampled_from([1000, 100_000]))
        rows[i] = "[" * d + "]" * d
    elif how == "dup-key":
        rows[i] = json.dumps(rec)[:-1] + ", \"input_length\": 7}"
        expect = "any"
    elif how == "wrong-count":
        rec["hash_ids"] = rec["hash_ids"] + [99]
        rows[i] = json.dumps(rec)
    elif how == "empty":
        return "", how, "fail"
    elif how == "blank-lines":
        return "\n\n" + "\n\n".join(rows) + "\n\n", how, "any"
    elif how == "bom":
        return "\ufeff" + "\n".join(rows) + "\n", how, "any"
    elif how == "nul":
        rows[i] = rows[i][:-1] + ", \"x\": \"\x00\"}"
        expect = "any"
    elif how == "binary":
        return bytes(range(256)) * 8, how, "fail"
    return "\n".join(rows) + "\n", f"{how} on line {i + 1}", expect


@st.composite
def columns_files(draw) -> tuple[str, dict[str, Any], str, str]:
    """(content, trace.columns mapping, what is wrong, expect) for `format: columns`."""
    n = draw(st.integers(1, 6))
    rows = ["t,p,o"] + [f"{i * 0.5},{draw(st.integers(1, 2000))},{draw(st.integers(1, 200))}"
                        for i in range(n)]
    columns: dict[str, Any] = {"arrival": "t", "prompt": "p", "output": "o"}
    how = draw(st.sampled_from(["ok", "count", "time", "missing-key", "unknown-key", "no-column",
                                "dup-header", "non-str", "markup"]))
    expect = "fail"
    if how == "ok":
        expect = "any"
    elif how == "count":
        bad, expect = draw(st.sampled_from(AZURE_BAD_COUNTS))
        i = draw(st.integers(1, n))
        t, _, o = rows[i].split(",")
        rows[i] = f"{t},{bad},{o}"
    elif how == "time":
        bad, expect = draw(st.sampled_from(AZURE_BAD_TIMES))
        i = draw(st.integers(1, n))
        _, p_, o = rows[i].split(",")
        rows[i] = f"{bad},{p_},{o}"
        if n > 1 and ":" in bad:
            expect = "fail"  # a timestamp among plain seconds
    elif how == "missing-key":
        del columns[draw(st.sampled_from(sorted(columns)))]
    elif how == "unknown-key":
        columns["weight"] = "w"
    elif how == "no-column":
        columns["prompt"] = draw(st.sampled_from(["P", "", "prompt", "x" * 5000]))
    elif how == "dup-header":
        rows[0] = "t,p,p"
        expect = "any"
    elif how == "non-str":
        columns["output"] = draw(st.sampled_from([1, None, ["o"], True]))
    else:
        columns["prompt"] = "[bold]p[/]"
        rows[0] = "t,[bold]p[/],o"
        expect = "any"
    return "\n".join(rows) + "\n", columns, how, expect


TRACE_PATHS: tuple[tuple[str, str], ...] = (
    ("/etc/passwd", "fail"), ("/dev/null", "fail"), ("/dev/zero", "fail"), ("/proc/self/status", "fail"),
    ("folder", "fail"), ("missing.csv", "fail"), ("", "fail"), ("a\x00b", "fail"), ("x" * 5000, "fail"),
    ("~/nope.csv", "fail"), (".", "fail"), ("/", "fail"), ("link", "fail"),
)


@st.composite
def trace_cases(draw) -> Case:
    """A scenario replaying a broken trace (run / validate), or the trace given to `kvsim hitrate`."""
    fmt = draw(st.sampled_from(["azure", "azure", "mooncake", "mooncake", "columns", "path"]))
    files: dict[str, Any] = {"folder": None, "link": Link("/etc/passwd")}
    columns = None
    if fmt == "columns":
        content, columns, what, expect = draw(columns_files())
        name, trace_fmt = "c.csv", "columns"
        files[name] = content
    elif fmt == "path":
        path, expect = draw(st.sampled_from(TRACE_PATHS))
        name, what = path, f"trace path {path[:40]!r}"
        trace_fmt = draw(st.sampled_from(["azure", "mooncake"]))
    else:
        content, what, expect = draw(azure_files() if fmt == "azure" else mooncake_files())
        name = "t.csv" if fmt == "azure" else "t.jsonl"
        files[name] = content
        trace_fmt = fmt
    sc = {"model": "llama-3-8b", "hardware": "h100-sxm",
          "workload": {"kind": "trace", "trace": {"path": name, "format": trace_fmt}},
          "simulation": {"requests": 20}}
    if columns is not None:
        sc["workload"]["trace"]["columns"] = columns
    cmd = draw(st.sampled_from(["run", "validate", "hitrate", "set"]))
    if cmd == "set" and "\x00" in name:
        cmd = "run"  # a command line cannot carry NUL; the YAML file can
    if cmd == "hitrate" and fmt in ("azure", "mooncake"):
        argv = ["hitrate", name, "--out", "h"] + draw(st.sampled_from(
            [[], ["--unit", "gib", "--model", "llama-3-8b"], ["--unit", "tokens", "--block-size", "7"],
             ["--sample-rate", "0.01"], ["--capacities", "1,10,1000"]]))
    elif cmd == "set":
        del sc["workload"]["trace"]["path"]
        sc["workload"]["trace"]["path"] = "placeholder.csv"
        argv = run_argv("s.yaml", "--set", f"workload.trace.path={name}")
    elif cmd == "validate":
        argv = ["validate", "s.yaml"]
    else:
        argv = run_argv()
    files["s.yaml"] = to_yaml(sc)
    return Case("trace", argv, files, expect=expect, why=f"{trace_fmt}: {what}", forbid=(PASSWD_LINE,))
