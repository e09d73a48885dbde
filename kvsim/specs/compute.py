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

if TYPE_CHECKING:
    from kvsim.specs.model import ModelSpec

ATTENTION_GROUP_KINDS = ("full", "mla", "sliding", "compressed")


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
    layers too), or every attention layer for None."""
    by_kind = m.layers_by_kind()
    counts = {"full": len(by_kind.get("full", ())), "state": len(by_kind.get("state", ()))}
    sliding = len(by_kind.get("sliding", ()))
    if "compressed" in by_kind:
        counts["compressed"] = len(by_kind["compressed"]) + sliding
    else:
        counts["sliding"] = sliding
    if kind is None:
        return sum(v for k, v in counts.items() if k != "state")
    if kind in ("full", "mla"):
        return counts["full"]
    if kind == "state":
        return 0
    return counts.get(kind, 0)


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


def prefill_attention_flops(m: ModelSpec, start: int, chunk: int, tp: int) -> dict[str, float]:
    """Group kind -> FLOPs of a prefill chunk (module docstring)."""
    if start < 0 or chunk < 0:
        raise ValueError("start and chunk must be >= 0")
    f = layer_pair_flops(m, tp)
    by_kind = m.layers_by_kind()
    out: dict[str, float] = {}
    if "full" in by_kind:
        out["mla" if m.attention == "mla" else "full"] = f * len(by_kind["full"]) * causal_pairs(start, chunk)
    sliding = len(by_kind.get("sliding", ()))
    if sliding and "compressed" not in by_kind:
        out["sliding"] = f * sliding * window_pairs(start, chunk, m.sliding_window)
    if "state" in by_kind:
        out["state"] = state_flops_per_token(m, tp) * len(by_kind["state"]) * chunk
    if "compressed" in by_kind:
        out["compressed"] = _compressed_flops(m, f, start, chunk, len(by_kind["compressed"]) + sliding)
    return out


def _compressed_flops(m: ModelSpec, f: float, start: int, chunk: int, layers: int) -> float:
    total = f * layers * window_pairs(start, chunk, m.sliding_window)
    names = groups.part_names(m)
    for ratio, n in groups.compressed_layer_counts(m).items():
        if names[ratio] == "csa":
            total += f * n * entry_pairs(start, chunk, ratio, m.index_topk)
            total += 2.0 * m.index_num_heads * m.index_head_dim * n * entry_pairs(start, chunk, ratio)
        else:
            total += f * n * entry_pairs(start, chunk, ratio)
    return total
