"""One measurement point (a Case) and the quantities derived from it. No torch: the fit and the CSV use
these too."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}

KERNELS = ("paged_decode_triton", "paged_decode_torch", "contiguous_decode_sdpa", "prefill_torch",
           "gemm_torch", "copy_d2d", "copy_d2h", "copy_h2d")
"""Every kernel the harness times, as named in the CSV's `kernel` column."""

FAMILY = {"paged_decode_triton": "decode", "paged_decode_torch": "decode", "contiguous_decode_sdpa": "decode",
          "prefill_torch": "prefill", "gemm_torch": "gemm", "copy_d2d": "copy", "copy_d2h": "copy",
          "copy_h2d": "copy"}
"""Which parametric model (kvsim.calibrate.features) each kernel is fitted with."""


@dataclass(frozen=True, slots=True)
class Case:
    """What one row times. Fields a kernel does not use stay 0 / "".

    decode: batch sequences, contexts from (ctx_kind, batch, ctx_total) by context_lens(), block_size
        (0 for the contiguous control), q_heads / kv_heads / head_dim per layer.
    prefill: batch sequences, each computing `chunk` new tokens after `prefix` cached ones.
    gemm: x[m, k] @ W[n, k]^T, `shape` names the model's layer (qkv, o, gate_up, down, lm_head).
    copies: `blocks` blocks of `block_bytes` bytes each.
    """

    kernel: str
    dtype: str
    batch: int = 0
    ctx_kind: str = ""
    ctx_total: int = 0
    block_size: int = 0
    q_heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    chunk: int = 0
    prefix: int = 0
    shape: str = ""
    m: int = 0
    n: int = 0
    k: int = 0
    blocks: int = 0
    block_bytes: int = 0

    def as_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Case:
        """Rebuild a Case from a CSV row (extra columns are ignored; NaN / empty become defaults)."""
        out: dict[str, Any] = {}
        for f in fields(cls):
            v = row.get(f.name)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            out[f.name] = str(v) if f.type == "str" else int(v)
        return cls(**out)

    @property
    def family(self) -> str:
        return FAMILY[self.kernel]

    @property
    def group(self) -> int:
        return self.q_heads // self.kv_heads if self.kv_heads else 0

    def lens(self) -> list[int]:
        return context_lens(self.ctx_kind, self.batch, self.ctx_total)

    def blocks_read(self) -> int:
        """KV blocks read through the block table, summed over sequences (0 without a block table)."""
        if not self.block_size:
            return 0
        return sum(-(-n // self.block_size) for n in self.lens())

    def kv_bytes(self) -> float:
        """Decode: K and V bytes read for one layer (2 x tokens x kv_heads x head_dim x dtype bytes)."""
        return 2.0 * self.ctx_total * self.kv_heads * self.head_dim * DTYPE_BYTES[self.dtype]

    def attn_pairs(self) -> float:
        """(query, key) pairs: decode = context tokens; prefill = chunk*prefix + chunk*(chunk+1)/2 each."""
        if self.family == "prefill":
            return self.batch * (self.chunk * self.prefix + self.chunk * (self.chunk + 1) / 2)
        return float(self.ctx_total)

    def attn_flops(self) -> float:
        """QK^T and PV over all query heads of one layer: 4 x pairs x q_heads x head_dim."""
        return 4.0 * self.attn_pairs() * self.q_heads * self.head_dim

    def max_tokens(self) -> int:
        """Longest sequence's KV tokens (decode: contexts; prefill: prefix + chunk)."""
        if self.family == "prefill":
            return self.prefix + self.chunk
        return max(self.lens()) if self.batch else 0


def context_lens(kind: str, batch: int, total: int) -> list[int]:
    """Context lengths of a batch. uniform: total / batch each. skewed: the same total split in
    proportion to 1 / (i + 1) (Zipf), each at least 1, longest first. Deterministic, exact total."""
    if batch <= 0:
        return []
    if total < batch:
        raise ValueError(f"context total {total} below batch {batch}")
    if kind == "uniform":
        base, extra = divmod(total, batch)
        return [base + (1 if i < extra else 0) for i in range(batch)]
    if kind != "skewed":
        raise ValueError(f"unknown context kind {kind!r}")
    weights = [1.0 / (i + 1) for i in range(batch)]
    scale = (total - batch) / sum(weights)
    lens = [1 + int(w * scale) for w in weights]
    for i in range(total - sum(lens)):
        lens[i % batch] += 1
    return lens
