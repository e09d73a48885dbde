"""The measurement grid: which Cases each kernel is timed at, per preset, filtered by device memory."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product

from kvsim.calibrate.cases import DTYPE_BYTES, Case
from kvsim.specs.model import ModelSpec


@dataclass(frozen=True, slots=True)
class GridSpec:
    """The axes of one preset. layouts: (q_heads, kv_heads, head_dim) per layer. max_tokens: cap on a
    decode batch's total context; torch_decode_max_tokens: the same for the torch reference (slower);
    max_prefill_flops: cap on one prefill case's attention FLOPs."""

    dtypes: tuple[str, ...]
    triton_dtypes: tuple[str, ...]
    block_sizes: tuple[int, ...]
    layouts: tuple[tuple[int, int, int], ...]
    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    max_tokens: int
    torch_decode_max_tokens: int
    prefill_batches: tuple[int, ...]
    chunks: tuple[int, ...]
    prefixes: tuple[int, ...]
    gemm_m: tuple[int, ...]
    copy_blocks: tuple[int, ...]
    copy_block_size: int
    max_prefill_flops: float = 1e18


PRESETS: dict[str, GridSpec] = {
    # An H100/H200-class GPU: Llama-3-8B / 70B-per-GPU / MHA head layouts, long contexts, big batches.
    "gpu": GridSpec(
        dtypes=("bf16", "fp16"), triton_dtypes=("bf16", "fp16", "fp8"), block_sizes=(1, 16, 32),
        layouts=((32, 8, 128), (64, 8, 128), (32, 32, 128)), batches=(1, 4, 16, 64, 256),
        contexts=(128, 512, 2048, 8192, 32768), max_tokens=1 << 21, torch_decode_max_tokens=1 << 18,
        prefill_batches=(1, 4), chunks=(16, 128, 512, 2048), prefixes=(0, 512, 4096, 16384),
        gemm_m=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192),
        copy_blocks=(1, 2, 4, 8, 16, 32, 64, 128, 256), copy_block_size=16),
    # This 2-core CPU: the torch kernels only, small enough for a few minutes.
    "cpu": GridSpec(
        dtypes=("bf16",), triton_dtypes=(), block_sizes=(1, 16, 32),
        layouts=((32, 8, 64), (8, 8, 64)), batches=(1, 4, 16, 64), contexts=(64, 256, 1024, 4096),
        max_tokens=16384, torch_decode_max_tokens=16384,
        prefill_batches=(1, 3), chunks=(16, 64, 256, 1024), prefixes=(0, 256, 1024, 4096),
        gemm_m=(1, 4, 16, 64, 256), copy_blocks=(1, 2, 4, 8, 16, 32, 64, 128, 256), copy_block_size=16,
        max_prefill_flops=1e10),
    # Seconds: for tests and for trying the harness.
    "smoke": GridSpec(
        dtypes=("fp32",), triton_dtypes=(), block_sizes=(1, 16), layouts=((4, 2, 16),), batches=(1, 3),
        contexts=(16, 40), max_tokens=1 << 10, torch_decode_max_tokens=1 << 10, prefill_batches=(1,),
        chunks=(4, 16), prefixes=(0, 20), gemm_m=(1, 8), copy_blocks=(1, 4), copy_block_size=4),
}


def gemm_shapes(model: ModelSpec) -> dict[str, tuple[int, int]]:
    """The model's linear layers as (n, k) for y = x @ W^T: fused QKV, attention out, fused gate/up,
    down projection, LM head (whole model, tp = 1)."""
    h, hd = model.hidden_size, model.head_dim
    q, kv = model.num_attention_heads * hd, model.num_kv_heads * hd
    return {"qkv": (q + 2 * kv, h), "o": (h, q), "gate_up": (2 * model.intermediate_size, h),
            "down": (h, model.intermediate_size), "lm_head": (model.vocab_size, h)}


def build_grid(preset: str, model: ModelSpec, kernels: set[str], triton_ok: bool = False,
               fp8_ok: bool = False, copy_dtype: str = "bf16") -> list[Case]:
    """Every Case of `preset` for the kernels asked for (Triton ones only when triton_ok; fp8 KV only
    when fp8_ok). Decode batches are uniform and skewed with the same total; the contiguous control
    runs on uniform ones."""
    g = PRESETS[preset]
    cases: list[Case] = []
    layouts = g.layouts
    decode_points = [(b, c, kind) for b, c, kind in product(g.batches, g.contexts, ("uniform", "skewed"))
                     if b * c <= g.max_tokens and not (kind == "skewed" and b == 1)]
    tri_dtypes = [d for d in g.triton_dtypes if d != "fp8" or fp8_ok] if triton_ok else []
    for (qh, kvh, hd), bs, (b, c, kind) in product(layouts, g.block_sizes, decode_points):
        base = Case("paged_decode_torch", "", batch=b, ctx_kind=kind, ctx_total=b * c, block_size=bs,
                    q_heads=qh, kv_heads=kvh, head_dim=hd)
        for dt in tri_dtypes:
            cases.append(replace(base, kernel="paged_decode_triton", dtype=dt))
        if b * c <= g.torch_decode_max_tokens:
            cases += [replace(base, dtype=dt) for dt in g.dtypes]
    for (qh, kvh, hd), (b, c, kind), dt in product(layouts, decode_points, g.dtypes):
        if kind == "uniform":
            cases.append(Case("contiguous_decode_sdpa", dt, batch=b, ctx_kind=kind, ctx_total=b * c,
                              q_heads=qh, kv_heads=kvh, head_dim=hd))
    bs_prefill = 16 if 16 in g.block_sizes else g.block_sizes[-1]
    for (qh, kvh, hd), b, c, p, dt in product(layouts, g.prefill_batches, g.chunks, g.prefixes, g.dtypes):
        case = Case("prefill_torch", dt, batch=b, block_size=bs_prefill, q_heads=qh, kv_heads=kvh,
                    head_dim=hd, chunk=c, prefix=p)
        if case.attn_flops() <= g.max_prefill_flops:
            cases.append(case)
    wdt = model.weight_dtype if model.weight_dtype in g.dtypes else g.dtypes[0]
    for (name, (n, k)), m in product(gemm_shapes(model).items(), g.gemm_m):
        cases.append(Case("gemm_torch", wdt, shape=name, m=m, n=n, k=k))
    cdt = copy_dtype if copy_dtype in g.dtypes else g.dtypes[0]
    block_bytes = int(model.kv_bytes_per_token(cdt) * g.copy_block_size)
    for kernel, nb in product(("copy_d2d", "copy_d2h", "copy_h2d"), g.copy_blocks):
        cases.append(Case(kernel, cdt, blocks=nb, block_bytes=block_bytes, block_size=g.copy_block_size))
    return [c for c in cases if c.kernel in kernels]


def case_bytes(case: Case, pool_bytes: float = 0.0) -> float:
    """Device bytes a case needs beyond its pool: inputs, outputs and the largest temporaries."""
    e = DTYPE_BYTES[case.dtype]
    if case.family == "decode":
        kv = case.kv_bytes()
        if case.kernel == "paged_decode_torch":  # gathered K, V in fp32 plus q expanded per token
            return 4 * kv / e * 2 + 3 * case.ctx_total * case.q_heads * case.head_dim * 4
        if case.kernel == "contiguous_decode_sdpa":
            return kv * 2
        return case.batch * case.q_heads * case.head_dim * e * 2
    if case.family == "prefill":
        ctx = case.prefix + case.chunk
        return case.batch * 4 * ctx * (case.kv_heads * case.head_dim * e + case.chunk * case.q_heads)
    if case.family == "gemm":
        return (case.m * case.k + case.n * case.k + case.m * case.n) * e
    return 2.0 * case.blocks * case.block_bytes


def filter_by_memory(cases: list[Case], memory_bytes: float, pool_bytes: float) -> list[Case]:
    """Cases whose working set plus a KV pool of pool_bytes (and their own KV) fits in memory_bytes."""
    kept = []
    for c in cases:
        own = c.kv_bytes() if c.family == "decode" and c.block_size else 0.0
        if max(pool_bytes, 1.25 * own) + case_bytes(c) <= memory_bytes:
            kept.append(c)
    return kept
