"""Bytes and FLOPs of LoRA adapters on a model, per GPU under tensor parallelism, as vLLM lays them out.

vLLM wraps each linear layer of every decoder layer (vllm/lora/layers: `MergedQKVParallelLinearWithLoRA`,
`RowParallelLinearWithLoRA`, `MergedColumnParallelLinearWithLoRA`) and allocates, before the KV cache is
profiled, `max_loras` slots of `max_lora_rank` for each: per slice a `lora_a` of rank x input and a
`lora_b` of output x rank, in the model's activation dtype. Without `fully_sharded_loras` (the default)
a column-parallel layer (qkv: 3 slices q, k, v; gate_up: 2 slices) keeps A whole on every GPU and
splits B's output by tp; a row-parallel layer (o, down) splits A's input by tp and keeps B whole. An
adapter of a smaller rank is zero-padded into its slot, and the punica kernels (lora_shrink,
lora_expand) compute over the whole slot: a token of an adapter costs 2 x slot parameters FLOPs, and a
step reads each distinct adapter's slot once.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvsim.errors import KvsimError
from kvsim.specs.model import ModelSpec

LORA_DTYPE_BYTES = 2
"""bf16 / fp16: vLLM's lora_dtype 'auto' is the model's activation dtype (bf16 for every catalog model,
fp8 and 4-bit checkpoints included: their activations are bf16)."""
MODULES = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
"""The LoRA-wrapped linear layers of a decoder layer (vLLM's packed modules of a Llama-style model)."""
KERNELS_PER_MODULE = 2
"""Punica launches per wrapped layer and step: one lora_shrink (x @ A) and one lora_expand (@ B), each
over all slices of the layer (vllm/lora/ops/triton_ops)."""


@dataclass(frozen=True, slots=True)
class ModuleShape:
    """One wrapped linear layer: `slices` (input, output) pairs, and whether it is column parallel."""

    name: str
    slices: tuple[tuple[int, int], ...]
    column_parallel: bool


def module_shapes(model: ModelSpec) -> tuple[ModuleShape, ...]:
    """The four wrapped layers of one decoder layer (unsharded shapes)."""
    h, hd = model.hidden_size, model.head_dim
    q, kv = model.num_attention_heads * hd, model.num_kv_heads * hd
    inter = model.intermediate_size
    return (ModuleShape("qkv_proj", ((h, q), (h, kv), (h, kv)), True),
            ModuleShape("o_proj", ((q, h),), False),
            ModuleShape("gate_up_proj", ((h, inter), (h, inter)), True),
            ModuleShape("down_proj", ((inter, h),), False))


def unsupported_reason(model: ModelSpec) -> str | None:
    """Why kvsim does not size LoRA on `model` (None when it does): it sizes the Llama-style layer above
    (full or sliding-window attention with q/k/v/o projections and a dense gated MLP)."""
    kinds = set(model.layer_kinds)
    if model.attention == "mla" or kinds & {"mla", "state", "compressed", "none"}:
        what = "MLA" if model.attention == "mla" else "/".join(sorted(kinds - {"full", "sliding"}))
        return (f"{model.name} has {what} layers; LoRA slots are sized for q/k/v/o attention and a dense "
                "MLP only")
    if model.is_moe:
        return f"{model.name} is a mixture-of-experts model; LoRA on expert layers is not sized"
    return None


def slot_params(model: ModelSpec, rank: int, tp: int = 1) -> float:
    """Parameters of one adapter slot of `rank` per GPU: over every layer and wrapped module, per slice
    rank x (input + output), the input split by tp for a row-parallel layer, the output for a
    column-parallel one (KV heads replicated when tp > num_kv_heads, as the model's KV projection is)."""
    kv_rep = max(1, model.num_kv_heads // tp) * tp / model.num_kv_heads  # (1 unless KV heads replicate)
    total = 0.0
    for m in module_shapes(model):
        for i, (n_in, n_out) in enumerate(m.slices):
            if m.column_parallel:
                out = n_out / tp * (kv_rep if m.name == "qkv_proj" and i else 1.0)
                total += n_in + out
            else:
                total += n_in / tp + n_out
    return total * rank * model.num_layers


def slot_bytes(model: ModelSpec, rank: int, tp: int = 1) -> float:
    """Bytes of one adapter slot of `rank` per GPU (slot_params x LORA_DTYPE_BYTES)."""
    return slot_params(model, rank, tp) * LORA_DTYPE_BYTES


def adapter_file_bytes(model: ModelSpec, rank: int) -> float:
    """Bytes of one adapter of `rank` whole (every GPU's shard together, no replication): what is read
    from disk into host memory, at LORA_DTYPE_BYTES a value."""
    return sum(n_in + n_out for m in module_shapes(model) for n_in, n_out in m.slices) * rank * \
        model.num_layers * LORA_DTYPE_BYTES


def kernels_per_step(model: ModelSpec) -> int:
    """Punica kernels an iteration with adapter tokens launches: per layer, 2 per wrapped module."""
    return model.num_layers * len(MODULES) * KERNELS_PER_MODULE


def check_model(model: ModelSpec, fix: str = "remove the lora section") -> None:
    """KvsimError 'lora: <why> (<fix>)' when kvsim does not size LoRA on `model`."""
    reason = unsupported_reason(model)
    if reason is not None:
        raise KvsimError(f"lora: {reason} ({fix})")
