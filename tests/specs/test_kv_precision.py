"""KV precision: vLLM's names, kvsim's formats, fractional bits with scales, per-part precision."""

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.catalog import get_model
from kvsim.specs.kv_precision import canonical_kv_dtype, kv_precision, schema_kv_dtype


@pytest.mark.parametrize("name, nbytes", [
    ("fp32", 4), ("fp16", 2), ("bf16", 2), ("fp8", 1), ("fp8_e4m3", 1), ("fp8_e5m2", 1), ("int8", 1),
    ("int4", 0.5), ("nvfp4", 4.5 / 8), ("bfloat16", 2), ("FP8", 1), ("float8_e4m3fn", 1),
])
def test_names_and_bytes(name, nbytes):
    p = kv_precision(name)
    assert p.bytes_per_element("rest") == p.bytes_per_element("rope") == nbytes
    assert p.uniform


def test_auto_is_the_model_dtype_or_bf16_for_quantized_weights():
    assert kv_precision("auto", "fp16").name == "fp16"
    assert kv_precision("auto", "fp32").bytes_per_element() == 4
    assert kv_precision("auto", "fp8").name == "bf16"  # the activation dtype of an FP8 checkpoint
    assert get_model("opt-13b").kv_bytes_per_token("auto") == 819_200  # fp16 model: 2 bytes
    assert get_model("deepseek-v3").kv_bytes_per_token("auto") == 61 * 576 * 2


def test_fractional_bits_with_scale_overhead():
    turbo = kv_precision({"bits": 3.5, "group_size": 128, "scale_bits": 16})
    assert turbo.rest.bits_per_element == 3.5 + 16 / 128 == 3.625
    assert turbo.bytes_per_element() == 3.625 / 8
    assert 16 / 3.5 == pytest.approx(4.571, abs=1e-3)  # ~4.6x below FP16 before the scales
    assert 16 / turbo.rest.bits_per_element == pytest.approx(4.414, abs=1e-3)
    assert kv_precision({"bits": 6}).bytes_per_element() == 0.75
    # Llama-3-8B: 2 * 32 * 8 * 128 = 65,536 elements per token
    assert get_model("llama-3-8b").kv_bytes_per_token({"bits": 3.5, "group_size": 128, "scale_bits": 16}) \
        == 65536 * 3.625 / 8 == 29696


def test_per_part_precision_for_mla():
    p = kv_precision({"rope": "bf16", "rest": "fp8"})
    assert (p.bytes_per_element("rope"), p.bytes_per_element("rest")) == (2, 1)
    assert p.name == "rope=bf16,rest=fp8" and not p.uniform
    v3 = get_model("deepseek-v3")
    assert v3.kv_bytes_per_token({"rope": "bf16", "rest": "fp8"}) == 61 * (512 + 64 * 2) == 39040
    # vLLM's fp8_ds_mla layout: 512 FP8 values + 4 fp32 scales + 64 BF16 RoPE dims = 656 B per layer
    ds_mla = {"rope": "bf16", "rest": {"bits": 8, "group_size": 128, "scale_bits": 32}}
    assert v3.kv_bytes_per_token(ds_mla) == 61 * 656
    # a GQA model has no RoPE part in its cache: everything is `rest`
    assert get_model("llama-3-8b").kv_bytes_per_token({"rope": "fp32", "rest": "fp8"}) == 65536
    assert kv_precision({"rest": "fp8"}, "bf16").bytes_per_element("rope") == 2  # missing part: auto


def test_deepseek_v2_needs_mla_and_6_bit_kv_for_93_3_percent():
    """DeepSeek-V2 paper: KV 93.3% below DeepSeek 67B (95 layers, 8 KV heads of 128, BF16)."""
    shapes = {"num_layers": 60, "hidden_size": 5120, "num_attention_heads": 128, "num_kv_heads": 128,
              "head_dim": 128, "num_params": 236_000_000_000}
    v2 = get_model({**shapes, "name": "deepseek-v2", "attention": "mla", "kv_lora_rank": 512,
                    "qk_rope_head_dim": 64})
    mha = get_model({**shapes, "name": "deepseek-v2-as-mha"})
    dense67b = get_model({"name": "deepseek-67b", "num_layers": 95, "hidden_size": 8192,
                          "num_attention_heads": 64, "num_kv_heads": 8, "num_params": 67_000_000_000})
    base = dense67b.kv_bytes_per_token("bf16")
    assert base == 2 * 95 * 8 * 128 * 2 == 389_120
    assert mha.kv_bytes_per_token("bf16") == 2 * 60 * 128 * 128 * 2 == 3_932_160
    mla = v2.kv_bytes_per_token("bf16")
    assert mla == 60 * 576 * 2 == 69_120
    assert 1 - mla / base == pytest.approx(0.822, abs=5e-4)  # MLA alone: 82.2%
    six = v2.kv_bytes_per_token({"bits": 6})
    assert six == 60 * 576 * 0.75 == 25_920
    assert 1 - six / base == pytest.approx(0.933, abs=5e-4)  # with 6-bit KV: the paper's 93.3%


def test_canonical_forms():
    assert canonical_kv_dtype("BFloat16") == "bf16"
    assert canonical_kv_dtype({"rope": "BF16", "rest": "e4m3"}) == {"rope": "bf16", "rest": "fp8_e4m3"}
    assert canonical_kv_dtype({"bits": 6}) == {"bits": 6}


@pytest.mark.parametrize("value, message", [
    ("fp6", "unknown kv dtype 'fp6'; known: auto, fp32"),
    ({"bits": 0}, r"bits must be a number in \(0, 64\], got 0"),
    ({"bits": True}, "bits must be a number"),
    ({"bits": float("nan")}, "bits must be a number"),
    ({"bits": 4, "group_size": 16}, "give group_size and scale_bits together"),
    ({"bits": 4, "group_size": 0, "scale_bits": 8}, "group_size must be an integer from 1"),
    ({"bits": 4, "groups": 16}, "unknown key 'groups'"),
    ({"group_size": 16, "scale_bits": 8}, "needs 'bits'"),
    ({"rope": "bf16", "nope": "fp8"}, "unknown key 'nope' in a per-part precision"),
    ({"rope": "bf17"}, "unknown kv dtype rope 'bf17'"),
    (7, "expected a name or a mapping, got 7"),
])
def test_bad_values_are_one_line_errors(value, message):
    with pytest.raises(KvsimError, match=message) as exc:
        kv_precision(value)
    assert "\n" not in str(exc.value)


def test_schema_messages():
    with pytest.raises(ValueError, match=r"^Input should be 'auto', 'fp32'.* or 'nvfp4', or a mapping"):
        schema_kv_dtype("fp9")
    with pytest.raises(ValueError, match=r"^Input should be"):
        schema_kv_dtype(16)
    with pytest.raises(ValueError, match=r"^bits must be a number"):
        schema_kv_dtype({"bits": -1})
    assert schema_kv_dtype("FP8") == "fp8"


def test_scenario_accepts_every_form():
    from kvsim.scenario import load_scenario

    sc = load_scenario(None, ["kv.dtype={rope: bf16, rest: fp8}"])
    assert sc.kv.dtype == {"rope": "bf16", "rest": "fp8"}
    assert load_scenario(None, ["kv.dtype=fp8_e4m3"]).kv.dtype == "fp8_e4m3"
    turbo = load_scenario(None, ["kv.dtype={bits: 3.5, group_size: 128, scale_bits: 16}"])
    assert turbo.kv.dtype == {"bits": 3.5, "group_size": 128, "scale_bits": 16}
    with pytest.raises(KvsimError, match=r"kv.dtype: give group_size and scale_bits together"):
        load_scenario(None, ["kv.dtype={bits: 3, scale_bits: 8}"])


def test_kernel_dtype_for_kernel_fit_lookups():
    assert kv_precision("fp8_e5m2").kernel_dtype == "fp8"
    assert kv_precision("nvfp4").kernel_dtype == "int4"
    assert kv_precision({"bits": 6}).kernel_dtype == "fp8"
    assert kv_precision({"rope": "bf16", "rest": "fp8"}).kernel_dtype == "fp8"
