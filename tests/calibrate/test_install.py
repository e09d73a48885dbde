"""kvsim/calibrate/install.py: when a new fit counts as worse than the stored one."""

from __future__ import annotations

from kvsim.calibrate.install import worse_than


def cal(grid: str, **mapes: float) -> dict:
    kernels: dict = {}
    for key, mape in mapes.items():
        kernel, dtype = key.rsplit("_", 1)
        kernels.setdefault(kernel, {})[dtype] = {"heldout_mape": mape}
    return {"provenance": {"grid": grid}, "kernels": kernels}


def test_nothing_stored_means_nothing_is_worse():
    assert worse_than(cal("smoke", gemm_bf16=0.3), None) == []
    assert worse_than(cal("smoke", gemm_bf16=0.3), {"kernels": None}) == []


def test_mape_within_1_25x_plus_0_01_is_not_worse():
    stored = cal("gpu", gemm_bf16=0.10)
    assert worse_than(cal("gpu", gemm_bf16=0.135), stored) == []  # 1.25 * 0.10 + 0.01 = 0.135
    assert worse_than(cal("gpu", gemm_bf16=0.136), stored) == [
        "gemm/bf16 held-out MAPE 0.136 vs stored 0.100"]


def test_a_missing_kernel_and_a_smoke_grid_are_worse():
    stored = cal("gpu", gemm_bf16=0.1, decode_fp16=0.1)
    assert worse_than(cal("gpu", gemm_bf16=0.1), stored) == ["it has no fit for decode/fp16"]
    assert worse_than(cal("smoke", gemm_bf16=0.1, decode_fp16=0.1), stored) == [
        "it comes from the smoke grid, the stored one from 'gpu'"]
    assert worse_than(cal("smoke", gemm_bf16=0.1), cal("smoke", gemm_bf16=0.1)) == []
