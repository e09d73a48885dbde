"""The parametric, physical models fitted to each kernel family: time = sum of coefficient x feature,
every coefficient >= 0 and in physical units (seconds per launch, per byte, per FLOP ...).

- decode (per layer): fixed + per_seq_head x batch x kv_heads + per_block_head x blocks read x kv_heads
  + per_kv_byte x K/V bytes read + per_flop x 4 x context x q_heads x head_dim.
- prefill (per layer): fixed + per_seq x sequences + per_token_head x new tokens x q_heads
  + per_flop x attention FLOPs (4 x q_heads x head_dim x (query, key) pairs, causal).
- gemm (per call): fixed + per_weight_byte x n x k x dtype bytes + per_flop x 2 m n k; so the achieved
  FLOP/s at m tokens is e_max x peak x m / (m + m_half): efficiency rises with m.
- copy (per call): fixed + per_byte x bytes (blocks of one size: a per-block term could not be told apart).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kvsim.calibrate.cases import DTYPE_BYTES, FAMILY, Case

PARAMS = {
    "decode": ("fixed_s", "per_seq_head_s", "per_block_head_s", "per_kv_byte_s", "per_flop_s"),
    "prefill": ("fixed_s", "per_seq_s", "per_token_head_s", "per_flop_s"),
    "gemm": ("fixed_s", "per_weight_byte_s", "per_flop_s"),
    "copy": ("fixed_s", "per_byte_s"),
}


def feature_row(c: Case) -> list[float]:
    """The features of one case, in the order of PARAMS[family]."""
    fam = FAMILY[c.kernel]
    if fam == "decode":
        return [1.0, c.batch * c.kv_heads, c.blocks_read() * c.kv_heads, c.kv_bytes(), c.attn_flops()]
    if fam == "prefill":
        return [1.0, c.batch, c.batch * c.chunk * c.q_heads, c.attn_flops()]
    if fam == "gemm":
        return [1.0, c.n * c.k * DTYPE_BYTES[c.dtype], 2.0 * c.m * c.n * c.k]
    return [1.0, c.blocks * c.block_bytes]


def feature_matrix(df: pd.DataFrame) -> np.ndarray:
    """Features of every row of a measurements frame (all rows of one family)."""
    return np.array([feature_row(Case.from_row(r)) for r in df.to_dict("records")], dtype=float)


def derived(family: str, params: dict[str, float], dtype: str, peak_flops: float | None) -> dict[str, float]:
    """Physical figures read off the coefficients: effective bandwidths and FLOP/s; for GEMMs the
    efficiency ceiling e_max (achieved / peak FLOP/s) and m_half (tokens at which the weight-read and
    the compute terms are equal)."""
    out: dict[str, float] = {}

    def inv(key: str) -> float | None:
        return 1.0 / params[key] if params.get(key, 0.0) > 0 else None

    if family == "decode":
        out["effective_bandwidth"] = inv("per_kv_byte_s")
        out["effective_flops"] = inv("per_flop_s")
    elif family == "prefill":
        out["effective_flops"] = inv("per_flop_s")
    elif family == "gemm":
        out["weight_bandwidth"] = inv("per_weight_byte_s")
        out["effective_flops"] = inv("per_flop_s")
        if peak_flops and out["effective_flops"]:
            out["e_max"] = out["effective_flops"] / peak_flops
            out["m_half"] = params["per_weight_byte_s"] * DTYPE_BYTES[dtype] / (2 * params["per_flop_s"])
    else:
        out["bandwidth"] = inv("per_byte_s")
    return {k: v for k, v in out.items() if v is not None}
