"""The lora section (kvsim/lora/config.py) and vLLM's names for its keys (kvsim/aliases.py)."""

from __future__ import annotations

import pytest

from kvsim.errors import KvsimError
from kvsim.scenario import build_scenario, lora_config


def sc(**data):
    return build_scenario({"model": "llama-3.1-8b", **data}, "s.yaml")


def test_defaults_are_vllms():
    lo = sc(lora={}).lora
    assert (lo.max_loras, lo.max_lora_rank, lo.cpu_loras, lo.base_fraction) == (1, 16, 1, 0.0)


def test_vllm_names_map_to_the_section():
    s = sc(enable_lora=True, max_loras=4, max_lora_rank=32, max_cpu_loras=8)
    assert (s.lora.max_loras, s.lora.max_lora_rank, s.lora.cpu_loras) == (4, 32, 8)
    assert lora_config(sc(engine={"enable_lora": False})) is None
    assert lora_config(sc()) is None


@pytest.mark.parametrize("lora, words", [
    ({"max_lora_rank": 12}, "not one of vLLM's ranks"),
    ({"max_loras": 4, "max_cpu_loras": 2}, "must be >= max_loras"),
    ({"adapters": [{"name": "a", "rank": 32}]}, "exceeds max_lora_rank"),
    ({"adapters": [{"name": "a"}, {"name": "a"}]}, "names two adapters"),
    ({"adapters": [{"count": 2, "prefix": "a"}, {"name": "a1"}]}, "'a1' names two adapters"),
    ({"adapters": [{"name": "a", "popularity": 0}]}, "every popularity is 0"),
    ({"adapters": [{"count": 3, "popularity": "pareto"}]}, "popularity"),
])
def test_bad_sections_are_one_line_errors(lora, words):
    with pytest.raises(KvsimError, match=words) as err:
        sc(lora=lora)
    assert "\n" not in str(err.value) and str(err.value).startswith("s.yaml: lora")


@pytest.mark.parametrize("extra, words", [
    ({"cluster": {"pools": [{"role": "prefill"}, {"role": "decode"}]}}, "disaggregated prefill / decode"),
    ({"kv": {"layout": "contiguous:max"}}, "kv.layout: paged only"),
    ({"kv": {"sparsity": {"policy": "h2o"}}}, "kv.sparsity.policy"),
])
def test_combinations_not_modelled(extra, words):
    with pytest.raises(KvsimError, match=words):
        sc(lora={}, **extra)
