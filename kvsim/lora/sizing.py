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
BUFFER_BYTES = 4
"""The shrink output (x @ A, rank values per slice and token) is a float32 buffer in every vLLM era
(`add_lora_linear`: 'We set the buffer to be float32 by default', triton-lang/triton#1387)."""
PUNICA_ERAS = ("v0", "v1")
"""How vLLM issues the punica kernels of one wrapped layer (vllm/lora/punica_wrapper/punica_gpu.py
`add_lora_linear`). v0 (vLLM 0.6.x, V0 engine, sgmv / bgmv kernels): per slice a torch.zeros buffer, a
shrink (`_apply_shrink` in a loop over slices) and an expand (`_apply_expand` -> expand_slice): 3 kernels
per slice (as of December 2024; PR #11234 then fused the prefill ones over slices). v1 (vLLM V1,
vllm/lora/ops/triton_ops `lora_shrink` / `lora_expand` with a slice grid axis): one buffer `zero_()`
inside lora_shrink, one shrink and one expand over all slices: 3 kernels per module."""


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


def kernels_per_layer(model: ModelSpec, era: str = "v1") -> int:
    """Punica kernels (buffer zeroing included) one decoder layer launches in a step with adapter tokens:
    v0 3 per slice (qkv 9, o 3, gate_up 6, down 3: 21), v1 3 per module (12); see PUNICA_ERAS."""
    if era not in PUNICA_ERAS:
        raise ValueError(f"punica era {era!r} is not one of {PUNICA_ERAS}")
    shapes = module_shapes(model)
    return 3 * (sum(len(m.slices) for m in shapes) if era == "v0" else len(shapes))


def kernels_per_step(model: ModelSpec, era: str = "v1") -> int:
    """Punica kernels an iteration with adapter tokens launches: kernels_per_layer x layers."""
    return model.num_layers * kernels_per_layer(model, era)


def activation_bytes(model: ModelSpec, rank: int, tp: int = 1) -> float:
    """HBM bytes the punica kernels move per adapter token and step, over every layer and wrapped module
    (the kernels are memory-bound on activations, not on the adapter weights): the shrink reads the
    layer's input once per slice (input / tp for a row-parallel layer) in the activation dtype; the
    float32 buffer of `rank` values per slice is zeroed, written by the shrink and read by the expand
    (3 x 4 B); the expand adds into the layer's output in place (add_inputs): it reads and writes each
    slice's output width per GPU (output / tp for a column-parallel layer, KV heads replicated as in
    slot_params; the whole hidden for a row-parallel one, before its all-reduce)."""
    kv_rep = max(1, model.num_kv_heads // tp) * tp / model.num_kv_heads
    total = 0.0
    for m in module_shapes(model):
        for i, (n_in, n_out) in enumerate(m.slices):
            if m.column_parallel:
                x_in, out = n_in, n_out / tp * (kv_rep if m.name == "qkv_proj" and i else 1.0)
            else:
                x_in, out = n_in / tp, n_out
            total += x_in * LORA_DTYPE_BYTES + 3 * rank * BUFFER_BYTES + 2 * out * LORA_DTYPE_BYTES
    return total * model.num_layers


def check_model(model: ModelSpec, fix: str = "remove the lora section") -> None:
    """KvsimError 'lora: <why> (<fix>)' when kvsim does not size LoRA on `model`."""
    reason = unsupported_reason(model)
    if reason is not None:
        raise KvsimError(f"lora: {reason} ({fix})")
