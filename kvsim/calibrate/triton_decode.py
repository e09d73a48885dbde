"""Paged decode attention in Triton: one program per (sequence, KV head) walks the sequence's block table
tile by tile with an online softmax, serving the GROUP query heads that share the KV head (GQA).

Cache layout (vLLM's flash layout): k_cache, v_cache [num_blocks, block_size, kv_heads, head_dim];
block_tables [batch, max_blocks] int32 of physical block ids; context_lens [batch] int32; q and out
[batch, q_heads, head_dim]. Any block size works: a tile of TILE token positions looks up the physical
block of each position (pos // block_size) and its slot (pos % block_size), so block size 1 gathers every
token through the table. fp8 KV (float8_e4m3fn, unit scale) is converted to the query dtype after the load.
Under TRITON_INTERPRET=1 bf16 operands of tl.dot are upcast to fp32: Triton's numpy interpreter computes
bf16 dots wrongly (seen with Triton 3.9); compiled kernels keep the query dtype.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl


@triton.jit
def _paged_decode_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, out_ptr, scale,
                         stride_qb, stride_qh, stride_kb, stride_kt, stride_kh, stride_btb,
                         stride_ob, stride_oh,
                         GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                         BLOCK_SIZE: tl.constexpr, TILE: tl.constexpr, DOT_DTYPE: tl.constexpr):
    seq = tl.program_id(0)
    kvh = tl.program_id(1)
    ctx = tl.load(lens_ptr + seq)
    g = tl.arange(0, GROUP_PAD)
    d = tl.arange(0, HEAD_DIM)
    gmask = g < GROUP
    qh = kvh * GROUP + g
    q = tl.load(q_ptr + seq * stride_qb + qh[:, None] * stride_qh + d[None, :], mask=gmask[:, None],
                other=0.0).to(DOT_DTYPE)
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    t = tl.arange(0, TILE)
    for start in range(0, ctx, TILE):
        pos = start + t
        valid = pos < ctx
        blk = tl.load(bt_ptr + seq * stride_btb + pos // BLOCK_SIZE, mask=valid, other=0)
        off = blk.to(tl.int64) * stride_kb + (pos % BLOCK_SIZE) * stride_kt + kvh * stride_kh
        k = tl.load(k_ptr + off[:, None] + d[None, :], mask=valid[:, None], other=0.0).to(q.dtype)
        v = tl.load(v_ptr + off[:, None] + d[None, :], mask=valid[:, None], other=0.0).to(q.dtype)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(q.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + seq * stride_ob + qh[:, None] * stride_oh + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=gmask[:, None])


def _dot_dtype(dtype):
    import torch

    if dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1":
        return tl.float32
    return {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}[dtype]


def tile_for(block_size: int) -> int:
    """Token positions per loop iteration: a whole block when blocks are 16+ tokens, else 16."""
    return max(16, min(block_size, 64))


def paged_decode_triton(q, k_cache, v_cache, block_tables, context_lens, scale: float, out=None):
    """Decode attention of one new token per sequence over its paged KV; returns out [batch, q_heads,
    head_dim] in q's dtype. Shapes as in the module docstring; head_dim a power of two >= 16."""
    batch, q_heads, head_dim = q.shape
    _, block_size, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    if out is None:
        out = q.new_empty(q.shape)
    _paged_decode_kernel[(batch, kv_heads)](
        q, k_cache, v_cache, block_tables, context_lens, out, scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_tables.stride(0), out.stride(0), out.stride(1),
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), HEAD_DIM=head_dim,
        BLOCK_SIZE=block_size, TILE=tile_for(block_size), DOT_DTYPE=_dot_dtype(q.dtype))
    return out
