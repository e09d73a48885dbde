"""Attention FLOPs per layer group (ModelSpec.attention_flops_per_pair / prefill_attention_flops /
decode_attention_flops), on one GPU under tensor parallelism.

F = layer_pair_flops(m, tp), the FLOPs of one (query, key) pair in one layer (see
ModelSpec.attention_flops_per_pair). A query at 1-based position i (it attends to itself and the i - 1
tokens before it) attends in a

- full / mla layer: i keys;
- sliding layer (window W): min(i, W) keys;
- compressed layer (DeepSeek-V4) at ratio r: min(i, W) window keys plus floor(i / r) entries, at most
  index_topk for CSA layers; CSA layers also score every one of their floor(i / r) entries with the
  indexer, 2 * index_num_heads * index_head_dim FLOPs each (index heads are replicated, not split);
  the compressed group's sliding-only layers attend to min(i, W) keys;
- state layer: no pairs; per token 4 * recurrent-state elements (update and read-out, one multiply-add
  each) + 2 * ssm_conv_kernel * conv_dim / tp (the causal conv), per GPU.

A prefill chunk of `chunk` tokens after `start` cached ones sums these over i = start + 1 .. start + chunk
(full: chunk * start + chunk * (chunk + 1) / 2 pairs), times F and the group's layer count. Decode is the
chunk of one token at i = context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvsim.specs import groups
from kvsim.specs.kinds import KINDS

if TYPE_CHECKING:
    from kvsim.specs.model import ModelSpec


def layer_pair_flops(m: ModelSpec, tp: int) -> float:
    """FLOPs of one (query, key) pair in one attention layer on one GPU."""
    m.kv_heads_per_gpu(tp)  # checks tp
    heads = m.num_attention_heads / tp
    if m.compress_ratios:
        return 2.0 * heads * ((m.kv_lora_rank + m.qk_rope_head_dim) + m.head_dim)
    if m.attention == "mla":
        return 2.0 * heads * (2 * m.head_dim + m.qk_rope_head_dim)
    return 4.0 * heads * m.head_dim


def attention_layers(m: ModelSpec, kind: str | None = None) -> int:
    """Layers of group kind `kind` ('full' and 'mla' alike; the compressed group counts its sliding
    layers too), or every attention layer for None (state layers have none)."""
    gs = m.layer_groups()
    if kind is None:
        return sum(g.num_layers for g in gs if g.kind_spec.attends)
    want = KINDS.get(kind)
    if want is None or not want.attends:
        return 0
    return sum(g.num_layers for g in gs if g.kind == kind or want.full_context and g.kind_spec.full_context)


def causal_pairs(start: int, chunk: int) -> float:
    """sum_{i=start+1}^{start+chunk} i."""
    return chunk * start + chunk * (chunk + 1) / 2


def window_pairs(start: int, chunk: int, window: int) -> float:
    """sum_{i=start+1}^{start+chunk} min(i, window)."""
    return _capped(start + chunk, window) - _capped(start, window)


def _capped(n: int, w: int) -> float:
    """sum_{i=1}^{n} min(i, w)."""
    return n * (n + 1) / 2 if n <= w else w * (w + 1) / 2 + (n - w) * w


def entry_pairs(start: int, chunk: int, ratio: int, topk: int = 0) -> float:
    """sum_{i=start+1}^{start+chunk} floor(i / ratio), each term capped at topk when topk > 0."""
    return _entries(start + chunk, ratio, topk) - _entries(start, ratio, topk)


def _entries(n: int, r: int, topk: int) -> float:
    """sum_{i=1}^{n} min(floor(i / r), topk or infinity)."""
    if topk:
        last = (topk + 1) * r - 1  # the last i with floor(i / r) <= topk
        if n > last:
            return _entries(last, r, 0) + topk * (n - last)
    q = n // r
    return r * q * (q - 1) / 2 + q * (n - q * r + 1)


def state_flops_per_token(m: ModelSpec, tp: int) -> float:
    """FLOPs of one token in one state layer on one GPU (see the module docstring)."""
    conv, temporal = groups.state_elements_per_layer(m, tp)
    kernel = m.ssm_conv_kernel
    conv_dim = conv / (kernel - 1) if kernel > 1 else 0.0
    return 4.0 * temporal + 2.0 * kernel * conv_dim


def prefill_attention_flops(m: ModelSpec, start: int, chunk: int, tp: int = 1) -> dict[str, float]:
    """Group kind -> FLOPs of a prefill chunk (module docstring; each kind's GroupKind.prefill_flops)."""
    if start < 0 or chunk < 0:
        raise ValueError("start and chunk must be >= 0")
    f = layer_pair_flops(m, tp)
    return {g.kind: g.kind_spec.prefill_flops(m, g, f, start, chunk, tp) for g in m.layer_groups(tp=tp)}
