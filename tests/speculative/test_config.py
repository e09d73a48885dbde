"""The `speculative` section: its rules, and vLLM's speculative_config name for it."""

from __future__ import annotations

import pytest

from kvsim.errors import KvsimError
from kvsim.scenario import build_scenario
from kvsim.speculative.config import SpeculativeConfig


def spec(**kw):
    return SpeculativeConfig(**{"method": "eagle", "num_speculative_tokens": 3, "acceptance": 0.7, **kw})


def test_the_three_forms_of_acceptance():
    assert spec(acceptance=[0.9, 0.8, 0.7]).acceptance == [0.9, 0.8, 0.7]
    assert spec(acceptance=0.5).acceptance == 0.5
    assert spec(acceptance={"mean_acceptance_length": 2.5}).acceptance.mean_acceptance_length == 2.5


@pytest.mark.parametrize("kw, words", [
    ({"acceptance": [0.9, 0.8]}, "2 rates given for num_speculative_tokens 3"),
    ({"acceptance": [0.9, 1.2, 0.5]}, "rate 2 must be in [0, 1], got 1.2"),
    ({"acceptance": 1.5}, "a rate must be in [0, 1], got 1.5"),
    ({"acceptance": {"mean_acceptance_length": 4.5}}, "at most num_speculative_tokens + 1 = 4"),
    ({"method": "draft_model"}, "method draft_model needs the draft model"),
    ({"method": "ngram", "model": "llama-3-8b"}, "method ngram proposes from the prompt"),
    ({"num_speculative_tokens": 0}, "greater than or equal to 1"),
])
def test_bad_sections(kw, words):
    with pytest.raises(ValueError, match=None) as exc:
        spec(**kw)
    assert words in str(exc.value)


def test_vllm_name_maps_to_the_section():
    sc = build_scenario({"speculative_config": {"method": "ngram", "num_speculative_tokens": 2,
                                                "acceptance": 0.5}})
    assert sc.speculative.method == "ngram" and sc.speculative.num_speculative_tokens == 2


def test_vllm_json_string_is_parsed():
    sc = build_scenario({"speculative_config": '{"method": "eagle3", "num_speculative_tokens": 3, '
                                               '"acceptance": 0.6}'})
    assert sc.speculative.method == "eagle3"
    with pytest.raises(KvsimError, match="speculative_config: not a JSON object"):
        build_scenario({"speculative_config": "{method: eagle3"})


def test_both_names_with_different_values_are_an_error():
    with pytest.raises(KvsimError, match="speculative_config .* and speculative are both given"):
        build_scenario({
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 2, "acceptance": 0.5},
            "speculative": {"method": "ngram", "num_speculative_tokens": 3, "acceptance": 0.5}})


@pytest.mark.parametrize("extra, words", [
    ({"workload": {"n": 2}}, "parallel sampling or beam search"),
    ({"kv": {"layout": "contiguous:max"}}, "kv.layout: contiguous:max"),
    ({"kv": {"sparsity": {"policy": "h2o"}}}, "kv.sparsity.policy: h2o"),
    ({"scheduler": {"policy": "sarathi"}}, "scheduler.policy: sarathi"),
    ({"workload": {"kind": "bench_serve"}}, "workload.kind: bench_serve"),
    ({"lora": {"max_loras": 1, "max_lora_rank": 8, "adapters": [{"name": "a", "rank": 8}]}}, "with lora"),
    ({"cluster": {"pools": [{"name": "p", "role": "prefill"}, {"name": "d", "role": "decode"}]}},
     "prefill / decode pools"),
])
def test_combinations_not_modelled(extra, words):
    data = {"speculative": {"method": "ngram", "num_speculative_tokens": 2, "acceptance": 0.5}, **extra}
    with pytest.raises(KvsimError) as exc:
        build_scenario(data)
    assert words in str(exc.value) and "speculative decoding is not modelled with" in str(exc.value)
