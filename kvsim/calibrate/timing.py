"""Timing one kernel call: warm-up, cache flush before every call, median of repeats. CUDA events on a
GPU; perf_counter on the CPU, where torch ops return only when done."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(slots=True)
class Timing:
    """Seconds of one timed call: the median and the minimum of `repeats` calls."""

    median_s: float
    min_s: float
    repeats: int


class Timer:
    """Times zero-argument callables on one device.

    Before every call (warm-ups included) a buffer of flush_bytes is overwritten so the call starts
    with a cold cache; the flush itself is outside the timed region. Calls slower than long_s get
    long_repeats repeats instead of `repeats`.
    """

    def __init__(self, device: torch.device, flush_bytes: int, warmup: int = 2, repeats: int = 7,
                 long_s: float = 0.25, long_repeats: int = 3) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.flush_bytes = flush_bytes
        self.flush = torch.empty(max(flush_bytes, 1), dtype=torch.uint8, device=device)
        self.warmup = warmup
        self.repeats = repeats
        self.long_s = long_s
        self.long_repeats = long_repeats

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def _once(self, fn: Callable[[], object]) -> float:
        self.flush.zero_()
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def time(self, fn: Callable[[], object]) -> Timing:
        first = self._once(fn)
        for _ in range(self.warmup - 1):
            self._once(fn)
        n = self.long_repeats if first > self.long_s else self.repeats
        samples = [self._once(fn) for _ in range(n)]
        self._sync()
        return Timing(statistics.median(samples), min(samples), n)


def default_flush_bytes(device: torch.device) -> int:
    """Bytes overwritten before every timed call: twice the GPU's L2 (its last-level cache); on a CPU the
    larger of twice the L2 of all cores and the last-level cache (at most 512 MiB), so that KV and weights
    come from DRAM as they would for a model far larger than the caches."""
    if device.type == "cuda":
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20
        return 2 * int(l2)
    return min(max(2 * cpu_cache_bytes(2), cpu_cache_bytes(3)), 512 << 20)


def cpu_cache_bytes(level: int) -> int:
    """Bytes of the CPU caches of one level, each distinct cache counted once, from sysfs (4 MiB for L2
    and 0 for others if it cannot be read)."""
    total = 0
    seen: set[str] = set()
    for idx in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index*"):
        try:
            if (idx / "level").read_text().strip() != str(level):
                continue
            shared = (idx / "shared_cpu_list").read_text().strip()
            if (idx / "type").read_text().strip() == "Instruction" or shared in seen:
                continue
            seen.add(shared)
            size = (idx / "size").read_text().strip().upper()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
        total += int(size.rstrip("KM")) * mult
    return total or (4 << 20 if level == 2 else 0)
