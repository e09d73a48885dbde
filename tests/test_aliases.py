"""kvsim/aliases.py: vLLM's engine-argument names in a scenario (top level, `engine:`, their section; with
underscores or dashes) mean kvsim's keys; both names with different values, an unmodelled vLLM argument
and an unknown key are one-line errors, the last with a "did you mean"."""

from __future__ import annotations

import pytest

from kvsim.aliases import did_you_mean, normalize
from kvsim.errors import KvsimError
from kvsim.scenario import build_scenario, load_scenario


@pytest.mark.parametrize("data", [
    {"kv_cache_dtype": "fp8", "enable_prefix_caching": True, "enable_chunked_prefill": False,
     "swap_space": 2, "max_num_seqs": 64, "tensor_parallel_size": 2},
    {"engine": {"kv-cache-dtype": "fp8", "enable-prefix-caching": True, "enable_chunked_prefill": False,
                "swap_space": 2, "max-num-seqs": 64, "tensor_parallel_size": 2}},
    {"kv": {"kv_cache_dtype": "fp8", "enable_prefix_caching": True, "swap_space": 2},
     "scheduler": {"enable_chunked_prefill": False, "max_num_seqs": 64},
     "parallelism": {"tensor_parallel_size": 2}},
])
def test_vllm_names_mean_kvsims_keys(data):
    sc = build_scenario(data)
    got = (sc.kv.dtype, sc.kv.prefix_cache, sc.scheduler.chunked_prefill, sc.kv.swap_space_gb,
           sc.scheduler.max_num_seqs, sc.parallelism.tensor_parallel_size)
    assert got == ("fp8", "hash", False, 2.0, 64, 2)


def test_normalize_leaves_the_callers_mapping_alone():
    data = {"kv": {"swap_space": 2}, "enable_prefix_caching": False}
    out = normalize(data, "x")
    assert data == {"kv": {"swap_space": 2}, "enable_prefix_caching": False}
    assert out == {"kv": {"swap_space_gb": 2, "prefix_cache": "none"}}


def test_set_takes_vllm_names_too():
    sc = load_scenario(None, ["kv_cache_dtype=fp8", "scheduler.enable_chunked_prefill=false"])
    assert sc.kv.dtype == "fp8" and sc.scheduler.chunked_prefill is False


@pytest.mark.parametrize("data, needle", [
    ({"kv_cache_dtype": "fp8", "kv": {"dtype": "bf16"}},
     "scenario: kv_cache_dtype (vLLM's name for kv.dtype) and kv.dtype are both given, with different "
     "values"),
    ({"enable_prefix_caching": "yes"},
     "scenario: enable_prefix_caching: expected true or false, got 'yes'"),
    ({"engine": {"enable_prefix_caching": 1}},
     "scenario: engine.enable_prefix_caching: expected true or false"),
    ({"enforce_eager": True}, "scenario: enforce_eager: a vLLM engine argument kvsim does not model"),
    ({"engine": {"max_num_seq": 3}}, "engine.max_num_seq: not a vLLM engine argument kvsim takes "
     "(did you mean 'max_num_seqs'?)"),
    ({"engine": 3}, "engine: must map vLLM engine arguments to values"),
    ({"kv": {"blok_size": 32}}, "scenario: kv.blok_size: unknown key (did you mean 'block_size'?)"),
    ({"modle": "x"}, "scenario: modle: unknown key (did you mean 'model'?)"),
    ({"kv": {"layout": "pagd"}}, "(did you mean 'paged'?)"),
    ({"cluster": {"pools": [{"rol": "prefill"}]}}, "cluster.pools.0.rol: unknown key (did you mean 'role'?)"),
])
def test_errors_name_the_key_and_suggest(data, needle):
    with pytest.raises(KvsimError) as exc:
        build_scenario(data)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_an_override_of_kvsims_key_wins_over_the_files_vllm_name(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("engine: {data_parallel_size: 2, tensor_parallel_size: 2}\n")
    sc = load_scenario(path, ["parallelism.replicas=4", "parallelism.tensor_parallel_size=1"])
    assert (sc.parallelism.replicas, sc.parallelism.tensor_parallel_size) == (4, 1)


def test_did_you_mean():
    assert did_you_mean("prefix_cach", ["prefix_cache", "layout"]) == " (did you mean 'prefix_cache'?)"
    assert did_you_mean("zzz", ["prefix_cache"]) == ""
