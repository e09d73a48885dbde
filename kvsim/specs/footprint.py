"""How many KV pages fit on one GPU, the way vLLM sizes its cache at start-up:
memory * gpu_memory_utilization - weights - activation reserve, divided into pages of the model's page
plan (kvsim/specs/pages.py: one page size for every layer group; for a model of one full-attention or
MLA group a page is the classic block of block_size tokens of every layer)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvsim.errors import KvsimError
from kvsim.specs.expert_parallel import ep_weight_bytes
from kvsim.specs.hardware import MAX_BYTES, HardwareSpec
from kvsim.specs.model import ModelSpec
from kvsim.specs.pages import PagePlan, as_full_attention, plan_pages

GiB = 2**30
MAX_BLOCK_SIZE = 2**20
"""Largest block_size (tokens per block) accepted; vLLM uses 1 to 256."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """KV capacity of one GPU (one tensor-parallel rank; every rank holds the same number of pages).

    budget_bytes = memory_bytes * gpu_memory_utilization; usable_bytes = budget - weight_bytes -
    activation_reserve_bytes; num_pages = floor(usable / page_bytes) pages of the page plan `plan`
    (`page_bytes` = plan.page_bytes, each spanning `tokens_per_page` = plan.block_size tokens of a
    token-paged group; the plan raises the requested block size for state and compressed layers).
    The pool is shared by every layer group; `plan.pages(context)` says how many one sequence holds.

    The older names stay, equal to these: block_size = tokens_per_page, bytes_per_block = page_bytes,
    num_blocks = num_pages, tokens = num_pages * tokens_per_page (token slots when every page held
    tokens of one group). For a model of one full-attention or MLA group (or one sliding group) a page is
    the classic block: page_bytes = kv_bytes_per_token * block_size.
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
    plan: PagePlan | None = None
    lora_bytes: float = 0.0
    """Multi-LoRA: the adapter slots' bytes per GPU (kvsim/lora/sizing.py), taken from the KV memory
    before it is divided into pages: usable = budget - weights - reserve - lora_bytes."""

    @property
    def num_pages(self) -> int:
        return self.num_blocks

    @property
    def page_bytes(self) -> float:
        return self.bytes_per_block

    @property
    def tokens_per_page(self) -> int:
        return self.block_size

    def sequences(self, context: int) -> int:
        """Sequences of `context` tokens whose pages fit in the pool at once (each holding
        plan.pages(context) pages, its last token's KV written)."""
        per = self.plan.pages(context) if self.plan is not None else -(-context // self.block_size)
        return self.num_blocks // per if per else 0

    def describe(self) -> str:
        """One human line: pages, tokens and where the memory went."""
        lora = f" + LoRA slots {format_bytes(self.lora_bytes)}" if self.lora_bytes else ""
        return (f"{self.num_blocks:,} blocks x {self.block_size} = {self.tokens:,} tokens "
                f"({format_bytes(self.kv_bytes_per_token)}/token; budget {format_bytes(self.budget_bytes)}"
                f" = weights {format_bytes(self.weight_bytes)} + reserve "
                f"{format_bytes(self.activation_reserve_bytes)}{lora} + KV "
                f"{format_bytes(self.usable_bytes)})")


def default_activation_reserve(hw: HardwareSpec) -> float:
    """Bytes kept back for activations, CUDA graphs, NCCL and allocator slack when the scenario does
    not say: max(1 GiB, 5% of device memory). vLLM measures this with a profiling forward pass; on an
    80 GB H100 it typically reports 1-4 GiB, so this rule errs slightly on the small-KV side."""
    return max(float(GiB), 0.05 * hw.memory_bytes)


def kv_capacity(model: ModelSpec, hw: HardwareSpec, kv_dtype: Any = "bf16", tp: int = 1,
                gpu_memory_utilization: float = 0.9, block_size: int = 16,
                activation_reserve_bytes: float | None = None, hybrid: bool = True,
                expert_parallel: int | None = None, lora_bytes: float = 0.0) -> Capacity:
    """KV pages and tokens one GPU can hold for `model` sharded over `tp` GPUs of type `hw`; kv_dtype is a
    name, a mapping or a KVPrecision (kvsim/specs/kv_precision.py). KvsimError when the sharding is
    impossible, the weights (plus reserve) do not fit, or an input is out of range:
    gpu_memory_utilization in (0, 1], 1 <= block_size <= MAX_BLOCK_SIZE, a finite reserve in
    [0, MAX_BYTES]. With those bounds (and the ModelSpec / HardwareSpec ones) every quantity here is a
    finite float, so the page count is a plain int. hybrid=False plans pages as vLLM does with
    --disable-hybrid-kv-cache-manager: sliding-window layers allocated as full attention
    (kvsim/specs/pages.py as_full_attention). expert_parallel: the EP size under vLLM's
    --enable-expert-parallel (routed experts split over it, the rest over tp:
    kvsim/specs/expert_parallel.py ep_weight_bytes); None without. lora_bytes: LoRA adapter slots per
    GPU, taken from the KV memory (Capacity.lora_bytes)."""
    cap = capacity_or_reason(model, hw, kv_dtype, tp, gpu_memory_utilization, block_size,
                             activation_reserve_bytes, hybrid, expert_parallel, lora_bytes)
    if isinstance(cap, str):
        raise KvsimError(cap)
    return cap


def capacity_or_reason(model: ModelSpec, hw: HardwareSpec, kv_dtype: Any, tp: int,
                       gpu_memory_utilization: float, block_size: int,
                       activation_reserve_bytes: float | None, hybrid: bool = True,
                       expert_parallel: int | None = None, lora_bytes: float = 0.0) -> Capacity | str:
    """kv_capacity, or the one-line message of why the weights leave no room (bad inputs still raise)."""
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
    groups = model.layer_groups(kv_dtype, tp)
    plan = plan_pages(groups if hybrid else as_full_attention(groups), block_size)
    budget = hw.memory_bytes * gpu_memory_utilization
    weights = (model.weight_bytes(tp) if expert_parallel is None
               else ep_weight_bytes(model, tp, expert_parallel))
    reserve = default_activation_reserve(hw) if activation_reserve_bytes is None else activation_reserve_bytes
    usable = budget - weights - reserve - lora_bytes
    if weights > budget:
        return (f"{model.name} weights ({weights / 1e9:.1f} GB per GPU) exceed the {budget / 1e9:.1f} GB"
                f" budget of {hw.name} (memory x gpu_memory_utilization {gpu_memory_utilization:g}) at"
                f" tensor_parallel_size {tp}; {_suggest(model, hw, budget, reserve, tp)}")
    if usable <= 0 and lora_bytes:
        return (f"{model.name} weights ({weights / 1e9:.1f} GB per GPU), the activation reserve"
                f" ({reserve / 1e9:.1f} GB) and the LoRA slots ({lora_bytes / 1e9:.2f} GB) leave no room for"
                f" KV in the {budget / 1e9:.1f} GB budget of {hw.name} at tensor_parallel_size {tp}; lower"
                " lora.max_loras or lora.max_lora_rank")
    if usable <= 0:
        return (f"{model.name} weights ({weights / 1e9:.1f} GB per GPU) plus the activation reserve"
                f" ({reserve / 1e9:.1f} GB) leave no room for KV in the {budget / 1e9:.1f} GB budget of"
                f" {hw.name} at tensor_parallel_size {tp}; {_suggest(model, hw, budget, reserve, tp)}")
    page = plan.page_bytes
    num_pages = max(0, math.floor(usable / page)) if page > 0 else 0  # both finite and > 0 here
    return Capacity(kv_bytes_per_token=per_token, block_size=plan.block_size, bytes_per_block=page,
                    budget_bytes=budget, weight_bytes=weights, activation_reserve_bytes=reserve,
                    usable_bytes=usable, num_blocks=num_pages, tokens=num_pages * plan.block_size, plan=plan,
                    lora_bytes=lora_bytes)


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
