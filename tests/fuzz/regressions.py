"""Fixed fuzz cases, one (or a few) per item of issue 9: each must keep the contract, and most must be
a one-line error (expect="fail"). `REGRESSIONS` maps a short id to its case."""

from __future__ import annotations

import json

from cases import Case, Link
from strategies.common import PASSWD_LINE, TINY_SCENARIO, _base_scenario, run_argv, to_yaml
from strategies.hardware import HW_BASE
from strategies.models import HF_BASE, TINY_MODEL
from strategies.traces import mooncake_record
from strategies.yaml_abuse import alias_bomb, deep_flow


def _scenario_case(cid: str, expect: str = "fail", argv: list[str] | None = None, files=None,
                   validate_first: bool = False, **sections) -> tuple[str, Case]:
    sc = _base_scenario(**sections)
    return cid, Case("regression", argv or run_argv(), {"s.yaml": to_yaml(sc), **(files or {})},
                     expect=expect, why=cid, validate_first=validate_first)


def _raw_case(cid: str, text: str | bytes | None, expect: str = "fail", argv: list[str] | None = None,
              **kw) -> tuple[str, Case]:
    return cid, Case("regression", argv or run_argv(), {"s.yaml": text}, expect=expect, why=cid, **kw)


AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"


def _trace_case(cid: str, name: str, content: str | bytes | None, fmt: str, expect: str = "fail",
                command: str = "run") -> tuple[str, Case]:
    sc = _base_scenario(workload={"kind": "trace", "trace": {"path": name, "format": fmt}},
                        simulation={"requests": 20})
    argv = run_argv() if command == "run" else ["hitrate", name, "--out", "h"]
    return cid, Case("regression", argv, {"s.yaml": to_yaml(sc), name: content}, expect=expect, why=cid)


def _mooncake(**fields) -> str:
    rec = {**mooncake_record(0, 1000, 10), **fields}
    return json.dumps(rec).replace('"__NAN__"', "NaN").replace('"__INF__"', "Infinity") + "\n"


def _hf(**fields) -> str:
    return json.dumps({**HF_BASE, **fields})


def _model_case(cid: str, model, expect: str = "fail", files=None) -> tuple[str, Case]:
    sc = _base_scenario()
    sc["model"] = model
    return cid, Case("regression", ["validate", "s.yaml"], {"s.yaml": to_yaml(sc), **(files or {})},
                     expect=expect, why=cid, forbid=(PASSWD_LINE,))


def _hw_case(cid: str, **fields) -> tuple[str, Case]:
    sc = _base_scenario()
    sc["hardware"] = {**HW_BASE, **fields}
    return cid, Case("regression", ["validate", "s.yaml"], {"s.yaml": to_yaml(sc)}, expect="fail", why=cid)


USER_TREE = {"proj/.git/config": "[core]\n", "proj/src/main.py": "x = 1\n", "proj/summary.json": "{}\n",
             "exp/s.yaml": TINY_SCENARIO, "exp/notes.md": "notes\n", "top.txt": "parent\n"}


def _out_case(cid: str, argv: list[str], expect: str = "any") -> tuple[str, Case]:
    return cid, Case("regression", argv, dict(USER_TREE), expect=expect, why=cid, cwd="exp")


_CASES: list[tuple[str, Case]] = [
    # 1. data loss: nothing the user made is deleted or changed, whatever the exit code
    _out_case("out-user-folder-with-summary", ["run", "s.yaml", "--out", "../proj"]),
    _out_case("out-dot", ["run", "s.yaml", "--out", "."]),
    _out_case("out-parent", ["run", "s.yaml", "--out", ".."]),
    _out_case("compare-out-file", ["compare", "s.yaml", "--vary", "kv.block_size=16,32", "--out", "notes.md"],
              expect="fail"),
    _out_case("hitrate-out-file", ["hitrate", "s.yaml", "--out", "notes.md"], expect="fail"),
    _out_case("run-out-file", ["run", "s.yaml", "--out", "notes.md"], expect="fail"),
    _out_case("compare-out-user-folder", ["compare", "s.yaml", "--vary", "kv.block_size=16,32", "--out",
                                          "../proj"]),
    # 2. numbers and shapes
    _scenario_case("block-size-true", kv={"block_size": True}),
    _scenario_case("requests-true", simulation={"requests": True}),
    _raw_case("rate-inf", "workload: {arrival: {rate: .inf}}\nsimulation: {requests: 5}\n"),
    _raw_case("rate-nan", "workload: {arrival: {rate: .nan}}\nsimulation: {requests: 5}\n"),
    ("rate-inf-set", Case("regression", run_argv("s.yaml", "--set", "workload.arrival.rate=.inf"),
                          {"s.yaml": to_yaml(_base_scenario())}, expect="fail", why="rate-inf-set")),
    _raw_case("gmu-nan", "kv: {gpu_memory_utilization: .nan}\nsimulation: {requests: 5}\n"),
    _raw_case("rate-1e308", "workload: {arrival: {rate: 1.0e+308}}\nsimulation: {requests: 5}\n",
              expect="any"),
    _raw_case("overhead-inf", "cost: {iteration_overhead_s: .inf}\nsimulation: {requests: 5}\n"),
    _raw_case("duration-inf", "simulation: {requests: 5, duration_s: .inf}\n"),
    _scenario_case("rag-zipf-12", expect="any", workload={"kind": "rag", "rag": {"zipf_s": 12}},
                   simulation={"requests": 5}),
    _raw_case("gamma-cv-inf", "workload: {arrival: {process: gamma, cv: .inf}}\nsimulation: {requests: 5}\n"),
    _scenario_case("gamma-cv-1e300", expect="any", workload={"arrival": {"process": "gamma", "cv": 1e300}}),
    _scenario_case("n-above-max-num-seqs", validate_first=True, scheduler={"max_num_seqs": 2},
                   workload__n=4),
    _scenario_case("beam-above-max-num-seqs", validate_first=True, scheduler={"max_num_seqs": 2},
                   workload__beam_width=4),
    _scenario_case("prefix-cache-contiguous", validate_first=True,
                   kv={"layout": "contiguous:max", "prefix_cache": "hash"}),
    _scenario_case("sparsity-n2", validate_first=True, kv={"sparsity": {"policy": "h2o"}}, workload__n=2),
    _scenario_case("calibrated-without-calibration", validate_first=True, cost={"model": "calibrated"}),
    ("calibrated-unusable", Case("regression", ["validate", "s.yaml"], {"s.yaml": to_yaml(
        {**_base_scenario(cost={"model": "calibrated"}),
         "hardware": {**HW_BASE, "calibration": {"terms": {}}}})},
        expect="fail", why="calibrated-unusable")),
    # model shapes
    _model_case("num-kv-heads-0-inline", {**TINY_MODEL, "num_kv_heads": 0}),
    _model_case("kv-heads-not-dividing", {**TINY_MODEL, "num_kv_heads": 3}),
    _model_case("head-dim-floored", {**TINY_MODEL, "hidden_size": 257}),
    _model_case("model-field-string", {**TINY_MODEL, "num_layers": "32"}),
    _model_case("model-field-nan", {**TINY_MODEL, "hidden_size": float("nan")}),
    _model_case("hf-num-key-value-heads-0", "config.json", files={"config.json": _hf(num_key_value_heads=0)}),
    _model_case("hf-heads-not-dividing", "config.json", files={"config.json": _hf(num_key_value_heads=3)}),
    _model_case("hf-head-dim-not-integral", "config.json", files={"config.json": _hf(hidden_size=250)}),
    _model_case("hf-string-value", "config.json", files={"config.json": _hf(num_hidden_layers="2")}),
    _model_case("hf-nan-value", "config.json",
                files={"config.json": _hf(hidden_size="__NAN__").replace('"__NAN__"', "NaN")}),
    _model_case("base-self-reference", "m.yaml", files={"m.yaml": "base: m.yaml\n"}),
    _model_case("base-cycle", "m.yaml", files={"m.yaml": "base: n.yaml\n", "n.yaml": "base: m.yaml\n"}),
    _model_case("base-kv-heads-0", {"base": "llama-3-8b", "num_kv_heads": 0}),
    # hardware numbers
    _hw_case("hw-bandwidth-nan", hbm_bandwidth=float("nan")),
    _hw_case("hw-bandwidth-inf", hbm_bandwidth=float("inf")),
    _hw_case("hw-bandwidth-inf-text", hbm_bandwidth="inf"),
    _hw_case("hw-memory-true", memory_bytes=True),
    _hw_case("hw-flops-nan", peak_flops={"bf16": float("nan")}),
    _hw_case("hw-link-negative", host_link_bandwidth="-3 GB/s"),
    # traces
    _trace_case("azure-count-inf", "t.csv", AZURE_HEAD + "2023-11-16 18:15:47.0,inf,5\n", "azure"),
    _trace_case("azure-count-1e19", "t.csv", AZURE_HEAD + "2023-11-16 18:15:47.0,1e19,5\n", "azure"),
    _trace_case("azure-count-true", "t.csv", AZURE_HEAD + "2023-11-16 18:15:47.0,true,5\n", "azure"),
    _trace_case("azure-field-over-csv-limit", "t.csv", AZURE_HEAD + "2023-11-16 18:15:47.0,\"" + "1" * 200_000
                + "\",5\n", "azure"),
    _trace_case("azure-not-utf8", "t.csv", AZURE_HEAD.encode() + b"2023-11-16 18:15:47.0,\xff,5\n", "azure"),
    _trace_case("mooncake-nan-timestamp", "t.jsonl", _mooncake(timestamp="__NAN__"), "mooncake"),
    _trace_case("mooncake-inf-timestamp", "t.jsonl", _mooncake(timestamp="__INF__"), "mooncake"),
    _trace_case("mooncake-true-length", "t.jsonl", _mooncake(input_length=True, hash_ids=[0]), "mooncake"),
    _trace_case("mooncake-1e19-length", "t.jsonl", _mooncake(output_length=1e19), "mooncake"),
    _trace_case("mooncake-nan-hitrate", "t.jsonl", _mooncake(timestamp="__NAN__"), "mooncake",
                command="hitrate"),
    _trace_case("mooncake-deep-json", "t.jsonl", "[" * 100_000 + "]" * 100_000 + "\n", "mooncake"),
    ("trace-path-etc-passwd", Case("regression", run_argv("s.yaml", "--set", "workload.kind=trace", "--set",
                                                          "workload.trace.path=/etc/passwd"),
                                   {"s.yaml": to_yaml(_base_scenario())}, expect="fail",
                                   why="trace-path-etc-passwd", forbid=(PASSWD_LINE,))),
    _trace_case("trace-is-directory", "tdir", None, "azure"),
    # 3. files and resources
    _raw_case("alias-bomb", alias_bomb(12, 9)),
    _raw_case("deep-nesting-20000", deep_flow(20000)),
    _raw_case("deep-mapping-20000", "name: " + "{a: " * 20000 + "1" + "}" * 20000 + "\n"),
    _raw_case("recursive-alias", "name: &a [*a]\n"),
    _raw_case("duplicate-key", "simulation: {requests: 5}\nsimulation: {requests: 6}\n"),
    _raw_case("not-utf8", b"name: caf\xe9\nsimulation: {requests: 5}\n"),
    _raw_case("nul-byte", b"name: a\x00b\nsimulation: {requests: 5}\n"),
    _raw_case("empty-file", b"", expect="any", argv=["validate", "s.yaml"]),
    _raw_case("directory-as-scenario", None),
    _raw_case("huge-int-text", "simulation: {requests: 1" + "0" * 5000 + "}\n"),
    _raw_case("huge-int-string", "simulation: {requests: '1" + "0" * 5000 + "'}\n"),
    ("empirical-not-utf8", Case("regression", run_argv(), {"s.yaml": to_yaml(_base_scenario(
        workload__prompt_len={"dist": "empirical", "path": "len.txt"})), "len.txt": b"12\n\xff\xfe\n"},
        expect="fail", why="empirical-not-utf8")),
    ("binary-hardware-profile", Case("regression", ["hardware"], {"hw/good.yaml": to_yaml(HW_BASE),
                                                                  "hw/bin.yaml": bytes(range(256))},
                                     expect="any", why="binary-hardware-profile",
                                     env={"KVSIM_HARDWARE_DIR": "{dir}/hw"})),
    ("hardware-profile-symlink-passwd", Case("regression", ["validate", "s.yaml"], {
        "hw/p.yaml": Link("/etc/passwd"), "s.yaml": to_yaml(_base_scenario(hardware="p"))}, expect="fail",
        why="hardware-profile-symlink-passwd", env={"KVSIM_HARDWARE_DIR": "{dir}/hw"},
        forbid=(PASSWD_LINE,))),
    ("markup-name", Case("regression", run_argv(), {"s.yaml": to_yaml(_base_scenario(name="[bold]x[/]"))},
                         expect="pass", why="markup-name", literal=("[bold]x[/]",))),
    ("markup-unbalanced-name", Case("regression", run_argv(),
                                    {"s.yaml": to_yaml(_base_scenario(name="x[/]"))}, expect="pass",
                                    why="markup-unbalanced-name", literal=("x[/]",))),
    ("escape-sequence-name", Case("regression", run_argv(), {"s.yaml": to_yaml(_base_scenario(
        name="a\x1b[31mred"))}, expect="pass", why="escape-sequence-name")),
    ("emoji-name", Case("regression", run_argv(), {"s.yaml": to_yaml(_base_scenario(name=":smile:"))},
                        expect="pass", why="emoji-name", literal=(":smile:",))),
    ("markup-hardware-name", Case("regression", ["validate", "s.yaml"], {"s.yaml": to_yaml(
        {**_base_scenario(), "hardware": {**HW_BASE, "name": "[red]gpu[/red]"}})}, expect="pass",
        why="markup-hardware-name", literal=("[red]gpu[/red]",))),
    # command lines
    ("seed-negative", Case("regression", run_argv("s.yaml", "--seed", "-1"), {"s.yaml": TINY_SCENARIO},
                           expect="fail", why="seed-negative")),
    ("set-without-equals", Case("regression", run_argv("s.yaml", "--set", "kv.block_size"),
                                {"s.yaml": TINY_SCENARIO}, expect="fail", why="set-without-equals")),
    ("set-empty-part", Case("regression", run_argv("s.yaml", "--set", "a..b=1"), {"s.yaml": TINY_SCENARIO},
                            expect="fail", why="set-empty-part")),
    ("vary-no-values", Case("regression", ["compare", "s.yaml", "--vary", "kv.block_size=", "--out", "c"],
                            {"s.yaml": TINY_SCENARIO}, expect="fail", why="vary-no-values")),
    ("compare-bad-variant-late", Case("regression", ["compare", "s.yaml", "--vary", "workload.n=1,300",
                                                     "--set", "scheduler.max_num_seqs=4", "--out", "c"],
                                      {"s.yaml": TINY_SCENARIO}, expect="fail",
                                      why="compare-bad-variant-late")),
    ("set-unprintable-value", Case("regression", run_argv("s.yaml", "--set", "kv.dtype=\x88"),
                                   {"s.yaml": TINY_SCENARIO}, expect="fail", why="set-unprintable-value")),
    ("hitrate-requests-huge", Case("regression", ["hitrate", "s.yaml", "--requests", "9" * 20, "--out", "h"],
                                   {"s.yaml": TINY_SCENARIO}, why="hitrate-requests-huge")),
    ("trace-path-nul-byte", Case("regression", run_argv(), {"s.yaml": to_yaml(_base_scenario(
        workload={"kind": "trace", "trace": {"path": "a\x00b"}}))}, expect="fail",
        why="trace-path-nul-byte")),
    ("compare-vary-quoted-string", Case("regression",
                                        ["compare", "s.yaml", "--vary", "name='123','abc'", "--out", "c"],
                                        {"s.yaml": TINY_SCENARIO}, expect="pass",
                                        why="compare-vary-quoted-string")),
    ("compare-markup-cell", Case("regression", ["compare", "s.yaml", "--vary", "name='x[/bold]','[red]y'",
                                                "--out", "c"], {"s.yaml": TINY_SCENARIO}, expect="pass",
                                 why="compare-markup-cell", literal=("x[/bold]", "[red]y"))),
    ("compare-markup-title", Case("regression",
                                  ["compare", ":smile:[b].yaml", "--vary", "kv.block_size=16,32",
                                   "--out", "c"],
                                  {":smile:[b].yaml": TINY_SCENARIO},
                                  expect="pass", why="compare-markup-title", literal=(":smile:[b].yaml",))),
    ("hardware-name-echoed-whole", Case("regression", ["validate", "s.yaml"], {"s.yaml": to_yaml(
        {**_base_scenario(cost={"model": "calibrated"}), "hardware": {**HW_BASE, "name": "x" * 5000}})},
        expect="fail", why="hardware-name-echoed-whole")),
    ("hitrate-control-char-name", Case("regression", ["hitrate", "s.yaml", "--out", "h"], {
        "s.yaml": 'name: "a\\x07b"\n' + TINY_SCENARIO}, expect="pass", why="hitrate-control-char-name")),
    ("azure-timestamp-20-digits", Case("regression", ["hitrate", "t.csv", "--out", "h"], {
        "t.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:15:46.68059000000000000001,1969,74\n"},
        why="azure-timestamp-20-digits")),
    ("footprint-tokens-0", Case("regression", ["footprint", "llama-3-8b", "--tokens", "0"], {}, expect="fail",
                                why="footprint-tokens-0")),
    ("footprint-tokens-huge", Case("regression", ["footprint", "llama-3-8b", "--tokens", "1" + "0" * 30], {},
                                   why="footprint-tokens-huge")),
    ("hitrate-sample-rate-nan", Case("regression",
                                     ["hitrate", "t.jsonl", "--sample-rate", "nan", "--out", "h"],
                                     {"t.jsonl": _mooncake()}, expect="fail", why="hitrate-sample-rate-nan")),
    ("hitrate-capacities-inf", Case("regression", ["hitrate", "t.jsonl", "--capacities", "inf", "--out", "h"],
                                    {"t.jsonl": _mooncake()}, expect="fail", why="hitrate-capacities-inf")),
]

REGRESSIONS: dict[str, Case] = dict(_CASES)
"""id -> case."""
