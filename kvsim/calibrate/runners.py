"""Inputs for each kernel at one Case, and a zero-argument callable that runs it once. KV lives in pools
much larger than the caches, and every block table holds shuffled physical block ids."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from kvsim.calibrate.cases import DTYPE_BYTES, Case
from kvsim.calibrate.torch_attention import (
    contiguous_decode_sdpa,
    paged_decode_torch,
    prefill_torch,
)

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
                "fp8": getattr(torch, "float8_e4m3fn", None)}

TIMED = {
    "paged_decode_triton": "Triton _paged_decode_kernel, one launch, grid (batch, kv_heads); or, when "
                           "batch x kv_heads < 2 x SMs and the longest context > 256, split over the context "
                           "(flash-decoding): grid (batch, kv_heads, S) then _merge_splits_kernel, "
                           "S = triton_decode.splits_for, slice buffers allocated per call; output "
                           "preallocated",
    "paged_decode_torch": "torch per sequence: slots from the block table, K/V gather, fp32 scores, softmax "
                          "and weighted V as batched matmuls over KV heads",
    "contiguous_decode_sdpa": "torch scaled_dot_product_attention over contiguous per-sequence K/V "
                              "(no block table)",
    "prefill_torch": "torch per sequence: write chunk K/V into cache slots, gather prefix+chunk through the "
                     "block table, causal SDPA per 128-query tile",
    "gemm_torch": "torch.nn.functional.linear x[m,k] @ W[n,k]^T, no bias",
    "copy_d2d": "index_select + index_copy_ of shuffled blocks within the device pool (copy-on-write)",
    "copy_d2h": "index_select of shuffled device blocks, then one copy into a host buffer (pinned on GPU)",
    "copy_h2d": "one copy from a host buffer (pinned on GPU), then index_copy_ into shuffled device blocks",
}
"""What each kernel's timed region covers (the CSV's `timed` column)."""


def fill_random(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Fill t with N(0, 1) values cheaply: 1 Mi random values tiled over the tensor."""
    flat = t.view(-1)
    chunk = min(flat.numel(), 1 << 20)
    src = torch.randn(chunk, generator=gen, device=gen.device)
    src = (src * 40).to(torch.int8).view(torch.uint8) if t.dtype == torch.uint8 else src.to(t.dtype)
    full, rest = divmod(flat.numel(), chunk)
    flat[: full * chunk].view(full, chunk).copy_(src.expand(full, chunk))
    if rest:
        flat[full * chunk:].copy_(src[:rest])
    return t


class Pools:
    """Device memory shared by the cases of one group: a paged KV pool (K and V) or a block pool for
    copies, kept while consecutive cases use the same key."""

    def __init__(self, device: torch.device, seed: int) -> None:
        self.device = device
        self.gen = torch.Generator(device=device).manual_seed(seed)
        self.key: tuple | None = None
        self.tensors: tuple[torch.Tensor, ...] = ()

    def get(self, key: tuple, make: Callable[[], tuple[torch.Tensor, ...]]) -> tuple[torch.Tensor, ...]:
        if key != self.key:
            self.release()
            self.tensors = make()
            self.key = key
        return self.tensors

    def release(self) -> None:
        self.tensors = ()
        self.key = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def perm(self, n: int) -> torch.Tensor:
        return torch.randperm(n, generator=self.gen, device=self.device)


def pool_blocks(case: Case, min_bytes: float, max_kv_bytes: float) -> int:
    """Blocks in the KV pool of a group: enough for the group's largest case (max_kv_bytes of K+V, x1.25)
    and at least min_bytes."""
    per_block = 2 * case.block_size * case.kv_heads * case.head_dim * DTYPE_BYTES[case.dtype]
    return int(max(min_bytes, 1.25 * max_kv_bytes) // per_block) + 1


def kv_pool(pools: Pools, case: Case, nblocks: int) -> tuple[torch.Tensor, torch.Tensor]:
    shape = (nblocks, case.block_size, case.kv_heads, case.head_dim)
    dt = TORCH_DTYPES[case.dtype]

    def make():
        out = []
        for _ in range(2):
            t = torch.empty(shape, dtype=dt if case.dtype != "fp8" else torch.bfloat16, device=pools.device)
            fill_random(t, pools.gen)
            out.append(t if case.dtype != "fp8" else t.to(dt))
        return tuple(out)

    return pools.get(("kv", case.dtype, case.kv_heads, case.head_dim, case.block_size, nblocks), make)


def block_tables(pools: Pools, nblocks: int, need: list[int]) -> torch.Tensor:
    """Per-sequence tables of distinct physical blocks drawn at random from the pool."""
    ids = pools.perm(nblocks)[: sum(need)].to(torch.int32)
    tables = torch.zeros(len(need), max(need), dtype=torch.int32, device=pools.device)
    start = 0
    for i, n in enumerate(need):
        tables[i, :n] = ids[start:start + n]
        start += n
    return tables


def prepare(case: Case, pools: Pools, nblocks: int = 0) -> Callable[[], object]:
    """Build the inputs of `case` (on pools.device) and return the callable to time."""
    dev, gen = pools.device, pools.gen
    qdt = TORCH_DTYPES["bf16" if case.dtype == "fp8" else case.dtype]
    scale = case.head_dim ** -0.5 if case.head_dim else 1.0

    def rand(*shape, dtype=qdt):
        return torch.randn(*shape, generator=gen, device=dev).to(dtype)

    if case.kernel in ("paged_decode_triton", "paged_decode_torch"):
        k, v = kv_pool(pools, case, nblocks)
        lens = case.lens()
        tables = block_tables(pools, nblocks, [-(-n // case.block_size) for n in lens])
        q = rand(case.batch, case.q_heads, case.head_dim)
        if case.kernel == "paged_decode_triton":
            from kvsim.calibrate.triton_decode import paged_decode_triton

            lens_t = torch.tensor(lens, dtype=torch.int32, device=dev)
            out = torch.empty_like(q)
            longest = max(lens)
            return lambda: paged_decode_triton(q, k, v, tables, lens_t, scale, out, max_context=longest)
        return lambda: paged_decode_torch(q, k, v, tables, lens, scale)
    if case.kernel == "contiguous_decode_sdpa":
        ctx = case.ctx_total // case.batch
        shape = (case.batch, case.kv_heads, ctx, case.head_dim)
        kc = fill_random(torch.empty(shape, dtype=qdt, device=dev), gen)
        vc = fill_random(torch.empty_like(kc), gen)
        q = rand(case.batch, case.q_heads, case.head_dim)
        return lambda: contiguous_decode_sdpa(q, kc, vc, scale)
    if case.kernel == "prefill_torch":
        k, v = kv_pool(pools, case, nblocks)
        need = -(-(case.prefix + case.chunk) // case.block_size)
        tables = block_tables(pools, nblocks, [need] * case.batch)
        qs = [rand(case.chunk, case.q_heads, case.head_dim) for _ in range(case.batch)]
        ks = [rand(case.chunk, case.kv_heads, case.head_dim) for _ in range(case.batch)]
        vs = [rand(case.chunk, case.kv_heads, case.head_dim) for _ in range(case.batch)]
        prefixes = [case.prefix] * case.batch
        return lambda: prefill_torch(qs, ks, vs, k, v, tables, prefixes, scale)
    if case.kernel == "gemm_torch":
        x = rand(case.m, case.k)
        w = fill_random(torch.empty(case.n, case.k, dtype=qdt, device=dev), gen)
        return lambda: F.linear(x, w)
    return _copy(case, pools, nblocks)


def _copy(case: Case, pools: Pools, nblocks: int) -> Callable[[], object]:
    dev = pools.device

    def make():
        pool = fill_random(torch.empty(nblocks, case.block_bytes, dtype=torch.uint8, device=dev), pools.gen)
        host = torch.empty(nblocks // 2, case.block_bytes, dtype=torch.uint8, pin_memory=dev.type == "cuda")
        return pool, host

    pool, host = pools.get(("copy", case.block_bytes, nblocks), make)
    ids = pools.perm(nblocks)
    src, dst = ids[: case.blocks], ids[case.blocks: 2 * case.blocks]
    n = case.blocks
    if case.kernel == "copy_d2d":
        return lambda: pool.index_copy_(0, dst, pool.index_select(0, src))
    if case.kernel == "copy_d2h":
        return lambda: host[:n].copy_(pool.index_select(0, src), non_blocking=True)
    return lambda: pool.index_copy_(0, dst, host[:n].to(dev, non_blocking=True))
