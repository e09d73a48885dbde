"""The hand-checked numbers of docs/specs.md: pages per sequence under the sliding rule, DeepSeek-V4 at 1M
tokens against a BF16 GQA-8 model and DeepSeek-V3, and a Mamba hybrid against a full-attention model."""

import pytest

from kvsim.specs.catalog import get_model
from kvsim.specs.footprint import kv_capacity
from kvsim.specs.hardware import load_hardware
from kvsim.specs.pages import plan_pages

M = 1 << 20
MIXED = {"rope": "bf16", "rest": "fp8"}


def plan(name, dtype="bf16", block=16):
    return plan_pages(get_model(name).layer_groups(dtype), block)


def test_mistral_16448_tokens_hold_the_window_not_the_context():
    p = plan("mistral-7b")
    assert p.pages(16_448) == 1028 - (16_448 - 4095) // 16 == 256
    assert p.pages(16_449) == 257  # the next token's block while block 772 is still in the window
    assert -(-16_448 // 16) == 1028  # without the sliding rule
    assert p.page_bytes == 16 * 131_072


def test_mistral_32768_tokens_fit_107_sequences_on_h100():
    cap = kv_capacity(get_model("mistral-7b"), load_hardware("h100-sxm"), "bf16", 1, 0.9, 16)
    assert cap.plan.pages(32_768) == 256
    assert (cap.num_pages, cap.sequences(32_768)) == (27_522, 107)
    assert cap.num_pages * 16 // 32_768 == 13  # what a pool of whole-context blocks would say


def test_gpt_oss_20b_16448_tokens_per_group():
    p = plan("gpt-oss-20b")
    full, sliding = p.groups
    assert (full.kind, sliding.kind, p.layers_per_group) == ("full", "sliding", 12)
    assert p.page_bytes == 16 * 12 * 2 * 8 * 64 * 2 == 393_216  # half a whole-model block
    assert p.pages(16_448) == 1028 + (1028 - (16_448 - 127) // 16) == 1028 + 8 == 1036
    assert p.pages(16_448) * p.page_bytes / (16 * 49_152) == 518  # in whole-model blocks, against 1,028


def test_deepseek_v4_pro_at_1m_tokens():
    v4 = get_model("deepseek-v4-pro")
    (g,) = v4.layer_groups(MIXED)
    entry = 448 * 1 + 64 * 2
    assert entry == 576
    csa, index, hca = (30 * (M // 4) * entry, 30 * (M // 4) * 128, 31 * (M // 128) * entry)
    state = 61 * 128 * entry + 3 * (30 * entry + 30 * 128) + 127 * 31 * entry
    assert g.state_bytes == state == 6_828_480
    total = v4.kv_bytes(M, MIXED)
    assert total == csa + index + hca + state == 5_689_586_112
    assert v4.kv_bytes(M, "bf16") == pytest.approx(10.339e9, rel=1e-3)  # mixed precision: 45% below BF16
    gqa8 = 2 * 61 * 8 * 128 * 2 * M  # an equivalent BF16 GQA-8 model
    assert total / gqa8 == pytest.approx(0.0217, abs=5e-4)  # the paper: ~2%
    v3 = get_model("deepseek-v3")
    assert v3.kv_bytes(M, "bf16") == 61 * 576 * 2 * M
    assert total / v3.kv_bytes(M, "bf16") == pytest.approx(0.0772, abs=5e-4)  # 13x smaller
    fp8_ds_mla = {"rope": "bf16", "rest": {"bits": 8, "group_size": 128, "scale_bits": 32}}
    assert v3.kv_bytes_per_token(fp8_ds_mla) == 61 * 656
    v32 = 61 * (656 + 132) * M  # V3.2: FP8 latent + FP8 indexer key (128 values + a 4-byte scale)
    assert total / v32 == pytest.approx(0.113, abs=1e-3)  # the paper: ~10% of V3.2
    flash = get_model("deepseek-v4-flash").kv_bytes(M, MIXED)
    assert flash / v32 == pytest.approx(0.079, abs=1e-3)  # the paper: 7%


def test_deepseek_v4_block_size_is_the_lcm_of_the_ratios():
    p = plan("deepseek-v4-pro", MIXED)
    assert p.block_size == 128 and len(p.groups) == 1
    assert p.page_bytes == 32 * (30 * 576 + 30 * 128) + 31 * 576  # 32 CSA + 32 indexer + 1 HCA entry a layer
    assert p.pages(M) == M // 128 + p.groups[0].state_pages


def test_nemotron_h_8b_against_a_same_size_full_attention_model():
    nem, llama = get_model("nemotron-h-8b"), get_model("llama-3-8b")
    per_state_layer = (3 * (128 * 64 + 2 * 8 * 128) + 128 * 64 * 128) * 2
    assert per_state_layer == 2_158_592
    assert nem.kv_bytes(8192, "bf16") == 8192 * 4 * 2 * 8 * 128 * 2 + 24 * per_state_layer == 186_023_936
    assert llama.kv_bytes(8192, "bf16") == 8192 * 131_072 == 2**30
    hw = load_hardware("h100-sxm")
    a, b = kv_capacity(nem, hw, "bf16", 1, 0.9, 16), kv_capacity(llama, hw, "bf16", 1, 0.9, 16)
    assert a.tokens_per_page == 528  # raised until an attention page holds a Mamba-2 state
    assert (a.plan.pages(8192), a.sequences(8192)) == (22, 294)
    assert (b.plan.pages(8192), b.sequences(8192)) == (512, 52)


def test_capacity_of_dense_models_is_unchanged():
    hw = load_hardware("h100-sxm")
    cap = kv_capacity(get_model("llama-3-8b"), hw, "bf16", 1, 0.9, 16)
    got = (cap.num_blocks, cap.bytes_per_block, cap.block_size, cap.tokens)
    assert got == (26_770, 2_097_152, 16, 428_320)
    assert cap.plan.single and cap.page_bytes == cap.bytes_per_block
