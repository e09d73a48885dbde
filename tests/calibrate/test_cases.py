"""Case quantities by hand: context splits, blocks read, KV bytes, attention pairs and FLOPs."""

from __future__ import annotations

import pytest

from kvsim.calibrate.cases import Case, context_lens


def test_uniform_split_keeps_the_total():
    assert context_lens("uniform", 3, 10) == [4, 3, 3]


def test_skewed_split_is_zipf_with_the_same_total():
    # weights 1, 1/2, 1/3, 1/4 (sum 25/12); (100 - 4) / (25/12) = 46.08 -> 1 + [46, 23, 15, 11] = 99, +1
    assert context_lens("skewed", 4, 100) == [48, 24, 16, 12]
    assert sum(context_lens("skewed", 64, 65536)) == 65536


def test_context_split_errors():
    with pytest.raises(ValueError):
        context_lens("uniform", 4, 3)
    with pytest.raises(ValueError):
        context_lens("zigzag", 1, 3)


def test_decode_case_blocks_bytes_flops():
    c = Case("paged_decode_torch", "bf16", batch=2, ctx_kind="uniform", ctx_total=34, block_size=16,
             q_heads=8, kv_heads=2, head_dim=64)
    assert c.lens() == [17, 17]
    assert c.blocks_read() == 4  # 17 tokens -> 2 blocks each (the last one partial)
    assert c.kv_bytes() == 2 * 34 * 2 * 64 * 2
    assert c.attn_flops() == 4 * 34 * 8 * 64
    assert c.group == 4


def test_prefill_pairs_are_causal_over_the_prefix():
    c = Case("prefill_torch", "bf16", batch=2, chunk=4, prefix=10, q_heads=2, kv_heads=1, head_dim=8)
    assert c.attn_pairs() == 2 * (4 * 10 + 10)
    assert c.max_tokens() == 14


def test_row_round_trip():
    c = Case("gemm_torch", "bf16", shape="qkv", m=4, n=12, k=8)
    row = dict(c.as_row(), median_s=1.0, batch=float("nan"))
    assert Case.from_row(row) == c
