"""Fit the parametric models (kvsim.calibrate.features) to measurements: non-negative least squares on
relative error, k-fold held-out MAPE and worst error per kernel and dtype, and a quality gate."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from kvsim.calibrate.cases import FAMILY
from kvsim.calibrate.features import PARAMS, derived, feature_matrix

FOLDS = 5
MAPE_CEILING = 0.35
"""No held-out MAPE of a kernel that times a cost-model term (fit.terms) may exceed this, whatever its gate:
above it the fit is not a model. A fallback kernel that another one outranks is reported, not gated."""

TERM_KERNELS = {
    "decode_attention": ("paged_decode_triton", "paged_decode_torch"),
    "prefill_attention": ("prefill_torch",),
    "linear": ("gemm_torch",),
    "cow_copy": ("copy_d2d",),
    "swap_out": ("copy_d2h",),
    "swap_in": ("copy_h2d",),
}
"""Which kernel times each cost-model term, in order of preference (the first one fitted wins)."""


def nnls_relative(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin over beta >= 0 of sum(((x @ beta - y) / y)^2): rows scaled by 1 / y, columns by their norm
    for conditioning (a column of zeros gets coefficient 0)."""
    a = x / y[:, None]
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0] = 1.0
    beta, _ = nnls(a / norms, np.ones(len(y)), maxiter=50 * x.shape[1])
    return beta / norms


def fold_ids(n: int, k: int = FOLDS, seed: int = 0) -> np.ndarray:
    """Fold of each row: a seeded permutation dealt round-robin into k folds."""
    ids = np.empty(n, dtype=int)
    ids[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    return ids


def heldout_errors(x: np.ndarray, y: np.ndarray, k: int = FOLDS) -> np.ndarray:
    """|predicted - measured| / measured for every row, predicted by a fit on the other folds."""
    folds = fold_ids(len(y), k)
    err = np.empty(len(y))
    for f in range(k):
        test = folds == f
        beta = nnls_relative(x[~test], y[~test])
        err[test] = np.abs(x[test] @ beta - y[test]) / y[test]
    return err


def mape_gate(heldout_mape: float) -> float:
    """The bound a refit must stay under, set from the data: 1.5 x the held-out MAPE (at least 3 points
    more), rounded up to 0.05."""
    return math.ceil(max(1.5 * heldout_mape, heldout_mape + 0.03) / 0.05 - 1e-9) * 0.05


def fit_group(df: pd.DataFrame, peak_flops: float | None = None, k: int = FOLDS) -> dict[str, Any]:
    """Fit one kernel at one dtype. Needs at least k rows and more rows than parameters."""
    kernel, dtype = df["kernel"].iloc[0], df["dtype"].iloc[0]
    family = FAMILY[kernel]
    x = feature_matrix(df)
    y = df["median_s"].to_numpy(dtype=float)
    beta = nnls_relative(x, y)
    train = np.abs(x @ beta - y) / y
    held = heldout_errors(x, y, k)
    params = {name: _sig(b) for name, b in zip(PARAMS[family], beta, strict=True)}
    mape = float(held.mean())
    return {
        "model": family, "params": params,
        "derived": {key: _sig(v) for key, v in derived(family, params, dtype, peak_flops).items()},
        "rows": int(len(y)), "train_mape": _sig(train.mean()), "heldout_mape": _sig(mape),
        "heldout_worst": _sig(held.max()), "mape_gate": round(mape_gate(mape), 2),
    }


def fit_all(df: pd.DataFrame, peak_flops: dict[str, float] | None = None,
            k: int = FOLDS) -> dict[str, dict[str, dict[str, Any]]]:
    """kernel -> dtype -> fit, for every (kernel, dtype) with enough rows."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (kernel, dtype), g in df.groupby(["kernel", "dtype"], sort=True):
        if kernel not in FAMILY or len(g) < max(k, len(PARAMS[FAMILY[kernel]]) + 1):
            continue
        peak = (peak_flops or {}).get(dtype)
        out.setdefault(kernel, {})[dtype] = fit_group(g.reset_index(drop=True), peak, k)
    return out


def terms(kernels: dict[str, Any]) -> dict[str, str]:
    """term -> the kernel that times it, among those fitted."""
    return {term: next(k for k in cands if k in kernels)
            for term, cands in TERM_KERNELS.items() if any(k in kernels for k in cands)}


def paged_overhead(df: pd.DataFrame) -> dict[str, dict[str, dict[int, float]]]:
    """Median over matched uniform decode points (same dtype, head layout, batch, context) of paged time
    / contiguous SDPA time, per paged kernel, dtype and block size."""
    keys = ["dtype", "q_heads", "kv_heads", "head_dim", "batch", "ctx_total"]
    uni = df[df["ctx_kind"] == "uniform"]
    ctrl = uni[uni["kernel"] == "contiguous_decode_sdpa"].set_index(keys)["median_s"]
    out: dict[str, dict[str, dict[int, float]]] = {}
    for kernel in ("paged_decode_triton", "paged_decode_torch"):
        paged = uni[uni["kernel"] == kernel]
        for (dtype, bs), g in paged.groupby(["dtype", "block_size"]):
            joined = g.set_index(keys)["median_s"] / ctrl
            joined = joined.dropna()
            if len(joined):
                out.setdefault(kernel, {}).setdefault(str(dtype), {})[int(bs)] = round(
                    float(joined.median()), 3)
    return out


def _sig(v: float, digits: int = 6) -> float:
    return float(f"{float(v):.{digits}g}")
