"""Block-scaled FP8 (`fp8_block`) linear layers on the kernel model: the per-tensor fp8 GEMM of the same
(m, n, k) from the gemm table, times the ratio of the block-scaled kernel vLLM runs at that m to the
per-tensor one, measured on the shapes both cover where the block-scaled rows time the GPU.

Which kernel vLLM runs. vLLM's Fp8LinearMethod with a 128 x 128 weight block (a DeepSeek-V3 or Qwen3-FP8
checkpoint) picks its GEMM per call (CudaFp8BlockScaledMMKernel, kernels/linear/scaled_mm; AIConfigurator's
collector quotes vLLM 0.24.0's scaled_mm/flashinfer.py:301-315 and utils/deep_gemm.py:700-720):
FlashInferFp8DeepGEMMDynamicBlockScaledKernel where FlashInfer and DeepGEMM both take the shape, which runs
FlashInfer's swap-AB GEMM below 32 tokens and DeepGEMM from 32 on; DeepGEMM alone where FlashInfer is
missing; CUTLASS's block-scaled GEMM (or Triton) where DeepGEMM does not take the shape (n not a multiple of
64 or k not of 128). The gemm tables of Hopper (h100-sxm, h200; AIConfigurator's vLLM 0.24.0 collector,
collector/vllm/collect_gemm.py @ 095f58a) hold exactly that: FlashInfer's rows at m = 1-17 and DeepGEMM's
from m = 32 on the same 419 (n, k), CUTLASS's on 64 other (n, k) (n = 32 or k <= 64, shapes no model
has); Blackwell's hold DeepGEMM at every m (and the same CUTLASS shapes).

Why not those rows as they are. The collector times every dtype's GEMM as a CUDA graph except fp8_block
(`use_cuda_graph=gemm_type != "fp8_block"`, one layer per call), which it times eagerly: each call is
vLLM's Python dispatch plus the activation quantization and the GEMM launched from the host, so a row is
the larger of the host's time and the GPU's. The rows show it: FlashInfer's take 57-65 us at every shape
from n = k = 128 to 4,096 (per-tensor fp8 under graphs: 8-14 us), DeepGEMM's 80-100 us, CUTLASS's
~170 us, flat until the GEMM's own work exceeds that floor, and there they meet the per-tensor fp8 rows
(DeepGEMM at m = 4,096, n = k = 4,096: 147 against 154 us). vLLM serves decode from CUDA graphs (and
prefill through torch.compile's piecewise graphs), where that host time is not paid per GEMM, so read
as they are the rows would charge a decode step of Qwen3-235B-A22B at TP4 ~28 ms of launch time for its
~280 block-scaled GEMMs.

What is used instead (`fp8_block_rows`): for each fp8_block kernel of the table, its host floor is the
5th percentile of its latencies (HOST_FLOOR_QUANTILE), the points where it times the GPU those whose
per-tensor fp8 time is at least GPU_BOUND_FLOOR_MULTIPLE x that floor, and its ratio the median of its
latency over the per-tensor fp8 latency there (h100-sxm: FlashInfer 0.97 on 310 points, DeepGEMM 0.90
on 4,852; h200: 0.99 and 0.98). The fp8_block time at (m, n, k) is the per-tensor fp8 time there times
the ratio of the kernel the table holds at that m for most (n, k) (the kernel vLLM runs at that m on the
shapes models have). The assumption: a block-scaled GEMM under graphs costs what per-tensor fp8 does
times one ratio per kernel, at small m as at large (at small m both read the same FP8 weight bytes; the
block scales add 1 / 16,384 of them). Without per-tensor fp8 rows in the table the fp8_block rows are
used as they are.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

HOST_FLOOR_QUANTILE = 0.05
"""A block-scaled kernel's host floor: this quantile of its eager latencies (every row is at least it)."""
GPU_BOUND_FLOOR_MULTIPLE = 3.0
"""A point times the GPU where the per-tensor fp8 GEMM (graph-timed) takes at least this many floors."""
REFERENCE_DTYPE = "fp8"


class KernelRatio(NamedTuple):
    """One block-scaled kernel: its host floor (s), its ratio to per-tensor fp8 and the points it is the
    median of (0: none, ratio 1)."""

    kernel: str
    floor_s: float
    ratio: float
    points: int


class Fp8BlockRows(NamedTuple):
    """The gemm rows the kernel model times fp8_block GEMMs from (columns m, n, k, latency_s), the ratio
    per kernel, and which kernel applies at each m of the rows."""

    rows: object  # pandas.DataFrame
    ratios: dict[str, KernelRatio]
    kernel_at_m: dict[int, str]

    def describe(self, reference: str) -> str:
        """describe()'s `kernels.linear`: the reference kernel and each block-scaled kernel's ratio and
        m range."""
        spans = []
        for kernel, r in sorted(self.ratios.items()):
            ms = [m for m, k in self.kernel_at_m.items() if k == kernel]
            if ms:
                spans.append(f"{kernel} {r.ratio:.3f} (m {min(ms)}-{max(ms)})")
        return f"{reference} (per-tensor fp8, CUDA graph) x " + ", ".join(spans)


def kernel_ratios(block, reference) -> dict[str, KernelRatio]:
    """Each block-scaled kernel's host floor and its median ratio to the per-tensor fp8 rows of the same
    (m, n, k) where those are at least GPU_BOUND_FLOOR_MULTIPLE floors."""
    ref = reference.groupby(["m", "n", "k"])["latency_s"].min().rename("ref")
    out = {}
    for kernel, rows in block.groupby("kernel", sort=True):
        floor = float(rows["latency_s"].quantile(HOST_FLOOR_QUANTILE))
        both = rows.join(ref, on=["m", "n", "k"], how="inner")
        bound = both[both["ref"] >= GPU_BOUND_FLOOR_MULTIPLE * floor]
        ratio = float(np.median(bound["latency_s"] / bound["ref"])) if len(bound) else 1.0
        out[str(kernel)] = KernelRatio(str(kernel), floor, ratio, len(bound))
    return out


def kernel_at_each_m(block, ms) -> dict[int, str]:
    """The block-scaled kernel the table holds at each m for the most (n, k) (ties: the first name); an m
    the block rows lack takes the kernel of the nearest measured m (in log m)."""
    counts = block.groupby(["m", "kernel"]).size().reset_index(name="count")
    counts = counts.sort_values(["m", "count", "kernel"], ascending=[True, False, True])
    best = counts.drop_duplicates("m")
    measured = best["m"].to_numpy(np.float64)
    names = best["kernel"].astype(str).tolist()
    out = {}
    for m in ms:
        i = int(np.argmin(np.abs(np.log(measured) - np.log(float(m)))))
        out[int(m)] = names[i]
    return out


def fp8_block_rows(gemm) -> Fp8BlockRows | None:
    """The per-tensor fp8 rows of a gemm table scaled to fp8_block (module docstring), or None when the
    table lacks fp8_block or per-tensor fp8 rows."""
    block = gemm[gemm["dtype"] == "fp8_block"]
    reference = gemm[gemm["dtype"] == REFERENCE_DTYPE]
    if not len(block) or not len(reference):
        return None
    ratios = kernel_ratios(block, reference)
    at_m = kernel_at_each_m(block, sorted(reference["m"].unique()))
    factor = reference["m"].map({m: ratios[k].ratio for m, k in at_m.items()}).to_numpy(np.float64)
    rows = reference[["m", "n", "k"]].copy()
    rows["latency_s"] = reference["latency_s"].to_numpy(np.float64) * factor
    return Fp8BlockRows(rows, ratios, at_m)
