"""KV bytes, weights and FLOPs of ModelSpec, against values computed by hand."""

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.catalog import get_model
from kvsim.specs.model import ModelSpec, estimate_dense_params

KiB = 1024


def tiny(**overrides):
    fields = dict(name="tiny", num_layers=4, hidden_size=64, num_attention_heads=4, num_kv_heads=2,
                  head_dim=16, intermediate_size=128, vocab_size=1000, num_params=1_000_000,
                  active_params=1_000_000, attention="gqa", max_position_embeddings=4096)
    fields.update(overrides)
    return ModelSpec(**fields)


def test_opt_13b_fp16_is_800_kib_per_token():
    # 2 (K, V) * 5120 hidden * 40 layers * 2 bytes
    assert get_model("opt-13b").kv_bytes_per_token("fp16") == 2 * 5120 * 40 * 2 == 819200 == 800 * KiB


def test_llama_2_7b_fp16_is_512_kib_per_token():
    assert get_model("llama-2-7b").kv_bytes_per_token("fp16") == 2 * 32 * 32 * 128 * 2 == 512 * KiB


def test_llama_3_8b_bf16_and_fp8():
    m = get_model("llama-3-8b")
    assert m.kv_bytes_per_token("bf16") == 2 * 32 * 8 * 128 * 2 == 131072
    assert m.kv_bytes_per_token("fp8") == 65536


def test_tensor_parallel_splits_gqa_kv_heads():
    m = get_model("llama-3-8b")
    assert m.kv_heads_per_gpu(2) == 4
    assert m.kv_bytes_per_token("bf16", tp=2) == 65536
    assert m.kv_bytes_per_token("bf16", tp=8) == 16384


def test_kv_heads_are_replicated_when_tp_exceeds_them():
    m = get_model("llama-3-70b")
    assert m.kv_heads_per_gpu(8) == 1
    assert m.kv_heads_per_gpu(16) == 1
    assert m.kv_bytes_per_token("bf16", tp=16) == 2 * 80 * 1 * 128 * 2 == 40960


def test_deepseek_v2_lite_mla_latent_is_replicated_not_split():
    m = get_model("deepseek-v2-lite")
    assert m.kv_bytes_per_token("bf16") == 27 * (512 + 64) * 2 == 31104
    assert m.kv_bytes_per_token("bf16", tp=4) == 31104
    assert m.kv_heads_per_gpu(4) == 1


def test_mistral_sliding_window_caps_kv_at_4096_tokens():
    m = get_model("mistral-7b")
    per_token = 2 * 32 * 8 * 128 * 2  # 131072, all 32 layers windowed
    assert m.kv_bytes(1000, "bf16") == 1000 * per_token
    assert m.kv_bytes(4096, "bf16") == 4096 * per_token
    assert m.kv_bytes(8192, "bf16") == 4096 * per_token == 536870912


def test_partly_windowed_model_counts_full_layers_in_full():
    m = tiny(sliding_window=10, sliding_window_layers=1)
    per_layer = 2 * 2 * 16 * 2  # 128 bytes per token per layer at fp16
    assert m.kv_bytes(100, "fp16") == per_layer * (3 * 100 + 1 * 10) == 39680
    assert m.kv_bytes(0, "fp16") == 0


def test_weight_bytes_split_by_tp_and_dtype():
    m = get_model("llama-3-8b")
    assert m.weight_bytes() == 8_030_261_248 * 2
    assert m.weight_bytes(tp=2) == 8_030_261_248
    assert tiny(weight_dtype="fp8").weight_bytes() == 1_000_000


def test_linear_flops_skip_the_untied_input_embedding():
    assert get_model("llama-3-8b").linear_flops_per_token() == 2 * (8_030_261_248 - 128256 * 4096)
    assert get_model("opt-13b").linear_flops_per_token() == 2 * 12_853_473_280  # tied


def test_attention_flops_per_pair():
    m = get_model("llama-3-8b")
    assert m.attention_flops_per_pair() == 4 * 32 * 32 * 128 == 524288
    assert m.attention_flops_per_pair(tp=2) == 262144
    # MLA: QK over 128 + 64 dims, PV over 128 dims, 16 heads, 27 layers
    assert get_model("deepseek-v2-lite").attention_flops_per_pair() == 2 * 27 * 16 * (192 + 128)


def test_validate_tp():
    m = get_model("llama-3-8b")
    m.validate_tp(16)  # 32 heads / 16, 8 KV heads replicated
    with pytest.raises(KvsimError, match="does not divide 32 attention heads"):
        m.validate_tp(3)
    with pytest.raises(KvsimError, match="KV heads"):
        tiny(num_attention_heads=12, num_kv_heads=4, head_dim=16).validate_tp(6)
    with pytest.raises(KvsimError, match="tensor_parallel_size must be an integer >= 1"):
        m.kv_bytes_per_token("bf16", tp=0)


@pytest.mark.parametrize("overrides, message", [
    ({"num_layers": 0}, "num_layers must be a positive integer"),
    ({"head_dim": 16.5}, "head_dim must be a positive integer"),
    ({"attention": "sparse"}, "attention must be one of"),
    ({"attention": "mla"}, "needs kv_lora_rank"),
    ({"num_kv_heads": 8}, "exceeds num_attention_heads"),
    ({"active_params": 2_000_000}, "active_params exceeds"),
    ({"sliding_window_layers": 2}, "without sliding_window"),
    ({"sliding_window": 8, "sliding_window_layers": 5}, "exceeds num_layers"),
    ({"weight_dtype": "fp6"}, "unknown dtype"),
])
def test_bad_specs_raise_one_line_errors(overrides, message):
    with pytest.raises(KvsimError, match=message) as exc:
        tiny(**overrides)
    assert "\n" not in str(exc.value)


def test_negative_token_count_is_an_error():
    with pytest.raises(KvsimError, match="num_tokens"):
        tiny().kv_bytes(-1, "bf16")


def test_estimate_dense_params_is_exact_for_llama():
    assert estimate_dense_params(32, 4096, 32, 32, 128, 11008, 32000) == 6_738_415_616
    assert estimate_dense_params(28, 3584, 28, 4, 128, 18944, 152064, qkv_bias=True) == 7_615_616_512


@pytest.mark.parametrize("overrides, message", [
    ({"num_kv_heads": 3}, r"num_kv_heads \(3\) must divide num_attention_heads \(4\) for gqa"),
    ({"num_kv_heads": 0}, "num_kv_heads must be a positive integer"),
    ({"num_attention_heads": 0}, "num_attention_heads must be a positive integer"),
    ({"attention": "mha"}, r"mha attention needs num_kv_heads = num_attention_heads \(4\), got 2"),
    ({"attention": "mqa"}, "mqa attention needs num_kv_heads = 1, got 2"),
    ({"num_layers": 32.0}, r"num_layers must be a positive integer <= 2\*\*31, got 32.0"),
    ({"num_layers": True}, "num_layers must be a positive integer"),
    ({"num_layers": "4"}, "num_layers must be a positive integer"),
    ({"hidden_size": 2**31 + 1}, r"hidden_size must be a positive integer <= 2\*\*31"),
    ({"num_params": 10**16, "active_params": 10**6}, "num_params must be a positive integer <= 1e15"),
    ({"kv_lora_rank": -1}, "kv_lora_rank must be an integer >= 0"),
    ({"name": 7}, "name must be a string, got 7"),
    ({"weight_dtype": None}, "weight_dtype must be a string"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings must be true or false"),
])
def test_shapes_and_types_are_checked(overrides, message):
    with pytest.raises(KvsimError, match=message) as exc:
        tiny(**overrides)
    assert "\n" not in str(exc.value)


def test_attention_kinds_that_fit_the_head_counts():
    assert tiny(num_kv_heads=4, attention="mha").kv_heads_per_gpu() == 4
    assert tiny(num_kv_heads=1, attention="mqa").kv_heads_per_gpu() == 1
    assert tiny(num_kv_heads=4, attention="gqa").num_kv_heads == 4  # one group: still a divisor


def test_an_odd_name_is_quoted_in_one_line():
    with pytest.raises(KvsimError, match=r"model 'a\\nb': attention must be one of") as exc:
        tiny(name="a\nb", attention="x")
    assert "\n" not in str(exc.value)


def test_linear_flops_never_negative():
    # a hand-written spec whose active_params (1000) are fewer than its embedding (1000 x 64)
    assert tiny(num_params=1000, active_params=1000).linear_flops_per_token() == 0.0


def test_a_model_without_any_kv_or_state_layer_is_one_line_naming_it():
    with pytest.raises(KvsimError) as exc:
        get_model({"base": "llama-3-8b", "name": "nokv", "num_layers": 4, "layer_types": ["none"] * 4})
    assert str(exc.value) == ("inline model: model nokv: no layer holds KV or state (every layer_types entry "
                              "is 'none'): nothing for kvsim to size or time")
    # one KV layer among them is a model kvsim can size
    assert get_model({"base": "llama-3-8b", "name": "one", "num_layers": 4,
                      "layer_types": ["none", "none", "full", "none"]}).layers_by_kind()["full"] == (2,)
