"""ModelSpec -> layer groups (kvsim/specs/layers.py): which layers keep what, in bytes per GPU.

Per layer and GPU under tensor parallelism `tp`, with b(part) = KVPrecision.bytes_per_element(part):

- full (MHA / GQA / MQA): 2 * kv_heads_per_gpu * head_dim * b(rest) bytes per token (KV heads split
  over tp, replicated when tp > num_kv_heads);
- mla (DeepSeek-V2/V3): kv_lora_rank * b(rest) + qk_rope_head_dim * b(rope) bytes per token (the
  latent is replicated on every rank);
- sliding: as full (or mla), for the last sliding_window tokens;
- state (vLLM's MambaStateShapeCalculator, vllm/model_executor/layers/mamba/mamba_utils.py):
  conv state (ssm_conv_kernel - 1) * conv_dim / tp and recurrent state (ssm_num_heads / tp) *
  ssm_head_dim * ssm_state_size elements, at ssm_dtype, where conv_dim = ssm_num_heads * ssm_head_dim
  + 2 * groups * ssm_state_size. Mamba-2 (mamba2_state_shape): groups = ssm_groups, raised to tp when
  it does not divide by tp (one group is replicated to every rank); Gated DeltaNet
  (gated_delta_net_state_shape, with num_v_heads = ssm_num_heads, head_v_dim = ssm_head_dim,
  num_k_heads = ssm_groups, head_k_dim = ssm_state_size): groups = ssm_groups;
- compressed (DeepSeek-V4, replicated like MLA): one entry of kv_lora_rank * b(rest) +
  qk_rope_head_dim * b(rope) bytes per `ratio` tokens; CSA layers (the smallest ratio, when
  index_head_dim > 0) add an indexer key of index_head_dim * b(rest) bytes per entry.

One group per kind. The compressed group holds every compressed layer and, as the paper's state cache
does, the window of every sliding layer of such a model: its parts are 'csa' (the smallest ratio,
read topk = index_topk entries per layer), 'csa-indexer' (the indexer keys, all read) and 'hca' (each
larger ratio; 'hca-<ratio>' when there are several), each with bytes_per_entry summed over the layers
keeping it; its state_bytes = window * entry bytes * (all its layers) + sum over parts of
(tokens_per_entry - 1) * bytes_per_entry (the tail not yet compressible, kept uncompressed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvsim.specs.dtypes import DTYPE_BYTES
from kvsim.specs.kinds import KINDS
from kvsim.specs.kv_precision import KVPrecision
from kvsim.specs.layers import CompressedPart, LayerGroup

if TYPE_CHECKING:
    from kvsim.specs.model import ModelSpec


def token_bytes_per_layer(m: ModelSpec, p: KVPrecision, tp: int) -> float:
    """KV bytes one token adds to one attention layer on one GPU (full, mla and sliding layers)."""
    if m.attention == "mla":
        return m.kv_lora_rank * p.bytes_per_element("rest") + m.qk_rope_head_dim * p.bytes_per_element("rope")
    return 2 * m.kv_heads_per_gpu(tp) * m.head_dim * p.bytes_per_element("rest")


def state_elements_per_layer(m: ModelSpec, tp: int) -> tuple[float, float]:
    """(conv state, recurrent state) elements one state layer keeps per sequence on one GPU."""
    heads, hd, n, k = m.ssm_num_heads, m.ssm_head_dim, m.ssm_state_size, m.ssm_conv_kernel
    g = m.ssm_groups
    if m.ssm_kind == "mamba2" and g % tp:
        g += tp - g  # vLLM extra_groups_for_head_shards: one group replicated to every rank
    conv_dim = heads * hd + 2 * g * n
    return (k - 1) * conv_dim / tp, heads / tp * hd * n


def state_dtype_bytes(m: ModelSpec) -> float:
    """Bytes per state element: ssm_dtype, or for 'auto' the activation dtype (weight_dtype when it is
    fp32/fp16/bf16, else bf16)."""
    if m.ssm_dtype != "auto":
        return DTYPE_BYTES[m.ssm_dtype]
    return DTYPE_BYTES[m.weight_dtype] if m.weight_dtype in ("fp32", "fp16", "bf16") else 2


def state_bytes_per_layer(m: ModelSpec, tp: int) -> float:
    conv, temporal = state_elements_per_layer(m, tp)
    return (conv + temporal) * state_dtype_bytes(m)


def layer_groups(m: ModelSpec, p: KVPrecision, tp: int) -> tuple[LayerGroup, ...]:
    """The groups of ModelSpec.layer_groups(), in GROUP_KINDS order: each kind's `build`
    (kvsim/specs/kinds.py) over the formulas of this module (see the module docstring)."""
    m.kv_heads_per_gpu(tp)  # checks tp
    by_kind = m.layers_by_kind()
    per_token = token_bytes_per_layer(m, p, tp)
    built = (kind.build(m, p, tp, by_kind, per_token) for kind in KINDS.values())
    return tuple(g for g in built if g is not None)


def compressed_layer_counts(m: ModelSpec) -> dict[int, int]:
    """Compress ratio -> number of layers at it (ratio > 0), ascending."""
    counts: dict[int, int] = {}
    for r in m.compress_ratios:
        if r:
            counts[r] = counts.get(r, 0) + 1
    return dict(sorted(counts.items()))


def part_names(m: ModelSpec) -> dict[int, str]:
    """Compress ratio -> part name: 'csa' for the smallest ratio when the model has an indexer, 'hca' for
    the other one (or 'hca-<ratio>' for each of several)."""
    ratios = list(compressed_layer_counts(m))
    csa = ratios[0] if m.index_head_dim else None
    others = [r for r in ratios if r != csa]
    names = {r: ("hca" if len(others) == 1 else f"hca-{r}") for r in others}
    if csa is not None:
        names[csa] = "csa"
    return names


def compressed_group(m: ModelSpec, p: KVPrecision, compressed, sliding, kind: str) -> LayerGroup:
    """The `kind` (compressed) group of m's compressed and sliding layers (see the module docstring)."""
    entry = m.kv_lora_rank * p.bytes_per_element("rest") + m.qk_rope_head_dim * p.bytes_per_element("rope")
    index_entry = m.index_head_dim * p.bytes_per_element("rest")
    names = part_names(m)
    parts = []
    for ratio, n in compressed_layer_counts(m).items():
        if names[ratio] == "csa":
            parts.append(CompressedPart("csa", ratio, entry * n, topk=m.index_topk))
            parts.append(CompressedPart("csa-indexer", ratio, index_entry * n))
        else:
            parts.append(CompressedPart(names[ratio], ratio, entry * n))
    layers = tuple(sorted((*compressed, *sliding)))
    window = m.sliding_window
    state = window * entry * len(layers) + sum((q.tokens_per_entry - 1) * q.bytes_per_entry for q in parts)
    return LayerGroup(kind, layers, state_bytes=state, window=window, parts=tuple(parts))
