"""The roofline's time for each measured row of a kernel table: how far kvsim's datasheet model is from
the real kernels, op by op (the "before" of docs/calibration.md's held-out table).

Per row, with the roofline's default efficiencies (kvsim/cost/roofline.py: HBM at 0.85 of peak, GEMMs at
0.75 x m / (m + 64) of peak FLOP/s, attention FLOPs at 0.5 of peak, all-reduce latency 8 us):

- gemm (m, n, k, dtype; the fastest kernel measured at the shape): max(weight bytes n k x bytes(dtype) / B,
  2 m n k / (F(dtype) x e(m)));
- decode_attention (batch, context, kv_heads, head_dim, kv_dtype): the KV read, batch x context x 2 x
  kv_heads x head_dim x bytes(kv_dtype) / B;
- prefill_attention (batch, tokens, q_heads, head_dim; whole prompts, no prefix): batch x 4 x q_heads x
  head_dim x tokens (tokens + 1) / 2 / (F(bf16) x 0.5);
- allreduce (elements, gpus): a ring, 2 (g - 1) / g x 2 bytes x elements / the profile's all-reduce
  bandwidth at g GPUs, + 8 us.

Rows of sliding windows or prefixes are left out (the roofline's formulas for them differ). The roofline
charges a layer's fixed costs (launches, small kernels) in its per-layer overhead, not per op, so a small
op's row shows the roofline far too fast: `errors` reports all rows and, apart, the rows of 100 us or more."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvsim.cost.roofline import (
    ALLREDUCE_LATENCY_S,
    ATTENTION_EFFICIENCY,
    BANDWIDTH_EFFICIENCY,
    GEMM_EFFICIENCY_M_HALF,
    GEMM_EFFICIENCY_MAX,
)
from kvsim.specs.hardware import HardwareSpec

E_BW, E_MAX, M_HALF, E_ATTN = (BANDWIDTH_EFFICIENCY, GEMM_EFFICIENCY_MAX, GEMM_EFFICIENCY_M_HALF,
                                ATTENTION_EFFICIENCY)
BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5, "w4a16_mxfp4": 0.5}
FLOPS_DTYPE = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "nvfp4", "w4a16_mxfp4": "bf16"}
BIG_S = 1e-4
"""Rows at least this long (100 us) are reported apart: where a per-op formula can be judged."""
FAMILIES = ("decode_attention", "prefill_attention", "gemm", "allreduce")


@dataclass(frozen=True, slots=True)
class RooflineErrors:
    """|roofline / measured - 1| over a table's rows: count, median, p90; and over rows >= BIG_S."""

    rows: int
    median: float
    p90: float
    big_rows: int
    big_median: float
    big_p90: float


def roofline_seconds(df, table: str, hw: HardwareSpec) -> np.ndarray:
    """The roofline's time of each row of `df` (a frame of `table`'s columns), NaN where it has none."""
    bw = hw.hbm_bandwidth * E_BW
    if table == "gemm":
        m, n, k = (df[c].to_numpy(np.float64) for c in ("m", "n", "k"))
        wbytes = df["dtype"].map(BYTES).to_numpy(np.float64)
        peak = np.array([hw.flops(FLOPS_DTYPE.get(d, "bf16")) for d in df["dtype"]])
        return np.maximum(n * k * wbytes / bw, 2 * m * n * k / (peak * E_MAX * m / (m + M_HALF)))
    if table == "decode_attention":
        kv = df["kv_dtype"].map(BYTES).to_numpy(np.float64)
        return (df["batch"].to_numpy(np.float64) * df["context"].to_numpy(np.float64) * 2
                * df["kv_heads"].to_numpy(np.float64) * df["head_dim"].to_numpy(np.float64) * kv / bw)
    if table == "prefill_attention":
        t = df["tokens"].to_numpy(np.float64)
        flops = (df["batch"].to_numpy(np.float64) * 4 * df["q_heads"].to_numpy(np.float64)
                 * df["head_dim"].to_numpy(np.float64) * t * (t + 1) / 2)
        return flops / (hw.flops("bf16") * E_ATTN)
    if table == "allreduce":
        g = df["gpus"].to_numpy(np.float64)
        by_tp = hw.interconnect_bandwidth_by_tp or {}
        link = np.array([by_tp.get(int(x)) or hw.interconnect_bandwidth for x in g])
        return 2 * (g - 1) / g * 2 * df["elements"].to_numpy(np.float64) / link + ALLREDUCE_LATENCY_S
    raise ValueError(f"no roofline formula for table {table!r}")


def errors(tables, table: str, hw: HardwareSpec) -> RooflineErrors | None:
    """The roofline's errors on one table of a KernelTables (None if the device lacks it)."""
    if table not in tables:
        return None
    df = tables[table]
    if "window" in df.columns:
        df = df[df["window"] == 0]
    if "prefix" in df.columns:
        df = df[df["prefix"] == 0]
    if table == "gemm":  # the fastest kernel at each shape, as the kernel model reads it
        df = df[df["dtype"].isin(list(BYTES))]
        df = df.groupby(["dtype", "m", "n", "k"], as_index=False)["latency_s"].min()
    measured = df["latency_s"].to_numpy(np.float64)
    err = np.abs(roofline_seconds(df, table, hw) / measured - 1)
    big = err[measured >= BIG_S]

    def q(x: np.ndarray, p: float) -> float:
        return float(np.quantile(x, p)) if len(x) else float("nan")

    return RooflineErrors(len(err), q(err, 0.5), q(err, 0.9), len(big), q(big, 0.5), q(big, 0.9))
