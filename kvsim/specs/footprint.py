"""How many KV blocks fit on one GPU, the way vLLM sizes its cache at start-up:
memory * gpu_memory_utilization - weights - activation reserve, divided into blocks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvsim.errors import KvsimError
from kvsim.specs.hardware import MAX_BYTES, HardwareSpec
from kvsim.specs.model import ModelSpec

GiB = 2**30
MAX_BLOCK_SIZE = 2**20
"""Largest block_size (tokens per block) accepted; vLLM uses 1 to 256."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """KV capacity of one GPU (one tensor-parallel rank; every rank holds the same number of blocks).

    budget_bytes = memory_bytes * gpu_memory_utilization; usable_bytes = budget - weight_bytes -
    activation_reserve_bytes; num_blocks = floor(usable / bytes_per_block); tokens = num_blocks *
    block_size (token slots in the pool, shared by all sequences).
    """

    kv_bytes_per_token: float
    block_size: int
    bytes_per_block: float
    budget_bytes: float
    weight_bytes: float
    activation_reserve_bytes: float
    usable_bytes: float
    num_blocks: int
    tokens: int

    def describe(self) -> str:
        """One human line: blocks, tokens and where the memory went."""
        return (f"{self.num_blocks:,} blocks x {self.block_size} = {self.tokens:,} tokens "
                f"({format_bytes(self.kv_bytes_per_token)}/token; budget {format_bytes(self.budget_bytes)}"
                f" = weights {format_bytes(self.weight_bytes)} + reserve "
                f"{format_bytes(self.activation_reserve_bytes)} + KV {format_bytes(self.usable_bytes)})")


def default_activation_reserve(hw: HardwareSpec) -> float:
    """Bytes kept back for activations, CUDA graphs, NCCL and allocator slack when the scenario does
    not say: max(1 GiB, 5% of device memory). vLLM measures this with a profiling forward pass; on an
    80 GB H100 it typically reports 1-4 GiB, so this rule errs slightly on the small-KV side."""
    return max(float(GiB), 0.05 * hw.memory_bytes)


def kv_capacity(model: ModelSpec, hw: HardwareSpec, kv_dtype: str = "bf16", tp: int = 1,
                gpu_memory_utilization: float = 0.9, block_size: int = 16,
                activation_reserve_bytes: float | None = None) -> Capacity:
    """KV blocks and tokens one GPU can hold for `model` sharded over `tp` GPUs of type `hw`.
    KvsimError when the sharding is impossible, the weights (plus reserve) do not fit, or an input is
    out of range: gpu_memory_utilization in (0, 1], 1 <= block_size <= MAX_BLOCK_SIZE, a finite
    reserve in [0, MAX_BYTES]. With those bounds (and the ModelSpec / HardwareSpec ones) every
    quantity here is a finite float, so the block count is a plain int."""
    model.validate_tp(tp)
    if not _is_number(gpu_memory_utilization) or not 0 < gpu_memory_utilization <= 1:
        raise KvsimError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization!r}")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or not (
            1 <= block_size <= MAX_BLOCK_SIZE):
        raise KvsimError(f"block_size must be an integer from 1 to {MAX_BLOCK_SIZE}, got {block_size!r}")
    if activation_reserve_bytes is not None and not (
            _is_number(activation_reserve_bytes) and 0 <= activation_reserve_bytes <= MAX_BYTES):
        raise KvsimError(f"activation reserve must be a finite number of bytes >= 0 (at most 2**60),"
                         f" got {activation_reserve_bytes!r}")
    if not _is_number(hw.memory_bytes) or not 0 < hw.memory_bytes <= MAX_BYTES:
        raise KvsimError(f"hardware {hw.name}: memory_bytes must be in (0, 2**60], got {hw.memory_bytes!r}")
    per_token = model.kv_bytes_per_token(kv_dtype, tp)
    per_block = per_token * block_size
    budget = hw.memory_bytes * gpu_memory_utilization
    weights = model.weight_bytes(tp)
    reserve = default_activation_reserve(hw) if activation_reserve_bytes is None else activation_reserve_bytes
    usable = budget - weights - reserve
    if weights > budget:
        raise KvsimError(
            f"{model.name} weights ({weights / 1e9:.1f} GB per GPU) exceed the {budget / 1e9:.1f} GB"
            f" budget of {hw.name} (memory x gpu_memory_utilization {gpu_memory_utilization:g}) at"
            f" tensor_parallel_size {tp}; {_suggest(model, hw, budget, reserve, tp)}")
    if usable <= 0:
        raise KvsimError(
            f"{model.name} weights ({weights / 1e9:.1f} GB per GPU) plus the activation reserve"
            f" ({reserve / 1e9:.1f} GB) leave no room for KV in the {budget / 1e9:.1f} GB budget of"
            f" {hw.name} at tensor_parallel_size {tp}; {_suggest(model, hw, budget, reserve, tp)}")
    num_blocks = max(0, math.floor(usable / per_block))  # both finite and > 0 here
    return Capacity(kv_bytes_per_token=per_token, block_size=block_size, bytes_per_block=per_block,
                    budget_bytes=budget, weight_bytes=weights, activation_reserve_bytes=reserve,
                    usable_bytes=usable, num_blocks=num_blocks, tokens=num_blocks * block_size)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _suggest(model: ModelSpec, hw: HardwareSpec, budget: float, reserve: float, tp: int) -> str:
    for bigger in (2, 4, 8, 16, 32, 64):
        if bigger > tp and model.weight_bytes(bigger) + reserve < budget:
            try:
                model.validate_tp(bigger)
            except KvsimError:
                continue
            return f"try tensor_parallel_size {bigger}, fp8 weights or a larger GPU"
    return "use fp8/int4 weights or a larger GPU"


def format_bytes(n: float) -> str:
    """Human-readable binary size: '800.0 KiB', '1.50 GiB' (B, KiB, MiB, GiB, TiB)."""
    sign = "-" if n < 0 else ""
    n = abs(float(n))
    if n < 1024:
        return f"{sign}{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{sign}{n:.1f} {unit}" if unit in ("KiB", "MiB") else f"{sign}{n:.2f} {unit}"
    raise AssertionError("unreachable")
