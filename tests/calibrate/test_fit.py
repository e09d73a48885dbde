"""The fit on synthetic measurements with known coefficients, the folds, the gate and the paged overhead."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kvsim.calibrate.cases import Case
from kvsim.calibrate.features import feature_row
from kvsim.calibrate.fit import fit_all, fold_ids, mape_gate, nnls_relative, paged_overhead, terms


def test_nnls_relative_recovers_exact_coefficients():
    x = np.array([[1, 1], [1, 10], [1, 100], [1, 1000]], dtype=float)
    beta = np.array([2e-5, 3e-9])
    np.testing.assert_allclose(nnls_relative(x, x @ beta), beta, rtol=1e-9)


def test_nnls_relative_keeps_coefficients_non_negative():
    x = np.array([[1, 1], [1, 2], [1, 3]], dtype=float)
    y = np.array([3.0, 2.0, 1.0])  # falling with the feature: its coefficient is held at 0
    beta = nnls_relative(x, y)
    assert beta[1] == 0 and beta[0] > 0


def test_folds_are_balanced_and_seeded():
    f = fold_ids(12, 5)
    assert sorted(np.bincount(f)) == [2, 2, 2, 3, 3]
    np.testing.assert_array_equal(f, fold_ids(12, 5))


def test_gate_is_one_and_a_half_times_mape_rounded_up():
    assert mape_gate(0.04) == pytest.approx(0.10)  # max(0.06, 0.07) -> 0.10
    assert mape_gate(0.12) == pytest.approx(0.20)  # 0.18 -> 0.20
    assert mape_gate(0.0) == pytest.approx(0.05)


def synthetic_copies(per_byte=1e-10, fixed=5e-6):
    rows = []
    for kernel in ("copy_d2d", "copy_d2h"):
        for nb in (1, 2, 4, 8, 16, 32, 64):
            c = Case(kernel, "bf16", blocks=nb, block_bytes=4096, block_size=16)
            t = fixed + per_byte * nb * 4096
            rows.append(dict(c.as_row(), median_s=t))
    return pd.DataFrame(rows)


def test_fit_all_reads_bandwidth_off_the_coefficients():
    fits = fit_all(synthetic_copies())
    f = fits["copy_d2d"]["bf16"]
    assert f["params"]["per_byte_s"] == pytest.approx(1e-10, rel=1e-6)
    assert f["derived"]["bandwidth"] == pytest.approx(1e10, rel=1e-6)
    assert f["heldout_mape"] < 1e-6 and f["rows"] == 7
    assert terms(fits) == {"cow_copy": "copy_d2d", "swap_out": "copy_d2h"}


def test_decode_features_by_hand():
    c = Case("paged_decode_triton", "fp16", batch=2, ctx_kind="uniform", ctx_total=40, block_size=16,
             q_heads=4, kv_heads=2, head_dim=16)
    # seqs x kv heads, blocks (2 x 2) x kv heads, K+V bytes, 4 x pairs x q heads x head dim
    assert feature_row(c) == [1.0, 4, 8, 2 * 40 * 2 * 16 * 2, 4 * 40 * 4 * 16]


def test_paged_overhead_is_the_median_ratio_at_matched_points():
    base = dict(dtype="bf16", q_heads=4, kv_heads=2, head_dim=16, ctx_kind="uniform")
    rows = [dict(base, kernel="contiguous_decode_sdpa", block_size=0, batch=1, ctx_total=64, median_s=1.0),
            dict(base, kernel="contiguous_decode_sdpa", block_size=0, batch=2, ctx_total=64, median_s=2.0),
            dict(base, kernel="paged_decode_torch", block_size=16, batch=1, ctx_total=64, median_s=1.5),
            dict(base, kernel="paged_decode_torch", block_size=16, batch=2, ctx_total=64, median_s=5.0)]
    assert paged_overhead(pd.DataFrame(rows)) == {"paged_decode_torch": {"bf16": {16: 2.0}}}
