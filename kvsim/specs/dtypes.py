"""Bytes per element of the numeric formats kvsim knows for weights (and peak FLOP/s keys). KV cache
formats (vLLM's kv_cache_dtype names, nvfp4, fractional-bit and per-part formats) are in
kvsim/specs/kv_precision.py."""

from __future__ import annotations

from kvsim.errors import KvsimError

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
    "mxfp4": 0.53125,
    "nvfp4": 0.5625,
    "fp8_block": 1.0,
}
"""mxfp4 (OCP microscaling FP4, as gpt-oss and DeepSeek-V4 store their MoE experts): 4-bit E2M1 values
plus one 8-bit E8M0 scale per 32 values = 4.25 bits. nvfp4 (NVIDIA FP4): 4-bit E2M1 values plus one FP8
E4M3 scale per 16 values = 4.5 bits (the per-tensor FP32 scale is negligible). fp8_block: FP8 values with
one FP32 scale per 128 x 128 block (DeepSeek-V3's format), 1 byte per value to 0.03%."""

QUANTIZATION: dict[str, str | None] = {
    "none": None,
    "fp8": "fp8",
    "fp8_block": "fp8_block",
    "nvfp4": "nvfp4",
    "mxfp4": "mxfp4",
}
"""The scenario's `quantization` (vLLM's `--quantization`, by the weight format it stores) -> the weight
dtype it gives the model's linear layers; none: the model's unquantized activation dtype (bf16 for a
quantized checkpoint)."""

# Names found in Hugging Face config.json `torch_dtype` / `dtype`, mapped to ours.
_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp4": "mxfp4",
}


def normalize_dtype(name: str) -> str:
    """Our canonical name for a dtype ("bfloat16" -> "bf16"); KvsimError for unknown names."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        known = ", ".join(DTYPE_BYTES)
        raise KvsimError(f"unknown dtype {name!r}; known: {known}")
    return key


def dtype_bytes(name: str) -> float:
    """Bytes per element of dtype `name` (0.5 for int4); KvsimError for unknown names."""
    return DTYPE_BYTES[normalize_dtype(name)]
