"""kvsim/cost/roofline_ops.py: the roofline's time of a kernel-table row by hand, and its H200 errors as
docs/calibration.md reports them."""

from __future__ import annotations

import pandas as pd
import pytest

from kvsim.cost.roofline_ops import errors, roofline_seconds
from kvsim.specs.hardware import load_hardware
from kvsim.specs.kernel_tables import load_kernel_tables

H200 = load_hardware("h200")  # 4.8 TB/s, bf16 989 TFLOPS (fp8 1979)


def test_each_family_by_hand():
    bw = 4.8e12 * 0.85
    gemm = pd.DataFrame({"m": [1, 4096], "n": [4096, 4096], "k": [4096, 4096], "dtype": ["bfloat16", "fp8"]})
    t = roofline_seconds(gemm, "gemm", H200)
    assert t[0] == pytest.approx(4096 * 4096 * 2 / bw)  # one token: the weight read
    eff = 0.75 * 4096 / (4096 + 64)
    assert t[1] == pytest.approx(2 * 4096**3 / (H200.flops("fp8") * eff))  # compute-bound
    dec = pd.DataFrame({"batch": [8], "context": [1024], "kv_heads": [8], "head_dim": [128],
                        "kv_dtype": ["bfloat16"]})
    kv_bytes = 8 * 1024 * 2 * 8 * 128 * 2
    assert roofline_seconds(dec, "decode_attention", H200)[0] == pytest.approx(kv_bytes / bw)
    pre = pd.DataFrame({"batch": [2], "tokens": [512], "q_heads": [32], "head_dim": [128]})
    assert roofline_seconds(pre, "prefill_attention", H200)[0] == pytest.approx(
        2 * 4 * 32 * 128 * 512 * 513 / 2 / (H200.flops("bf16") * 0.5))
    ar = pd.DataFrame({"gpus": [4], "elements": [1_000_000]})
    assert roofline_seconds(ar, "allreduce", H200)[0] == pytest.approx(2 * 3 / 4 * 2e6 / 450e9 + 8e-6)


def test_h200_errors_are_the_documented_ones():
    tables = load_kernel_tables("h200", lazy=True)
    got = {t: errors(tables, t, H200) for t in ("decode_attention", "prefill_attention", "gemm", "allreduce")}
    rounded = {t: (e.rows, round(e.median, 3), e.big_rows, round(e.big_median, 3)) for t, e in got.items()}
    assert rounded == {"decode_attention": (33058, 0.957, 5270, 0.518),
                       "prefill_attention": (26894, 0.771, 13678, 0.282),
                       "gemm": (107225, 0.746, 31873, 0.311),
                       "allreduce": (138, 0.485, 38, 0.282)}
