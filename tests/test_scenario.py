"""Scenario loading: defaults, one-line errors naming file/key/line, --set overrides and the seed override."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsim.errors import KvsimError
from kvsim.scenario import Scenario, apply_overrides, build_scenario, load_scenario, parse_value


def write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(*args, **kwargs) -> str:
    """The message of the KvsimError load_scenario raises; it must be one line."""
    with pytest.raises(KvsimError) as info:
        load_scenario(*args, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


# ---- defaults ----

def test_defaults_validate():
    sc = load_scenario()
    assert sc == Scenario()
    assert sc.name == "default"
    assert sc.model == "llama-3-8b"
    assert sc.hardware == "h100-sxm"
    assert sc.kv.block_size == 16
    assert sc.kv.dtype == "bf16"
    assert sc.kv.check_invariants is False
    assert sc.scheduler.max_num_seqs == 256
    assert sc.scheduler.max_num_batched_tokens == 8192
    assert sc.workload.kind == "synthetic"
    assert sc.simulation.seed == 0
    assert sc.simulation.requests == 2000
    assert sc.base_dir is None


def test_empty_file_is_the_default(tmp_path):
    sc = load_scenario(write(tmp_path, ""))
    assert sc.model_dump() == Scenario().model_dump()
    assert sc.base_dir == str(tmp_path)


def test_build_scenario_of_empty_dict():
    assert build_scenario({}) == Scenario()


# ---- schema errors ----

def test_unknown_top_level_key_names_file_and_key(tmp_path):
    path = write(tmp_path, "name: x\nmodle: llama-3-8b\n")
    msg = error_of(path)
    assert str(path) in msg
    assert "modle" in msg
    assert "unknown key" in msg


def test_unknown_nested_key_names_dotted_key(tmp_path):
    path = write(tmp_path, "kv:\n  blok_size: 32\n")
    msg = error_of(path)
    assert msg == f"{path}: kv.blok_size: unknown key"


def test_negative_arrival_rate(tmp_path):
    path = write(tmp_path, "workload:\n  arrival:\n    rate: -1\n")
    msg = error_of(path)
    assert msg.startswith(f"{path}: workload.arrival.rate: ")
    assert "greater than 0" in msg


def test_negative_arrival_rate_from_override():
    msg = error_of(None, ["workload.arrival.rate=-1"])
    assert msg.startswith("default scenario: workload.arrival.rate: ")


def test_batched_tokens_below_max_num_seqs_rejected(tmp_path):
    path = write(tmp_path, "scheduler:\n  max_num_seqs: 64\n  max_num_batched_tokens: 32\n")
    msg = error_of(path)
    assert msg.startswith(f"{path}: scheduler: ")
    assert "max_num_batched_tokens must be >= max_num_seqs" in msg


def test_batched_tokens_equal_to_max_num_seqs_accepted():
    sc = load_scenario(None, ["scheduler.max_num_seqs=64", "scheduler.max_num_batched_tokens=64"])
    assert sc.scheduler.max_num_batched_tokens == 64


def test_trace_kind_without_trace_section(tmp_path):
    msg = error_of(write(tmp_path, "workload:\n  kind: trace\n"))
    assert "workload" in msg
    assert "needs a 'trace' section" in msg


# ---- YAML and file errors ----

@pytest.mark.parametrize(("text", "line"), [
    ("name: ok\nkv:\n  block_size: 16\n\tdtype: bf16\n", 4),        # tab indentation
    ("name: ok\nkv:\n  dtype: [bf16\nsimulation: {}\n", 4),          # unclosed flow sequence
    ("a: b: c\n", 1),                                                 # mapping inside a plain scalar
])
def test_bad_yaml_names_file_and_line(tmp_path, text, line):
    path = write(tmp_path, text)
    msg = error_of(path)
    assert msg.startswith(f"{path}: line {line}: ")


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    assert error_of(path) == f"{path}: scenario file not found"


def test_directory_is_not_a_scenario_file(tmp_path):
    assert "not found" in error_of(tmp_path)


def test_top_level_must_be_a_mapping(tmp_path):
    path = write(tmp_path, "- kv\n- scheduler\n")
    assert error_of(path) == f"{path}: top level must be a mapping of sections"


def test_non_utf8_file_is_a_one_line_error(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: caf\xe9\xff\n")
    assert str(path) in error_of(path)


# ---- --set overrides ----

@pytest.mark.parametrize(("text", "value"), [
    ("32", 32),
    ("-1", -1),
    ("0.85", 0.85),
    ("true", True),
    ("false", False),
    ("null", None),
    ("[1, 2, 3]", [1, 2, 3]),
    ("{a: 1}", {"a": 1}),
    ("fp8", "fp8"),
    ("'32'", "32"),
    ("[1", "[1"),  # not valid YAML: kept as text
    ("", None),
])
def test_parse_value(text, value):
    assert parse_value(text) == value


def test_apply_overrides_creates_nested_mappings():
    data: dict = {}
    out = apply_overrides(data, ["kv.block_size=32", "a.b.c=[x, y]", "scheduler.chunked_prefill=false"])
    assert out is data
    assert data == {"kv": {"block_size": 32}, "a": {"b": {"c": ["x", "y"]}},
                    "scheduler": {"chunked_prefill": False}}


def test_apply_overrides_keeps_siblings_and_replaces_scalars():
    data = {"kv": {"block_size": 16, "dtype": "bf16"}, "scheduler": 5}
    apply_overrides(data, ["kv.block_size=64", "scheduler.max_num_seqs=8"])
    assert data == {"kv": {"block_size": 64, "dtype": "bf16"}, "scheduler": {"max_num_seqs": 8}}


def test_apply_overrides_splits_at_first_equals_and_strips_key():
    data: dict = {}
    apply_overrides(data, [" name =a=b"])
    assert data == {"name": "a=b"}


def test_apply_overrides_later_wins():
    assert apply_overrides({}, ["kv.block_size=8", "kv.block_size=32"]) == {"kv": {"block_size": 32}}


@pytest.mark.parametrize(("item", "needle"), [
    ("kv.block_size", "expected KEY=VALUE"),
    ("=3", "empty key"),
    ("..=3", "empty key"),
])
def test_apply_overrides_bad_syntax(item, needle):
    with pytest.raises(KvsimError) as info:
        apply_overrides({}, [item])
    msg = str(info.value)
    assert needle in msg
    assert repr(item) in msg
    assert msg.startswith("--set ")
    assert "\n" not in msg


def test_overrides_typed_through_schema():
    sc = load_scenario(None, ["kv.block_size=32", "kv.gpu_memory_utilization=0.8",
                              "scheduler.chunked_prefill=false", "kv.dtype=fp8",
                              "workload.arrival.rate=2.5", "simulation.requests=10"])
    assert sc.kv.block_size == 32
    assert sc.kv.gpu_memory_utilization == 0.8
    assert sc.scheduler.chunked_prefill is False
    assert sc.kv.dtype == "fp8"
    assert sc.workload.arrival.rate == 2.5
    assert sc.simulation.requests == 10


def test_override_beats_file_and_keeps_file_siblings(tmp_path):
    path = write(tmp_path, "kv:\n  block_size: 8\n  dtype: fp16\n")
    sc = load_scenario(path, ["kv.block_size=32"])
    assert sc.kv.block_size == 32
    assert sc.kv.dtype == "fp16"


def test_override_with_unknown_key_is_reported():
    assert error_of(None, ["kv.blok_size=32"]) == "default scenario: kv.blok_size: unknown key"


def test_override_bad_syntax_through_load_scenario():
    assert "expected KEY=VALUE" in error_of(None, ["kv.block_size"])


def test_override_wrong_type():
    msg = error_of(None, ["kv.block_size=big"])
    assert msg.startswith("default scenario: kv.block_size: ")


# ---- seed ----

def test_seed_override_beats_file_and_set(tmp_path):
    path = write(tmp_path, "simulation:\n  seed: 3\n  requests: 10\n")
    assert load_scenario(path).simulation.seed == 3
    sc = load_scenario(path, ["simulation.seed=5"], seed=7)
    assert sc.simulation.seed == 7
    assert sc.simulation.requests == 10


def test_seed_override_creates_simulation_section():
    assert load_scenario(None, seed=11).simulation.seed == 11


def test_seed_override_with_non_mapping_simulation(tmp_path):
    path = write(tmp_path, "simulation: 5\n")
    assert error_of(path, seed=1) == f"{path}: simulation: must be a mapping"


def test_negative_seed_rejected():
    assert "simulation.seed" in error_of(None, seed=-1)


# ---- paths ----

def test_relative_trace_path_resolves_against_scenario_folder(tmp_path, monkeypatch):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "t.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    path = write(folder, "workload:\n  kind: trace\n  trace:\n    path: t.csv\n")
    monkeypatch.chdir(tmp_path)
    sc = load_scenario(path)
    assert Path(sc.workload.trace.path) == folder / "t.csv"
    assert sc.base_dir == str(folder)


def test_relative_trace_path_left_alone_when_absent(tmp_path):
    path = write(tmp_path, "workload:\n  kind: trace\n  trace:\n    path: missing.csv\n")
    assert load_scenario(path).workload.trace.path == "missing.csv"
