"""Mixture-of-experts fields of ModelSpec (kvsim/specs/model.py), read from config.json by
kvsim/specs/hf_config.py and kvsim/specs/hf_params.py: hand-checked against the published configs."""

import math

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.catalog import CATALOG, get_model
from kvsim.specs.hf_config import spec_from_hf_config
from kvsim.specs.model import ModelSpec, expected_distinct_experts
from tests.specs.test_catalog import DEEPSEEK_V2_LITE_CONFIG


def test_gpt_oss_120b_experts_from_its_config():
    m = CATALOG["gpt-oss-120b"]
    assert (m.num_experts, m.experts_per_token, m.moe_intermediate_size) == (128, 4, 2880)
    assert (m.num_shared_experts, m.shared_expert_intermediate_size) == (0, 0)
    assert m.moe_layers == () and m.moe_layer_count == 36  # every layer
    # gate_up (2 x 2880 x 2880) + down (2880 x 2880) weights, gate_up bias 2 x 2880, down bias 2880
    assert m.expert_params == 3 * 2880 * 2880 + 2 * 2880 + 2880 == 24_891_840
    assert CATALOG["gpt-oss-20b"].num_experts == 32 and CATALOG["gpt-oss-20b"].moe_layer_count == 24


def test_deepseek_v3_experts_first_three_layers_dense():
    m = CATALOG["deepseek-v3"]
    assert (m.num_experts, m.experts_per_token, m.moe_intermediate_size) == (256, 8, 2048)
    assert (m.num_shared_experts, m.shared_expert_intermediate_size) == (1, 2048)
    assert m.moe_layers == tuple(range(3, 61)) and m.moe_layer_count == 58
    assert m.expert_params == 3 * 7168 * 2048


def test_deepseek_v2_lite_catalog_entry_equals_its_config():
    m = spec_from_hf_config(DEEPSEEK_V2_LITE_CONFIG, "cfg")
    c = CATALOG["deepseek-v2-lite"]
    fields = ("num_experts", "experts_per_token", "moe_intermediate_size", "num_shared_experts",
              "shared_expert_intermediate_size", "moe_layers", "num_params", "active_params")
    assert {f: getattr(m, f) for f in fields} == {f: getattr(c, f) for f in fields}
    assert (c.num_experts, c.experts_per_token, c.moe_layers) == (64, 6, tuple(range(1, 27)))
    assert c.shared_expert_intermediate_size == 2 * 1408  # two shared experts run as one MLP
    assert c.expert_params == 3 * 2048 * 1408  # (num_params - active_params) / (26 x (64 - 6))


def test_dense_models_have_no_experts():
    m = CATALOG["llama-3-8b"]
    assert (m.num_experts, m.moe_layer_count, m.expert_params, m.routes_experts) == (0, 0, 0.0, False)


QWEN_MOE = {  # a small Qwen3-MoE-style config: MoE every 2nd layer, layer 1 forced dense
    "model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 256, "moe_intermediate_size": 32,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 100,
    "num_experts": 8, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 48,
    "decoder_sparse_step": 2, "mlp_only_layers": [1], "tie_word_embeddings": True,
}


def test_decoder_sparse_step_and_mlp_only_layers_pick_the_moe_layers_and_the_counts_follow():
    m = spec_from_hf_config(QWEN_MOE, "cfg")
    # (i + 1) % 2 == 0 -> layers 1 and 3; layer 1 is in mlp_only_layers -> only layer 3
    assert m.moe_layers == (3,) and m.moe_layer_count == 1
    assert (m.num_shared_experts, m.shared_expert_intermediate_size) == (1, 48)
    h = 64
    attn = 4 * h * h  # Q/K/V/O (kvsim/specs/hf_params.py counts no Q/K norms for this family)
    dense, expert, shared, router = 3 * h * 256, 3 * h * 32, 3 * h * 48, h * 8
    total = 4 * (attn + 2 * h) + 3 * dense + shared + router + 8 * expert + h + 100 * h
    assert m.num_params == total
    assert m.num_params - m.active_params == 6 * expert  # 6 of 8 experts idle per token
    assert m.expert_params == expert


def test_nemotron_h_e_blocks_are_the_moe_layers():
    cfg = {"model_type": "nemotron_h", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "head_dim": 16,
           "hybrid_override_pattern": "M*E-", "mamba_head_dim": 16, "mamba_num_heads": 8,
           "ssm_state_size": 16, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}
    m = spec_from_hf_config(cfg, "cfg")
    assert m.moe_layers == (2,) and m.expert_params == 2 * 64 * 32  # relu2: 2 matrices


@pytest.mark.parametrize(("experts", "topk", "tokens", "want"), [
    (128, 4, 1, 4.0), (4, 2, 2, 3.0), (4, 2, 0, 0.0), (8, 8, 5, 8.0), (0, 0, 5, 0.0)])
def test_expected_distinct_experts_by_hand(experts, topk, tokens, want):
    # E (1 - (1 - k/E)^T): (4, 2, 2) -> 4 (1 - 1/4) = 3
    assert expected_distinct_experts(experts, topk, tokens) == pytest.approx(want, rel=1e-12)


def test_expected_distinct_experts_grows_to_every_expert():
    values = [expected_distinct_experts(128, 4, t) for t in (1, 8, 64, 512, 4096)]
    assert values == sorted(values) and values[-1] == pytest.approx(128, rel=1e-12)
    assert values[1] == pytest.approx(128 * (1 - (1 - 4 / 128) ** 8), rel=1e-12)
    assert math.isclose(CATALOG["gpt-oss-120b"].expected_experts(1), 4.0)


def tiny(**extra):
    base = dict(name="t", num_layers=2, hidden_size=8, num_attention_heads=2, num_kv_heads=2, head_dim=4,
                intermediate_size=16, vocab_size=10, num_params=10_000, active_params=6_000, attention="mha",
                max_position_embeddings=64, tie_word_embeddings=True, num_experts=4, experts_per_token=2,
                moe_intermediate_size=8)
    return ModelSpec(**{**base, **extra})


def test_expert_params_and_routed_bytes_of_a_tiny_spec():
    m = tiny()
    assert m.expert_params == (10_000 - 6_000) / (2 * (4 - 2)) == 1000
    assert m.routed_expert_bytes() == 2 * 4 * 1000 * 2  # layers x experts x params x bf16
    assert m.routed_expert_bytes(tp=2) == 8000


@pytest.mark.parametrize(("extra", "message"), [
    ({"experts_per_token": 0}, "go together"),
    ({"experts_per_token": 5}, "exceeds num_experts"),
    ({"moe_intermediate_size": 0}, "moe_intermediate_size >= 1"),
    ({"num_shared_experts": 1}, "go together"),
    ({"moe_layers": (1, 0)}, r"moe_layers\[1\]"),
    ({"moe_layers": (2,)}, r"below num_layers \(2\)"),
    ({"num_experts": 0, "experts_per_token": 0, "moe_layers": (0,)}, "without num_experts"),
])
def test_bad_expert_fields_are_one_line_errors(extra, message):
    with pytest.raises(KvsimError, match=message):
        tiny(**extra)


def test_a_yaml_spec_takes_moe_layers_as_a_list(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("base: deepseek-v2-lite\nmoe_layers: [2, 3]\n")
    m = get_model(str(path))
    assert m.moe_layers == (2, 3) and m.moe_layer_count == 2
