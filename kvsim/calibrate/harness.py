"""Run a grid of Cases on one device within a time budget and return one row per timed case."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from kvsim.calibrate.cases import DTYPE_BYTES, Case
from kvsim.calibrate.provenance import triton_version
from kvsim.calibrate.runners import TIMED, Pools, pool_blocks, prepare
from kvsim.calibrate.timing import Timer

BUDGET_WEIGHT = {"paged_decode_triton": 3.0, "paged_decode_torch": 2.0, "prefill_torch": 1.5}
"""Share of the time budget per case, relative to 1 for the other kernels."""


@dataclass(slots=True)
class HarnessConfig:
    """min_pool_bytes: smallest KV / copy pool (much larger than the caches); budget_s: wall-clock limit
    for the whole grid, split across kernels in proportion to their cases x BUDGET_WEIGHT."""

    device: torch.device
    timer: Timer
    budget_s: float
    min_pool_bytes: float
    seed: int = 0


def pool_key(c: Case) -> tuple:
    if c.kernel in ("paged_decode_triton", "paged_decode_torch", "prefill_torch"):
        return ("kv", c.dtype, c.kv_heads, c.head_dim, c.block_size)
    if c.family == "copy":
        return ("copy", c.block_bytes)
    return ()


def group_blocks(group: list[Case], min_bytes: float) -> int:
    """Pool blocks for a group of cases sharing one pool."""
    c0 = group[0]
    if c0.family == "copy":
        return max(int(min_bytes // c0.block_bytes), 5 * max(c.blocks for c in group))
    if not pool_key(c0):
        return 0
    biggest = max(2.0 * case_pool_blocks(c) * c.block_size * c.kv_heads * c.head_dim * DTYPE_BYTES[c.dtype]
                  for c in group)
    return pool_blocks(c0, min_bytes, biggest)


def case_pool_blocks(c: Case) -> int:
    """Pool blocks one case's block tables hold: each sequence's own blocks, summed over the batch (not
    batch x the longest sequence, which for a skewed batch of 256 is ~40x the total)."""
    if c.family == "prefill":
        return c.batch * -(-(c.prefix + c.chunk) // c.block_size)
    return c.blocks_read()


def measure(cases: list[Case], cfg: HarnessConfig, log: Callable[[str], None] = print) -> list[dict]:
    """Time every case the budget allows. Per kernel, cases run grouped by pool and, within a group, in a
    seeded random order, so a budget cut still leaves points across the whole grid. Rows come back in
    grid order; a case that runs out of memory is skipped with a note."""
    order = {c: i for i, c in enumerate(cases)}
    kernels = list(dict.fromkeys(c.kernel for c in cases))
    weight = {k: BUDGET_WEIGHT.get(k, 1.0) * sum(c.kernel == k for c in cases) for k in kernels}
    total_w = sum(weight.values()) or 1.0
    rng = np.random.default_rng(cfg.seed)
    pools = Pools(cfg.device, cfg.seed)
    versions = {"torch": torch.__version__, "triton": triton_version()}
    rows: list[tuple[int, dict]] = []
    t_start = time.perf_counter()
    spent_w = 0.0
    for kernel in kernels:
        spent_w += weight[kernel]
        deadline = t_start + cfg.budget_s * spent_w / total_w
        groups: dict[tuple, list[Case]] = {}
        for c in cases:
            if c.kernel == kernel:
                groups.setdefault(pool_key(c) or (c.shape, c.dtype), []).append(c)
        n_kernel, done, g_w = sum(len(g) for g in groups.values()), 0, 0
        k_start = time.perf_counter()
        for group in groups.values():
            g_w += len(group)
            g_deadline = k_start + (deadline - k_start) * g_w / n_kernel
            nblocks = group_blocks(group, cfg.min_pool_bytes)
            for idx in rng.permutation(len(group)):
                if time.perf_counter() > g_deadline:
                    break
                case = group[int(idx)]
                try:
                    t = cfg.timer.time(prepare(case, pools, nblocks))
                except torch.OutOfMemoryError:
                    log(f"  skipped (out of memory): {case}")
                    pools.release()
                    continue
                row = case.as_row()
                row.update(pool_bytes=_pool_bytes(pools), median_s=t.median_s, min_s=t.min_s,
                           repeats=t.repeats, warmup=cfg.timer.warmup, flush_bytes=cfg.timer.flush_bytes,
                           timed=TIMED[kernel], **versions)
                rows.append((order[case], row))
                done += 1
        pools.release()
        log(f"{kernel}: {done}/{n_kernel} cases in {time.perf_counter() - k_start:.1f} s")
    return [r for _, r in sorted(rows, key=lambda x: x[0])]


def _pool_bytes(pools: Pools) -> int:
    return int(sum(t.numel() * t.element_size() for t in pools.tensors))
