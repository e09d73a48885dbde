"""kvsim/cost/kernel_fp8_block.py: fp8_block GEMMs timed as the per-tensor fp8 GEMM x the measured ratio of
the block-scaled kernel at each m (ratios, host floors, kernel per m, the scaled rows by hand), and
KernelCost reading them for a model with fp8_block weights."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from kvsim.cost.kernel_fp8_block import fp8_block_rows
from kvsim.cost.kernels import KernelCost
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware
from kvsim.specs.kernel_tables import KernelTables, load_kernel_tables

US = 1e-6
S1, S2 = (512, 512), (8192, 8192)
FP8 = {(1, *S1): 10, (2, *S1): 10, (1, *S2): 200, (2, *S2): 210,
       (16, *S1): 13, (32, *S1): 12, (64, *S1): 14, (32, *S2): 400, (64, *S2): 800}
"""Per-tensor fp8 (graph-timed) in us at (m, n, k)."""
BLOCK = {("FI", 1, *S1): 50, ("FI", 2, *S1): 50, ("FI", 1, *S2): 180, ("FI", 2, *S2): 189,
         ("DG", 32, *S1): 80, ("DG", 64, *S1): 80, ("DG", 32, *S2): 320, ("DG", 64, *S2): 640}
"""Eager block-scaled rows in us: FI = max(50 us host floor, 0.9 x fp8) at m 1-2, DG = max(80, 0.8 x fp8)
at m 32-64."""


def _gemm() -> pd.DataFrame:
    rows = [{"kernel": "C", "dtype": "fp8", "m": m, "n": n, "k": k, "latency_s": t * US}
            for (m, n, k), t in FP8.items()]
    rows += [{"kernel": kern, "dtype": "fp8_block", "m": m, "n": n, "k": k, "latency_s": t * US}
             for (kern, m, n, k), t in BLOCK.items()]
    return pd.DataFrame(rows)


def test_ratios_floors_and_kernel_per_m_by_hand():
    """FI's latencies 50, 50, 180, 189: 5th percentile 50 us (between the two 50s); GPU-bound where fp8 >=
    3 x 50 = 150 us: (1, S2) 180 / 200 = 0.9 and (2, S2) 189 / 210 = 0.9 -> 0.9 on 2 points. DG: floor 80,
    bound where fp8 >= 240: 320 / 400 = 640 / 800 = 0.8. m = 16 (fp8 only) is nearest m = 32 in log m
    (log 2 = 0.69 against log 8 = 2.08): DG."""
    r = fp8_block_rows(_gemm())
    assert r.ratios["FI"].floor_s == pytest.approx(50 * US)
    assert r.ratios["DG"].floor_s == pytest.approx(80 * US)
    assert (r.ratios["FI"].ratio, r.ratios["FI"].points) == (pytest.approx(0.9), 2)
    assert (r.ratios["DG"].ratio, r.ratios["DG"].points) == (pytest.approx(0.8), 2)
    assert r.kernel_at_m == {1: "FI", 2: "FI", 16: "DG", 32: "DG", 64: "DG"}
    got = {(int(m), int(n), int(k)): t / US for m, n, k, t in r.rows.itertuples(index=False)}
    # the eager 50 us at (1, S1) becomes 0.9 x 10 = 9 us; (16, S1) 0.8 x 13 = 10.4 us; (64, S2) 640 us
    assert got[(1, *S1)] == pytest.approx(9.0) and got[(16, *S1)] == pytest.approx(10.4)
    assert got[(64, *S2)] == pytest.approx(640.0) and len(got) == len(FP8)
    assert r.describe("C") == "C (per-tensor fp8, CUDA graph) x DG 0.800 (m 16-64), FI 0.900 (m 1-2)"


def test_without_per_tensor_rows_there_is_nothing_to_scale():
    df = _gemm()
    assert fp8_block_rows(df[df["dtype"] == "fp8_block"]) is None
    assert fp8_block_rows(df[df["dtype"] == "fp8"]) is None


MODEL = dataclasses.replace(get_model("llama-3.1-8b"), weight_dtype="fp8_block")
GEMMS = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (64128, 4096)]  # qkv o gate_up down lm/2


def _fp8_s(m, n, k):
    return 1e-6 + 2 * m * n * k / 500e12


def test_kernel_cost_times_fp8_block_linear_layers_from_the_scaled_rows():
    """Block rows FI at m = 1 (max(50 us, 0.9 x fp8)) and DG at m = 1,024 (max(80 us, 0.8 x fp8)). No m = 1
    fp8 GEMM reaches 3 floors (the largest, 65,536 x 14,336, is 1 + 3.76 = 4.8 us), so FI's ratio is 1 on
    0 points; at m = 1,024 the GPU-bound rows are all 0.8 x fp8. The linear layers at 1,024 tokens and
    1 sequence: 32 layers x 0.8 x (qkv + o + gate_up + down at m = 1,024) + the lm_head as two 64,128-column
    GEMMs at m = 1 x 1.0."""
    ns = sorted({n for n, _ in GEMMS} | {65536})
    ks = sorted({k for _, k in GEMMS})
    rows = [{"kernel": "C", "dtype": "fp8", "m": m, "n": n, "k": k, "latency_s": _fp8_s(m, n, k)}
            for m in (1, 1024) for n in ns for k in ks]
    rows += [{"kernel": "FI", "dtype": "fp8_block", "m": 1, "n": n, "k": k,
              "latency_s": max(50e-6, 0.9 * _fp8_s(1, n, k))} for n in ns for k in ks]
    rows += [{"kernel": "DG", "dtype": "fp8_block", "m": 1024, "n": n, "k": k,
              "latency_s": max(80e-6, 0.8 * _fp8_s(1024, n, k))} for n in ns for k in ks]
    tables = KernelTables("test", {"gemm": pd.DataFrame(rows)}, {"project": "test", "commit": "0" * 40})
    c = KernelCost(MODEL, load_hardware("h200"), 1, "auto", 1.0, tables)
    per_layer = sum(_fp8_s(1024, n, k) for n, k in GEMMS[:4])
    lm_head = 2 * _fp8_s(1, 64128, 4096)
    assert c.linear_kernel_time(1024, 1) == pytest.approx(32 * 0.8 * per_layer + lm_head, rel=1e-9)
    assert c.describe()["kernels"]["linear"] == "C (per-tensor fp8, CUDA graph) x DG 0.800 (m 1024-1024), " \
                                                "FI 1.000 (m 1-1)"


def test_the_shipped_h100_tables():
    """h100-sxm: FlashInfer below 32 tokens, DeepGEMM from 32 (vLLM's dynamic block-scaled kernel), each a
    little faster than per-tensor fp8 where it times the GPU."""
    r = fp8_block_rows(load_kernel_tables("h100-sxm")["gemm"])
    flashinfer = {m for m, k in r.kernel_at_m.items() if k == "FlashInferFp8BlockScaledMMKernel"}
    assert flashinfer == set(range(1, 18))
    assert min(m for m, k in r.kernel_at_m.items() if k == "DeepGemmFp8BlockScaledMMKernel") == 32
    assert 0.85 < r.ratios["DeepGemmFp8BlockScaledMMKernel"].ratio < 1.0
    assert 0.9 < r.ratios["FlashInferFp8BlockScaledMMKernel"].ratio < 1.05
