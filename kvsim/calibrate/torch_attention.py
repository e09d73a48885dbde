"""Attention in plain torch: paged decode (gather through the block table, then attention with a
per-sequence softmax over the flat token list), the contiguous SDPA decode control, and chunked prefill
over a cached prefix. Cache layout as in kvsim.calibrate.triton_decode."""

from __future__ import annotations

import torch
import torch.nn.functional as F

QUERY_TILE = 128
"""Prefill queries per attention call."""


def paged_decode_torch(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                       block_tables: torch.Tensor, context_lens: list[int], scale: float) -> torch.Tensor:
    """Same computation as the Triton kernel, one sequence at a time: the slots of its first ceil(n / bs)
    table entries (block id x bs + offset, cut to n tokens) gather K and V, then scores, softmax and the
    weighted V sum in fp32 as two batched matmuls over the KV heads (GQA: each KV head serves its
    group of query heads)."""
    batch, q_heads, head_dim = q.shape
    _, bs, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    kf, vf = k_cache.view(-1, kv_heads, head_dim), v_cache.view(-1, kv_heads, head_dim)
    offsets = torch.arange(bs, device=q.device)
    out = torch.empty_like(q)
    for b, n in enumerate(context_lens):
        blocks = block_tables[b, :-(-n // bs)].to(torch.int64)
        slots = (blocks.unsqueeze(1) * bs + offsets).view(-1)[:n]
        k = kf[slots].float().permute(1, 2, 0)  # [kv_heads, head_dim, n]
        v = vf[slots].float().transpose(0, 1)  # [kv_heads, n, head_dim]
        s = torch.matmul(q[b].float().view(kv_heads, group, head_dim), k) * scale
        out[b] = torch.matmul(torch.softmax(s, dim=-1), v).view(q_heads, head_dim)
    return out


def contiguous_decode_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """The no-indirection control: q [batch, q_heads, head_dim], k and v [batch, kv_heads, ctx,
    head_dim] contiguous per sequence, one SDPA call (GQA by head groups)."""
    out = F.scaled_dot_product_attention(q.unsqueeze(2), k, v, scale=scale,
                                         enable_gqa=q.shape[1] != k.shape[1])
    return out.squeeze(2)


def prefill_torch(q: list[torch.Tensor], k_new: list[torch.Tensor], v_new: list[torch.Tensor],
                  k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                  prefix_lens: list[int], scale: float) -> list[torch.Tensor]:
    """Chunked prefill over a cached prefix, per sequence i: write the chunk's K/V [c, kv_heads, d] into
    its cache slots (positions p .. p + c - 1), gather all p + c tokens through the block table, and run
    causal attention of the c queries [c, q_heads, d] (query j sees keys 0 .. p + j). Queries go in tiles
    of QUERY_TILE, each against only the keys it can see, so the work follows the causal pairs."""
    _, bs, kv_heads, head_dim = k_cache.shape
    kf, vf = k_cache.view(-1, kv_heads, head_dim), v_cache.view(-1, kv_heads, head_dim)
    outs = []
    for i, (qi, ki, vi) in enumerate(zip(q, k_new, v_new, strict=True)):
        p, c = prefix_lens[i], qi.shape[0]
        pos = torch.arange(p + c, device=qi.device)
        slots = block_tables[i, pos // bs].to(torch.int64) * bs + pos % bs
        kf[slots[p:]] = ki
        vf[slots[p:]] = vi
        k, v = kf[slots].transpose(0, 1), vf[slots].transpose(0, 1)  # [kv_heads, p + c, d]
        qt = qi.transpose(0, 1)
        out = torch.empty_like(qt)
        for lo in range(0, c, QUERY_TILE):
            hi = min(c, lo + QUERY_TILE)
            mask = torch.ones(hi - lo, p + hi, dtype=torch.bool, device=qi.device).tril(diagonal=p + lo)
            out[:, lo:hi] = F.scaled_dot_product_attention(
                qt[:, lo:hi], k[:, :p + hi], v[:, :p + hi], attn_mask=mask, scale=scale,
                enable_gqa=qi.shape[1] != kv_heads)
        outs.append(out.transpose(0, 1))
    return outs
