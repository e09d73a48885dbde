"""Paged decode attention in Triton: one program per (sequence, KV head) walks the sequence's block table
tile by tile with an online softmax, serving the GROUP query heads that share the KV head (GQA).

Cache layout (vLLM's flash layout): k_cache, v_cache [num_blocks, block_size, kv_heads, head_dim];
block_tables [batch, max_blocks] int32 of physical block ids; context_lens [batch] int32; q and out
[batch, q_heads, head_dim]. Any block size works: a tile of TILE token positions looks up the physical
block of each position (pos // block_size) and its slot (pos % block_size), so block size 1 gathers every
token through the table. fp8 KV (float8_e4m3fn, unit scale) is converted to the query dtype after the load.
With few (sequence, KV head) programs for the GPU's multiprocessors, the context is split (flash-decoding,
as vLLM's paged attention v2 and FlashInfer do): SPLITS programs per (sequence, KV head) each walk one
slice, write their running max, sum and unnormalised output, and a second kernel merges the slices.
Under TRITON_INTERPRET=1 bf16 operands of tl.dot are upcast to fp32: Triton's numpy interpreter computes
bf16 dots wrongly (seen with Triton 3.9); compiled kernels keep the query dtype.
"""

from __future__ import annotations

import functools
import os

import triton
import triton.language as tl


@triton.jit
def _paged_decode_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, out_ptr, m_ptr, l_ptr, acc_ptr, scale,
                         stride_qb, stride_qh, stride_kb, stride_kt, stride_kh, stride_btb,
                         stride_ob, stride_oh,
                         GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                         BLOCK_SIZE: tl.constexpr, TILE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                         SPLITS: tl.constexpr):
    """Program (sequence, KV head, slice): SPLITS == 1 walks the whole context and writes out; otherwise
    it walks slice program_id(2) and writes its running max, sum and unnormalised output (m, l, acc)."""
    seq = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    ctx = tl.load(lens_ptr + seq)
    per = ((ctx + SPLITS - 1) // SPLITS + TILE - 1) // TILE * TILE  # this sequence's slice, whole tiles
    lo = split * per
    hi = tl.minimum(lo + per, ctx)
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
    for start in range(lo, hi, TILE):
        pos = start + t
        valid = pos < hi
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
    if SPLITS == 1:
        out = acc / l_i[:, None]
        tl.store(out_ptr + seq * stride_ob + qh[:, None] * stride_oh + d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=gmask[:, None])
    else:
        row = (seq * tl.num_programs(1) + kvh) * SPLITS + split  # [batch, kv_heads, SPLITS] row-major
        tl.store(m_ptr + row * GROUP_PAD + g, m_i)
        tl.store(l_ptr + row * GROUP_PAD + g, l_i)
        tl.store(acc_ptr + (row * GROUP_PAD + g[:, None]) * HEAD_DIM + d[None, :], acc)


@triton.jit
def _merge_splits_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, stride_ob, stride_oh,
                         GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                         SPLITS: tl.constexpr):
    seq = tl.program_id(0)
    kvh = tl.program_id(1)
    g = tl.arange(0, GROUP_PAD)
    d = tl.arange(0, HEAD_DIM)
    base = (seq * tl.num_programs(1) + kvh) * SPLITS
    m_all = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    for sp in range(SPLITS):
        m_all = tl.maximum(m_all, tl.load(m_ptr + (base + sp) * GROUP_PAD + g))
    l_all = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    for sp in range(SPLITS):
        m_s = tl.load(m_ptr + (base + sp) * GROUP_PAD + g)
        w = tl.where(m_s == float("-inf"), 0.0, tl.exp(m_s - m_all))  # an empty slice weighs nothing
        l_all += w * tl.load(l_ptr + (base + sp) * GROUP_PAD + g)
        acc += w[:, None] * tl.load(acc_ptr + ((base + sp) * GROUP_PAD + g[:, None]) * HEAD_DIM + d[None, :])
    out = acc / l_all[:, None]
    qh = kvh * GROUP + g
    tl.store(out_ptr + seq * stride_ob + qh[:, None] * stride_oh + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=(g < GROUP)[:, None])


SPLIT_MIN_TOKENS = 256
"""Fewest context tokens per slice when the context is split."""


def splits_for(batch: int, kv_heads: int, max_context: int, programs: int) -> int:
    """Slices per (sequence, KV head): enough that batch x kv_heads x slices reaches `programs` (twice the
    GPU's multiprocessors), each slice at least SPLIT_MIN_TOKENS of the longest context; 1 (one kernel, no
    merge) when the batch alone fills the GPU or the context is short."""
    if max_context <= SPLIT_MIN_TOKENS or batch * kv_heads >= programs:
        return 1
    return max(1, min(-(-programs // (batch * kv_heads)), max_context // SPLIT_MIN_TOKENS))


@functools.cache
def _multiprocessors(index: int | None) -> int:
    import torch

    return torch.cuda.get_device_properties(index if index is not None else torch.cuda.current_device()
                                            ).multi_processor_count


def _dot_dtype(dtype):
    import torch

    if dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1":
        return tl.float32
    return {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}[dtype]


def tile_for(block_size: int) -> int:
    """Token positions per loop iteration: a whole block when blocks are 16+ tokens, else 16."""
    return max(16, min(block_size, 64))


def paged_decode_triton(q, k_cache, v_cache, block_tables, context_lens, scale: float, out=None,
                        max_context: int | None = None, splits: int | None = None):
    """Decode attention of one new token per sequence over its paged KV; returns out [batch, q_heads,
    head_dim] in q's dtype. Shapes as in the module docstring; head_dim a power of two >= 16.
    max_context: the longest context (read off context_lens when not given); splits: slices per
    (sequence, KV head), default splits_for() with twice the device's multiprocessors (1 on a CPU)."""
    batch, q_heads, head_dim = q.shape
    _, block_size, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    if out is None:
        out = q.new_empty(q.shape)
    group_pad = max(16, triton.next_power_of_2(group))
    tile = tile_for(block_size)
    dot = _dot_dtype(q.dtype)
    if splits is None:
        if q.device.type != "cuda":
            splits = 1
        else:
            if max_context is None:
                max_context = int(context_lens.max())
            splits = splits_for(batch, kv_heads, max_context, 2 * _multiprocessors(q.device.index))
    m = l_ = acc = out  # (one launch: the slice buffers are not read; nothing allocated per call)
    if splits > 1:
        import torch

        rows = batch * kv_heads * splits * group_pad
        m = torch.empty(rows, dtype=torch.float32, device=q.device)
        l_ = torch.empty(rows, dtype=torch.float32, device=q.device)
        acc = torch.empty(rows * head_dim, dtype=torch.float32, device=q.device)
    _paged_decode_kernel[(batch, kv_heads, splits)](
        q, k_cache, v_cache, block_tables, context_lens, out, m, l_, acc, scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_tables.stride(0), out.stride(0), out.stride(1),
        GROUP=group, GROUP_PAD=group_pad, HEAD_DIM=head_dim, BLOCK_SIZE=block_size, TILE=tile,
        DOT_DTYPE=dot, SPLITS=splits)
    if splits == 1:
        return out
    _merge_splits_kernel[(batch, kv_heads)](
        m, l_, acc, out, out.stride(0), out.stride(1),
        GROUP=group, GROUP_PAD=group_pad, HEAD_DIM=head_dim, SPLITS=splits)
    return out
