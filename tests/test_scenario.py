"""Scenario loading: defaults, one-line errors naming file/key/line, --set overrides and the seed override."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kvsim import registry
from kvsim.errors import KvsimError
from kvsim.kvcache.sparsity.config import POLICY_NAMES
from kvsim.scenario import Scenario, apply_overrides, build_scenario, load_scenario, parse_value, set_items


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
    assert msg == f"{path}: kv.blok_size: unknown key (did you mean 'block_size'?)"


def test_negative_arrival_rate(tmp_path):
    path = write(tmp_path, "workload:\n  arrival:\n    rate: -1\n")
    msg = error_of(path)
    assert msg == f"{path}: workload.arrival.rate: Input should be greater than or equal to 0.000001"


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
    assert msg.startswith(f"{path}:{line}: ")


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    assert error_of(path) == f"{path}: scenario file not found"


def test_directory_is_not_a_scenario_file(tmp_path):
    assert error_of(tmp_path) == f"{tmp_path}: is a directory, expected a scenario file"


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


def test_apply_overrides_keeps_siblings_and_fills_null_sections():
    data = {"kv": {"block_size": 16, "dtype": "bf16"}, "scheduler": None}
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
    assert error_of(None, ["kv.blok_size=32"]) == ("default scenario: kv.blok_size: unknown key (did you "
                                                   "mean 'block_size'?)")


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


# ---- bounded reading (kvsim/inputs.py) ----

def test_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        lines.append(f"{'abcdefgh'[i]}: &{'abcdefgh'[i]} [" + ", ".join([f"*{'abcdefgh'[i - 1]}"] * 10) + "]")
    path = write(tmp_path, "\n".join(lines) + "\n")
    t0 = time.perf_counter()
    assert "YAML expands to more than" in error_of(path)
    assert time.perf_counter() - t0 < 2


def test_deep_nesting_and_duplicate_keys(tmp_path):
    assert "nesting deeper than" in error_of(write(tmp_path, "model: " + "[" * 5000 + "]" * 5000 + "\n"))
    path = write(tmp_path, "kv:\n  block_size: 8\n  block_size: 16\n", "dup.yaml")
    assert error_of(path) == f"{path}:3: duplicate key 'block_size'"


def test_infinite_number_in_a_file_names_the_line(tmp_path):
    path = write(tmp_path, "workload:\n  arrival:\n    rate: .inf\n")
    assert error_of(path) == f"{path}:3: number '.inf' is not finite"


# ---- numbers ----

@pytest.mark.parametrize(("override", "expected"), [
    ("kv.block_size=true", "default scenario: kv.block_size: expected a number, got a boolean"),
    ("simulation.requests=false", "default scenario: simulation.requests: expected a number, got a boolean"),
    ("workload.arrival.rate=1e999",
     "default scenario: workload.arrival.rate: Input should be a finite number"),
    ("workload.arrival.rate=.inf", "--set 'workload.arrival.rate=.inf': number '.inf' is not finite"),
    ("kv.watermark=.nan", "--set 'kv.watermark=.nan': number '.nan' is not finite"),
    ("simulation.duration_s=1e308",
     "default scenario: simulation.duration_s: Input should be less than or equal to 1000000000"),
    ("kv.swap_space_gb=1e308",
     "default scenario: kv.swap_space_gb: Input should be less than or equal to 1000000"),
    ("workload.chat.think_time_s=.nan",
     "--set 'workload.chat.think_time_s=.nan': number '.nan' is not finite"),
    ("kv.block_size=16.5",
     "default scenario: kv.block_size: Input should be a valid integer, got a number with a fractional part"),
])
def test_numbers_are_finite_bounded_and_not_booleans(override, expected):
    assert error_of(None, [override]) == expected


def test_integral_float_is_an_integer():
    assert load_scenario(None, ["kv.block_size=32.0"]).kv.block_size == 32


# ---- --set: bounded values, strict keys ----

@pytest.mark.parametrize("text", [".inf", "[1, .nan]", "{a: 1, a: 2}", "[" * 100 + "]" * 100])
def test_parse_value_refuses_what_the_file_loader_refuses(text):
    with pytest.raises(KvsimError) as info:
        parse_value(text)
    assert str(info.value).startswith("--set: ") and "\n" not in str(info.value)


def test_parse_value_of_a_string_that_overflows_stays_a_string():
    assert parse_value("1e999") == "1e999"  # YAML 1.1 reads no float here; the schema refuses it


@pytest.mark.parametrize(("data", "item", "expected"), [
    ({"kv": {"block_size": 16}}, "kv.block_size.x=1",
     "--set 'kv.block_size.x=1': kv.block_size: is 16, not a mapping"),
    ({"model": "llama-3-8b"}, "model.base=x", "--set 'model.base=x': model: is 'llama-3-8b', not a mapping"),
    ({}, "a..b=1", "--set 'a..b=1': empty part in key 'a..b'"),
    ({}, "kv.=1", "--set 'kv.=1': empty part in key 'kv.'"),
    ({"workload": {"mix": [{}]}}, "workload.mix.1.n=2",
     "--set 'workload.mix.1.n=2': workload.mix.1: a list of 1 items takes an index 0..0"),
])
def test_apply_overrides_refuses_keys_through_non_mappings(data, item, expected):
    with pytest.raises(KvsimError) as info:
        apply_overrides(data, [item])
    assert str(info.value) == expected


def test_apply_overrides_enters_lists_by_index():
    data = {"workload": {"mix": [{"kind": "chat"}, {"kind": "rag"}]}}
    apply_overrides(data, ["workload.mix.1.weight=3"])
    assert data["workload"]["mix"][1] == {"kind": "rag", "weight": 3}


def test_huge_override_is_quoted_short():
    msg = error_of(None, ["kv." + "x" * 100_000 + "=1"])
    assert msg == "default scenario: kv.'" + "x" * 40 + "…': unknown key"
    assert len(error_of(None, ["x" * 100_000])) < 120  # no '='


def test_validation_error_of_a_huge_value_stays_short():
    msg = error_of(None, ["kv.dtype=" + "y" * 1_000_000])
    assert msg == ("default scenario: kv.dtype: Input should be 'auto', 'fp32', 'fp16', 'bf16', 'fp8',"
                   " 'fp8_e4m3', 'fp8_e5m2', 'int8', 'int4' or 'nvfp4', or a mapping {bits, group_size,"
                   " scale_bits} or {rope, rest}")


def _choices(names) -> str:
    quoted = [f"'{n}'" for n in names]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


@pytest.mark.parametrize(("key", "names"), [
    ("kv.layout", registry.LAYOUTS), ("kv.prefix_cache", registry.PREFIX_CACHES),
    ("kv.eviction", registry.EVICTION_POLICIES), ("scheduler.preemption_mode", registry.PREEMPTION),
    ("cost.model", registry.COST_MODELS), ("kv.sparsity.policy", POLICY_NAMES),
])
def test_a_bad_choice_is_one_line_listing_the_registry(key, names):
    assert error_of(None, [f"{key}=bogus"]) == f"default scenario: {key}: Input should be {_choices(names)}"


def test_union_members_are_left_out_of_the_key():
    msg = error_of(None, ["workload.chat.think_time_s={dist: fixed}"])
    assert msg == "default scenario: workload.chat.think_time_s: dist 'fixed' needs 'value'"


# ---- rules across sections (cross_check) ----

@pytest.mark.parametrize(("overrides", "expected"), [
    (["workload.n=300"], "workload.n: 300 sequences per request exceed scheduler.max_num_seqs (256); a "
                         "request's sequences are scheduled together"),
    (["workload.beam_width=8", "scheduler.max_num_seqs=4"],
     "workload.beam_width: 8 sequences per request exceed scheduler.max_num_seqs (4); a request's sequences "
     "are scheduled together"),
    (["workload.kind=mix", "workload.mix=[{kind: chat}, {kind: rag, n: 300}]"],
     "workload.mix.1.n: 300 sequences per request exceed scheduler.max_num_seqs (256); a request's sequences "
     "are scheduled together"),
    (["kv.layout=contiguous:max", "kv.prefix_cache=hash"],
     "kv.prefix_cache: 'hash' needs kv.layout: paged (got 'contiguous:max')"),
    (["kv.sparsity.policy=h2o", "kv.layout=contiguous:oracle"],
     "kv.sparsity.policy: 'h2o' needs kv.layout: paged (got 'contiguous:oracle')"),
    (["kv.sparsity.policy=h2o", "workload.n=2"],
     "kv.sparsity.policy: 'h2o' does not model parallel sampling or beam search (set workload.n and "
     "workload.beam_width to 1)"),
    (["kv.sparsity.policy=streaming", "workload.beam_width=2"],
     "kv.sparsity.policy: 'streaming' does not model parallel sampling or beam search (set workload.n and "
     "workload.beam_width to 1)"),
])
def test_cross_section_rules(overrides, expected):
    assert error_of(None, overrides) == f"default scenario: {expected}"


def test_n_up_to_max_num_seqs_is_fine():
    assert load_scenario(None, ["workload.n=4", "scheduler.max_num_seqs=4"]).workload.n == 4


def test_a_character_yaml_refuses_is_a_one_line_error(tmp_path):
    path = tmp_path / "c1.yaml"
    path.write_text("name: ok\nkv: a\u009ab\n", encoding="utf-8")
    assert error_of(path) == f"{path}:2: character #x009a is not allowed in YAML"
    assert parse_value("x\u009a") == "x\u009a"  # --set: not YAML, so text


def test_a_path_with_a_nul_is_refused():
    assert error_of(None, ["workload.kind=trace", "workload.trace.path=a\x00b"]) == (
        "default scenario: workload.trace.path: a file path cannot hold a NUL character")


@pytest.mark.parametrize("key", ["layer_overhead_s", "eager_layer_overhead_s", "seq_overhead_s",
                                 "iteration_overhead_s"])
@pytest.mark.parametrize("value, message", [
    (-1e-6, "greater than or equal to 0"), ("fast", "valid number"), (float("inf"), "finite number"),
    (True, "expected a number, got a boolean"),
])
def test_cost_overhead_keys_are_one_line_errors_naming_the_key(key, value, message):
    with pytest.raises(KvsimError, match=rf"cost\.{key}: .*{message}") as exc:
        build_scenario({"cost": {key: value}})
    assert "\n" not in str(exc.value)


def test_cost_overhead_keys_default_to_the_fitted_terms_and_iteration_overhead_is_still_accepted():
    c = build_scenario({}).cost
    assert c.model == "auto"
    # None: the chosen cost model's own fitted terms (the roofline's: 4.4e-4, 7.2e-5, 1.0e-4, 1.0e-5)
    assert (c.iteration_overhead_s, c.layer_overhead_s, c.eager_layer_overhead_s, c.seq_overhead_s) == (
        None, None, None, None)
    assert build_scenario({"cost": {"iteration_overhead_s": 0.003}}).cost.iteration_overhead_s == 0.003


@pytest.mark.parametrize("path, key", [("workloads/mooncake_tiers.yaml", "kv.tiers.0.bandwidth_gbps"),
                                       ("workloads/fleet_pd.yaml", "cluster.kv_transfer.bandwidth_gbps")])
def test_a_link_slower_than_1_mb_per_s_is_refused_naming_the_key(path, key):
    with pytest.raises(KvsimError, match=f"{key}: Input should be greater than or equal to 0.001"):
        load_scenario(Path(__file__).parents[1] / path, [f"{key}=1e-300"])


@pytest.mark.parametrize("value", [object(), 1j])
def test_set_items_refuses_a_value_yaml_cannot_write(value):
    """A Python object given through the API (compare's vary, plan's slo, a sweep mapping) raised yaml's
    RepresenterError (found by the fuzz suite)."""
    with pytest.raises(KvsimError, match=r"^kv\.block_size: a Python \w+ is not a scenario value"):
        set_items([("kv.block_size", value)])
    assert set_items([("kv.block_size", 16), ("slo", {"ttft_s": {"p99": 2}})]) == [
        "kv.block_size=16", "slo={ttft_s: {p99: 2}}"]
