"""KV cache precision: vLLM's `kv_cache_dtype` names, kvsim's own formats, fractional-bit quantized KV
with scale overhead, and per-part precision (RoPE dims at one precision, the rest at another).

`kv.dtype` (and every `kv_dtype` argument of ModelSpec and kv_capacity) takes:

- a name. vLLM's: `auto` (the model's dtype: its weight dtype when that is fp32/fp16/bf16, else bf16,
  the activation dtype of quantized checkpoints), `fp8`, `fp8_e4m3`, `fp8_e5m2` (1 byte). kvsim's:
  `fp32` (4), `fp16`, `bf16` (2), `int8` (1), `int4` (0.5), `nvfp4` (4-bit values + one FP8 scale per 16:
  4 + 8/16 = 4.5 bits = 0.5625 bytes). Hugging Face spellings (`bfloat16`, `float16`, ...) are accepted.
- a quantized format `{bits: 3.5, group_size: 128, scale_bits: 16}`: `bits` per value plus one
  `scale_bits`-bit scale per `group_size` values, i.e. bits + scale_bits / group_size bits per element
  (3.5 + 16/128 = 3.625 bits; TurboQuant-class 3.5-bit KV is 16 / 3.5 = 4.57x below FP16 before the
  scales). `{bits: 6}` (DeepSeek-V2's 6-bit KV) has no scale overhead. group_size and scale_bits go
  together.
- per-part precision `{rope: bf16, rest: fp8}` (each part a name or a quantized format; a missing part is
  `auto`): MLA latents and DeepSeek-V4 entries keep their RoPE dims (qk_rope_head_dim) at `rope` and
  every other element at `rest` (V4: 64 x 2 + 448 x 1 = 576 bytes per entry instead of 1,024 in BF16).
  Plain K/V of MHA/GQA layers and indexer keys count as `rest`.

Every KV byte formula calls `KVPrecision.bytes_per_element(part)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvsim.errors import KvsimError, excerpt

KV_DTYPE_NAMES = ("auto", "fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "nvfp4")
"""The names kv.dtype accepts (canonical spelling)."""

_BITS: dict[str, float] = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "fp8_e4m3": 8, "fp8_e5m2": 8,
                           "int8": 8, "int4": 4}
_SPELLINGS: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "float8": "fp8", "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2", "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
}
_ACTIVATION_DTYPES = ("fp32", "fp16", "bf16")
PARTS = ("rope", "rest")
MAX_BITS = 64
MAX_GROUP = 2**20

EXPECTED = ("'auto', 'fp32', 'fp16', 'bf16', 'fp8', 'fp8_e4m3', 'fp8_e5m2', 'int8', 'int4' or 'nvfp4', or a "
            "mapping {bits, group_size, scale_bits} or {rope, rest}")
"""What a bad kv.dtype is told it should be (the shape of pydantic's Literal message)."""


@dataclass(frozen=True, slots=True)
class KVFormat:
    """One storage format: `bits` per value plus one `scale_bits` scale per `group_size` values
    (group_size 0: no scales). name: the canonical spelling ('bf16', 'nvfp4', '3.5-bit/g128s16')."""

    name: str
    bits: float
    group_size: int = 0
    scale_bits: float = 0.0

    @property
    def bits_per_element(self) -> float:
        return self.bits + (self.scale_bits / self.group_size if self.group_size else 0.0)

    @property
    def bytes_per_element(self) -> float:
        return self.bits_per_element / 8


@dataclass(frozen=True, slots=True)
class KVPrecision:
    """The precision of a model's KV cache: one KVFormat for the RoPE dims and one for the rest (the same
    format twice when uniform). `auto` is resolved against the model's weight dtype on parsing."""

    rope: KVFormat
    rest: KVFormat

    def bytes_per_element(self, part: str = "rest") -> float:
        """Bytes one KV element takes, scales included: part 'rope' (MLA / V4 RoPE dims) or 'rest'."""
        if part == "rope":
            return self.rope.bytes_per_element
        if part == "rest":
            return self.rest.bytes_per_element
        raise ValueError(f"KV part must be one of {', '.join(PARTS)}, got {part!r}")

    @property
    def uniform(self) -> bool:
        return self.rope == self.rest

    @property
    def name(self) -> str:
        """'bf16', '3.5-bit/g128s16', 'rope=bf16,rest=fp8'."""
        return self.rest.name if self.uniform else f"rope={self.rope.name},rest={self.rest.name}"

    @property
    def kernel_dtype(self) -> str:
        """The plain dtype whose attention kernels would run this cache (for kernel-fit lookups):
        the `rest` format's name when it is one of fp32/fp16/bf16/fp8/int8/int4, else by bits
        (<= 4.5: int4, <= 8: fp8, <= 16: fp16, else fp32)."""
        name = self.rest.name
        if name in ("fp32", "fp16", "bf16", "fp8", "int8", "int4"):
            return name
        if name.startswith("fp8"):
            return "fp8"
        b = self.rest.bits_per_element
        return "int4" if b <= 4.5 else "fp8" if b <= 8 else "fp16" if b <= 16 else "fp32"


def kv_precision(value: Any, weight_dtype: str = "bf16") -> KVPrecision:
    """Parse a kv dtype (see the module docstring) into a KVPrecision, `auto` resolved against
    `weight_dtype`. A KVPrecision is returned as is. KvsimError (one line) for anything else."""
    if isinstance(value, KVPrecision):
        return value
    if isinstance(value, dict):
        if any(k in value for k in PARTS):
            unknown = [k for k in value if k not in PARTS]
            if unknown:
                raise KvsimError(f"kv dtype: unknown key {excerpt(unknown[0])} in a per-part precision;"
                                 f" known: {', '.join(PARTS)}")
            rope = _format(value.get("rope", "auto"), weight_dtype, "rope")
            rest = _format(value.get("rest", "auto"), weight_dtype, "rest")
            return KVPrecision(rope, rest)
    fmt = _format(value, weight_dtype, None)
    return KVPrecision(fmt, fmt)


def canonical_kv_dtype(value: Any) -> str | dict[str, Any]:
    """The canonical form of a kv.dtype value for a scenario: a name in its canonical spelling, or the
    mapping with canonical names inside. KvsimError (one line) when it is not a kv dtype."""
    if isinstance(value, str):
        return _name(value)
    kv_precision(value)  # validates
    if any(k in value for k in PARTS):
        return {k: (_name(v, f"kv dtype {k}") if isinstance(v, str) else dict(v)) for k, v in value.items()}
    return dict(value)


def _name(text: str, where: str = "kv dtype") -> str:
    key = text.strip().lower()
    key = _SPELLINGS.get(key, key)
    if key not in KV_DTYPE_NAMES:
        raise KvsimError(f"unknown {where} {excerpt(text)}; known: {', '.join(KV_DTYPE_NAMES)}, or a mapping"
                         " {bits, group_size, scale_bits} or {rope, rest}")
    return key


def _format(value: Any, weight_dtype: str, part: str | None) -> KVFormat:
    where = f"kv dtype {part}" if part else "kv dtype"
    if isinstance(value, str):
        name = _name(value, where)
        if name == "auto":
            name = weight_dtype if weight_dtype in _ACTIVATION_DTYPES else "bf16"
        if name == "nvfp4":
            return KVFormat("nvfp4", 4, 16, 8)
        return KVFormat(name, _BITS[name])
    if not isinstance(value, dict):
        raise KvsimError(f"{where}: expected a name or a mapping, got {excerpt(value)}")
    unknown = [k for k in value if k not in ("bits", "group_size", "scale_bits")]
    if unknown:
        raise KvsimError(f"{where}: unknown key {excerpt(unknown[0])}; known: bits, group_size, scale_bits"
                         + ("" if part else " (or rope, rest for a per-part precision)"))
    if "bits" not in value:
        raise KvsimError(f"{where}: a quantized format needs 'bits'")
    bits = _number(value["bits"], f"{where}: bits", MAX_BITS)
    if ("group_size" in value) != ("scale_bits" in value):
        raise KvsimError(f"{where}: give group_size and scale_bits together (one scale per group)")
    group, scale = 0, 0.0
    if "group_size" in value:
        group = value["group_size"]
        if isinstance(group, bool) or not isinstance(group, int) or not 1 <= group <= MAX_GROUP:
            raise KvsimError(f"{where}: group_size must be an integer from 1 to {MAX_GROUP},"
                             f" got {excerpt(group)}")
        scale = _number(value["scale_bits"], f"{where}: scale_bits", MAX_BITS)
    name = f"{bits:g}-bit" + (f"/g{group}s{scale:g}" if group else "")
    return KVFormat(name, bits, group, scale)


def _number(value: Any, where: str, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= high:
        raise KvsimError(f"{where} must be a number in (0, {high}], got {excerpt(value)}")
    return float(value)


def schema_kv_dtype(value: Any) -> str | dict[str, Any]:
    """The scenario schema's check of kv.dtype: the canonical value, or ValueError with a one-line message
    ('Input should be ...' for an unknown name or a value of another type, else what is wrong with the
    mapping)."""
    if not isinstance(value, (str, dict)):
        raise ValueError(f"Input should be {EXPECTED}")
    try:
        return canonical_kv_dtype(value)
    except KvsimError as exc:
        if isinstance(value, str):
            raise ValueError(f"Input should be {EXPECTED}") from None
        text = str(exc)
        for prefix in ("kv dtype: ", "kv dtype "):
            text = text.removeprefix(prefix)
        raise ValueError(text) from None
