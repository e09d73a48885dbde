"""kvsim/calibrate/harness.py: the pool a measurement group shares is sized by the blocks its cases hold."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from kvsim.calibrate.cases import Case  # noqa: E402
from kvsim.calibrate.harness import case_pool_blocks, group_blocks  # noqa: E402


def test_skewed_batch_needs_its_blocks_not_batch_times_longest():
    # 4 sequences, skewed total 100: lengths 48, 24, 16, 12 (Zipf, longest first) -> 3+2+1+1 blocks of 16
    c = Case("paged_decode_triton", "bf16", batch=4, ctx_kind="skewed", ctx_total=100, block_size=16,
             q_heads=4, kv_heads=2, head_dim=16)
    assert sum(c.lens()) == 100
    assert case_pool_blocks(c) == sum(-(-n // 16) for n in c.lens())
    assert case_pool_blocks(c) < 4 * -(-max(c.lens()) // 16)


def test_group_pool_covers_every_case_and_the_floor():
    cases = [Case("paged_decode_triton", "bf16", batch=b, ctx_kind="uniform", ctx_total=b * 64, block_size=16,
                  q_heads=4, kv_heads=2, head_dim=16) for b in (1, 8)]
    per_block = 2 * 16 * 2 * 16 * 2  # K and V, block_size x kv_heads x head_dim, bf16
    n = group_blocks(cases, min_bytes=0)
    assert n == int(1.25 * 32 * per_block // per_block) + 1  # the 8 x 4 blocks of the largest case, x1.25
    assert group_blocks(cases, min_bytes=100 * per_block) == 101


def test_prefill_blocks_per_sequence():
    c = Case("prefill_torch", "bf16", batch=3, block_size=16, q_heads=4, kv_heads=2, head_dim=16, chunk=20,
             prefix=30)
    assert case_pool_blocks(c) == 3 * 4
