"""Hugging Face config.json loading for the hybrid families: layer kinds, state and compression shapes,
family defaults, weight dtypes, parameter counts."""

import json

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.catalog import CATALOG, get_model
from kvsim.specs.hf_config import spec_from_hf_config

TOY = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
       "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000, "torch_dtype": "bfloat16"}


def load(tmp_path, cfg, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return get_model(str(path))


def test_gemma2_alternates_and_ties_by_default(tmp_path):
    cfg = dict(TOY, model_type="gemma2", head_dim=16, sliding_window=32)
    m = load(tmp_path, cfg)
    assert m.layer_kinds == ("sliding", "full", "sliding", "full")
    assert m.tie_word_embeddings is True  # Gemma2Config's default when the key is left out
    assert load(tmp_path, dict(cfg, tie_word_embeddings=False), "b.json").tie_word_embeddings is False
    # 4 norms per layer: per layer q,o 2*64*64 + k,v 2*64*32 + mlp 3*64*128 + 4*64; final norm; tied embedding
    assert m.num_params == 4 * (8192 + 4096 + 24576 + 256) + 64 + 1000 * 64


def test_gemma3_reads_text_config_and_its_defaults(tmp_path):
    cfg = {"model_type": "gemma3", "torch_dtype": "bfloat16",
           "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 12, "hidden_size": 64,
                           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                           "intermediate_size": 128, "sliding_window": 32}}
    m = load(tmp_path, cfg)
    assert m.layer_kinds == (("sliding",) * 5 + ("full",)) * 2  # every 6th layer global
    assert (m.vocab_size, m.max_position_embeddings, m.tie_word_embeddings) == (262208, 131072, True)
    cfg["text_config"]["sliding_window_pattern"] = 3
    assert load(tmp_path, cfg, "b.json").layer_kinds == ("sliding", "sliding", "full") * 4


def test_layer_types_map_to_kinds(tmp_path):
    m = load(tmp_path, dict(TOY, sliding_window=16, layer_types=["sliding_attention", "full_attention"] * 2))
    assert m.layer_kinds == ("sliding", "full", "sliding", "full") and m.sliding_window_layers == 2
    with pytest.raises(KvsimError, match=r"layer_types\[1\] must be one of full_attention"):
        load(tmp_path, dict(TOY, layer_types=["full_attention", "chunky"] * 2))
    with pytest.raises(KvsimError, match="layer_types has 2 entries, num_hidden_layers is 4"):
        load(tmp_path, dict(TOY, layer_types=["full_attention"] * 2))
    with pytest.raises(KvsimError, match="layer_types must be a list"):
        load(tmp_path, dict(TOY, layer_types="x"))
    # sliding layers of a model without a window are full
    off = load(tmp_path, dict(TOY, layer_types=["sliding_attention"] * 4, use_sliding_window=False,
                              sliding_window=8))
    assert off.layer_kinds == ("full",) * 4


def test_gpt_oss_is_read_exactly(tmp_path):
    m = CATALOG["gpt-oss-20b"]
    assert m.weight_dtype == "mxfp4" and m.sliding_window == 128
    assert m.layer_kinds == ("sliding", "full") * 12
    assert m.num_params == 20_914_757_184  # published: 20.91B
    # published active 3.61B leaves out the input embedding (201088 x 2880)
    assert m.active_params - 201088 * 2880 == pytest.approx(3.61e9, rel=2e-3)
    assert CATALOG["gpt-oss-120b"].num_params == pytest.approx(116.83e9, rel=1e-4)


def nemotron(**kw):
    return {"model_type": "nemotron_h", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
            "num_key_value_heads": 2, "attention_head_dim": 16, "intermediate_size": 128, "vocab_size": 1000,
            "hybrid_override_pattern": "M*-M", "mamba_num_heads": 4, "mamba_head_dim": 32,
            "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4, "tie_word_embeddings": False, **kw}


def test_nemotron_h_pattern_and_mamba_params(tmp_path):
    m = load(tmp_path, nemotron())
    assert m.layer_kinds == ("state", "full", "none", "state")
    shapes = (m.ssm_kind, m.ssm_num_heads, m.ssm_head_dim, m.ssm_state_size, m.ssm_groups, m.ssm_conv_kernel)
    assert shapes == ("mamba2", 4, 32, 16, 2, 4)
    inner, conv_dim = 4 * 32, 4 * 32 + 2 * 2 * 16  # 128, 192
    mamba = 64 * (inner + conv_dim + 4) + conv_dim * 4 + conv_dim + 3 * 4 + inner + inner * 64
    attn = 2 * 64 * 4 * 16 + 2 * 64 * 2 * 16
    mlp = 2 * 64 * 128  # relu2, two matrices
    assert m.num_params == 2 * mamba + attn + mlp + 4 * 64 + 64 + 2 * 1000 * 64
    no_heads = {k: v for k, v in nemotron(expand=2).items() if k != "mamba_num_heads"}
    derived = load(tmp_path, no_heads, "b.json")
    assert derived.ssm_num_heads == 2 * 64 // 32
    with pytest.raises(KvsimError, match="hybrid_override_pattern must have one of"):
        load(tmp_path, nemotron(hybrid_override_pattern="M*X-"), "c.json")


def test_catalog_nemotron_h_8b_close_to_published():
    m = CATALOG["nemotron-h-8b"]
    assert m.layer_kinds.count("state") == 24 and m.layer_kinds.count("full") == 4
    assert m.num_params == pytest.approx(8.1e9, rel=0.01)  # published as 8B


def test_qwen3_next_gated_deltanet(tmp_path):
    cfg = dict(TOY, model_type="qwen3_next", head_dim=16, full_attention_interval=2, linear_num_key_heads=2,
               linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=16,
               linear_conv_kernel_dim=4)
    m = load(tmp_path, cfg)
    assert m.layer_kinds == ("state", "full", "state", "full")
    shapes = (m.ssm_kind, m.ssm_num_heads, m.ssm_head_dim, m.ssm_state_size, m.ssm_groups)
    assert shapes == ("gdn", 4, 16, 8, 2)
    key, value = 2 * 8, 4 * 16
    gdn = 64 * (2 * key + 2 * value) + 64 * 2 * 4 + (2 * key + value) * 4 + 2 * 4 + 16 + value * 64
    attn = 3 * 64 * 4 * 16 + 2 * 64 * 2 * 16 + 2 * 16  # gated Q, q_norm / k_norm
    assert m.num_params == 2 * gdn + 2 * attn + 4 * (3 * 64 * 128 + 2 * 64) + 64 + 2 * 1000 * 64
    typed = load(tmp_path, dict(cfg, layer_types=["linear_attention", "full_attention"] * 2), "b.json")
    assert typed.layer_kinds == m.layer_kinds
    with pytest.raises(KvsimError, match="linear-attention layers need 'linear_num_value_heads'"):
        load(tmp_path, dict(TOY, layer_types=["linear_attention"] * 4), "c.json")


def v4(**kw):
    return {"model_type": "deepseek_v4", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
            "num_key_value_heads": 1, "head_dim": 32, "qk_rope_head_dim": 8, "q_lora_rank": 16,
            "o_lora_rank": 16, "o_groups": 2, "moe_intermediate_size": 32, "n_routed_experts": 4,
            "num_experts_per_tok": 2, "n_shared_experts": 1, "vocab_size": 1000, "sliding_window": 8,
            "index_head_dim": 8, "index_n_heads": 2, "index_topk": 4, "compress_ratios": [0, 4, 16, 4, 0],
            "quantization_config": {"quant_method": "fp8"}, **kw}


def test_deepseek_v4_config(tmp_path):
    m = load(tmp_path, v4())
    assert m.compress_ratios == (0, 4, 16, 4)  # the MTP layer's entry is dropped
    assert (m.attention, m.kv_lora_rank, m.qk_rope_head_dim, m.head_dim) == ("mla", 24, 8, 32)
    assert (m.index_head_dim, m.index_num_heads, m.index_topk, m.weight_dtype) == (8, 2, 4, "fp8")
    assert load(tmp_path, v4(expert_dtype="fp4"), "b.json").weight_dtype == "mxfp4"
    with pytest.raises(KvsimError, match="compress_ratios has 3 entries, fewer than the 4 layers"):
        load(tmp_path, v4(compress_ratios=[0, 4, 4]), "c.json")
    with pytest.raises(KvsimError, match=r"compress_ratios\[1\] must be an integer >= 0"):
        load(tmp_path, v4(compress_ratios=[0, True, 4, 4]), "d.json")


def test_catalog_v4_params_close_to_published():
    flash, pro = CATALOG["deepseek-v4-flash"], CATALOG["deepseek-v4-pro"]
    assert flash.num_params == pytest.approx(284e9, rel=0.005)  # published 284B total / 13B active
    assert flash.active_params - 129280 * 4096 == pytest.approx(13e9, rel=0.03)
    assert pro.num_params == pytest.approx(1.6e12, rel=0.02)  # published 1.6T (rounded) / 49B
    assert pro.active_params == pytest.approx(49e9, rel=0.02)
    assert flash.layer_kinds[:3] == ("sliding", "sliding", "compressed")
    assert pro.compress_ratios.count(4) == 30 and pro.compress_ratios.count(128) == 31


def test_deepseek_v3_and_quantized_weights():
    m = CATALOG["deepseek-v3"]
    assert (m.attention, m.weight_dtype, m.kv_bytes_per_token("bf16")) == ("mla", "fp8", 61 * 576 * 2)
    assert m.num_params == pytest.approx(671e9, rel=0.001)  # published 671B (without the MTP module)
    assert m.weight_bytes() == m.num_params  # FP8: 1 byte per weight


def test_gemma_catalog_params():
    assert CATALOG["gemma-2-9b"].num_params == 9_241_705_984  # exact: the published safetensors total
    g3 = CATALOG["gemma-3-27b"]
    assert g3.num_params == pytest.approx(27.01e9, rel=1e-3)  # text model; 27.4B with the vision encoder
    assert g3.layer_kinds.count("full") == 10 and g3.sliding_window == 1024


def test_spec_from_hf_config_errors_name_the_source():
    with pytest.raises(KvsimError, match=r"^cfg: text_config must be a mapping"):
        spec_from_hf_config({"text_config": 3}, "cfg")


def test_newer_nemotron_h_block_list_and_jamba_refusal(tmp_path):
    cfg = {k: v for k, v in nemotron().items() if k != "hybrid_override_pattern"}
    m = load(tmp_path, dict(cfg, layers_block_type=["mamba", "attention", "mlp", "mamba"]))
    assert m.layer_kinds == ("state", "full", "none", "state")
    assert m.num_params == load(tmp_path, nemotron(), "b.json").num_params
    with pytest.raises(KvsimError, match="Jamba-style layer patterns"):
        load(tmp_path, dict(TOY, attn_layer_period=8, attn_layer_offset=4), "c.json")
