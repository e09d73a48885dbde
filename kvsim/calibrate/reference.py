"""Float64 references in numpy, written as plainly as possible, that the kernels are tested against."""

from __future__ import annotations

import numpy as np


def paged_decode_reference(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                           block_tables: np.ndarray, context_lens: list[int], scale: float) -> np.ndarray:
    """q [batch, q_heads, d]; caches [num_blocks, block_size, kv_heads, d]. Query head h reads KV head
    h // (q_heads / kv_heads); sequence b attends to its first context_lens[b] tokens."""
    batch, q_heads, d = q.shape
    _, bs, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    out = np.zeros((batch, q_heads, d))
    for b in range(batch):
        n = context_lens[b]
        blocks = block_tables[b, :(n + bs - 1) // bs]
        k = k_cache[blocks].reshape(-1, kv_heads, d)[:n].astype(np.float64)
        v = v_cache[blocks].reshape(-1, kv_heads, d)[:n].astype(np.float64)
        for h in range(q_heads):
            s = k[:, h // group] @ q[b, h].astype(np.float64) * scale
            w = np.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ v[:, h // group]
    return out


def prefill_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, prefix: int, scale: float) -> np.ndarray:
    """Causal attention of c queries [c, q_heads, d] over p + c keys [p + c, kv_heads, d]: query j
    sees keys 0 .. p + j."""
    c, q_heads, d = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    out = np.zeros((c, q_heads, d))
    for j in range(c):
        for h in range(q_heads):
            kk = k[:prefix + j + 1, h // group].astype(np.float64)
            s = kk @ q[j, h].astype(np.float64) * scale
            w = np.exp(s - s.max())
            out[j, h] = (w / w.sum()) @ v[:prefix + j + 1, h // group].astype(np.float64)
    return out
