"""`kvsim calibrate --check DEVICE`: re-measure a subset of the stored cases on this machine and fail when
a kernel is slower than the stored baseline beyond a tolerance."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvsim.calibrate.cases import Case
from kvsim.calibrate.measurements import read_measurements
from kvsim.errors import KvsimError


@dataclass(slots=True)
class CheckResult:
    """One re-measured case: stored and new median seconds; ratio = new / stored."""

    case: Case
    stored_s: float
    new_s: float

    @property
    def ratio(self) -> float:
        return self.new_s / self.stored_s


def pick_subset(df, per_kernel: int) -> list[tuple[Case, float]]:
    """Per kernel and dtype, per_kernel stored cases spread over the upper three quarters of its
    times (the shortest calls are the noisiest)."""
    picked = []
    for _, g in df.groupby(["kernel", "dtype"], sort=True):
        g = g.sort_values("median_s").reset_index(drop=True)
        idx = sorted(set(np.linspace(len(g) // 4, len(g) - 1, min(per_kernel, len(g))).round().astype(int)))
        picked += [(Case.from_row(g.iloc[i].to_dict()), float(g["median_s"].iloc[i])) for i in idx]
    return picked


def run_check(profile: str, device: str, csv: Path, tolerance: float, per_kernel: int = 4,
              log: Callable[[str], None] = print, force_device: bool = False,
              threads: int = 1) -> list[CheckResult]:
    """Re-time the subset with the stored method; returns every result (the caller fails on any whose
    ratio exceeds 1 + tolerance)."""
    import torch

    from kvsim.calibrate.harness import group_blocks
    from kvsim.calibrate.provenance import device_name
    from kvsim.calibrate.runners import Pools, prepare
    from kvsim.calibrate.timing import Timer

    prov, df = read_measurements(csv)
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise KvsimError(f"--device {device}: torch sees no CUDA device")
    if dev.type == "cpu":
        torch.set_num_threads(threads)
    here = device_name(dev)
    if prov.get("device") != here and not force_device:
        raise KvsimError(f"{csv}: baseline measured on {prov.get('device')!r}, this machine is {here!r} "
                         "(--force-device to compare anyway)")
    flush = int(df["flush_bytes"].iloc[0]) if "flush_bytes" in df else 8 << 20
    warmup = int(df["warmup"].iloc[0]) if "warmup" in df else 2
    timer = Timer(dev, flush, warmup=warmup, repeats=max(5, int(df["repeats"].max())), long_s=0.1)
    if dev.type == "cpu":
        from kvsim.calibrate.command import keep_heap_memory

        keep_heap_memory()
    min_pool = 4 * 2**30 if dev.type == "cuda" else 512 * 2**20
    if prov.get("grid") == "smoke":
        min_pool = 4 * 2**20
    pools = Pools(dev, 1)
    results = []
    for case, stored in pick_subset(df, per_kernel):
        t = timer.time(prepare(case, pools, group_blocks([case], min_pool)))
        results.append(CheckResult(case, stored, t.median_s))
        verdict = "SLOWER" if t.median_s > stored * (1 + tolerance) else "ok"
        log(f"{verdict:6s} {case.kernel:24s} {case.dtype:5s} {_label(case):38s} stored {stored * 1e3:9.3f} ms"
            f"  now {t.median_s * 1e3:9.3f} ms  x{t.median_s / stored:.2f}")
    pools.release()
    return results


def _label(c: Case) -> str:
    if c.family == "decode":
        return f"b={c.batch} ctx={c.ctx_total} {c.ctx_kind} bs={c.block_size} h={c.q_heads}/{c.kv_heads}"
    if c.family == "prefill":
        return f"b={c.batch} chunk={c.chunk} prefix={c.prefix} h={c.q_heads}/{c.kv_heads}"
    if c.family == "gemm":
        return f"{c.shape} m={c.m} n={c.n} k={c.k}"
    return f"{c.blocks} blocks x {c.block_bytes} B"
