"""Attention work of one iteration, summed over a model's layer groups: the KV bytes decode reads and the
FLOPs prefill attention does.

- full / MLA layers: decode reads every context token's KV; prefill attends every causal pair.
- sliding layers (window W): decode reads min(context, W - 1) tokens (plus the new one's, written), and
  prefill attends only pairs within the window (Batch.decode_window_tokens / prefill_window_pairs, per
  window cap of kvsim.specs.layers.window_caps).
- state layers: decode reads and writes the whole state once per sequence; the recurrent update's FLOPs
  are per token (kvsim/specs/compute.py state_flops_per_token) and go with prefill and decode alike.
- compressed layers (DeepSeek-V4): decode reads each part's entries, context / tokens_per_entry, or for
  a part read through a top-k selection at most topk of them (a cap of topk x tokens_per_entry tokens),
  plus the whole state cache (the uncompressed window); prefill attends the pairs over entries (pairs /
  tokens_per_entry, capped the same way) plus the window's pairs.

A model with a single full or MLA group takes the classic formulas (context tokens x KV bytes per token;
pairs x FLOPs per pair), so its iteration times are exactly what they were before layer groups. Each
kind's terms are its GroupKind.add_attention (kvsim/specs/kinds.py).
"""

from __future__ import annotations

from kvsim.cost.batch import Batch
from kvsim.specs import compute
from kvsim.specs.kinds import AttentionTerms
from kvsim.specs.layers import LayerGroup, window_caps
from kvsim.specs.model import ModelSpec


class AttentionWork:
    """Per-iteration attention bytes and FLOPs for one model, KV precision and tensor-parallel size.

    Coefficients: ctx_* multiply the summed context (decode_context_tokens / prefill_attn_pairs),
    window_*[i] the sums at window cap i, seq_bytes the decode sequences, token_flops the batch's tokens."""

    __slots__ = ("grouped", "kv_bytes_per_token", "flops_per_pair", "ctx_bytes", "window_bytes", "seq_bytes",
                 "ctx_flops", "window_flops", "token_flops", "attention_layers")

    def __init__(self, model: ModelSpec, kv_dtype, tp: int, group: LayerGroup | None = None,
                 caps: tuple[int, ...] | None = None) -> None:
        """The whole model's work, or with `group` (and the model's window `caps`) that layer group's
        alone, always by the per-group terms (the kernel model's roofline per layer kind)."""
        groups = model.layer_groups(kv_dtype, tp) if group is None else [group]
        caps = window_caps(groups) if caps is None else caps
        self.kv_bytes_per_token = model.kv_bytes_per_token(kv_dtype, tp)
        self.flops_per_pair = model.attention_flops_per_pair(tp)
        self.grouped = group is not None or not (len(groups) == 1 and groups[0].kind_spec.full_context)
        terms = AttentionTerms(len(caps))
        pair = compute.layer_pair_flops(model, tp)
        for g in groups:
            g.kind_spec.add_attention(terms, model, g, caps, pair, tp)
        self.ctx_bytes = terms.ctx_bytes
        self.window_bytes = terms.window_bytes
        self.seq_bytes = terms.seq_bytes
        self.ctx_flops = terms.ctx_flops
        self.window_flops = terms.window_flops
        self.token_flops = terms.token_flops
        self.attention_layers = terms.attention_layers

    def decode_bytes(self, b: Batch) -> float:
        """KV bytes the iteration's decode attention reads."""
        if not self.grouped:
            return b.decode_context_tokens * self.kv_bytes_per_token
        total = self.ctx_bytes * b.decode_context_tokens + self.seq_bytes * b.decode_seqs
        for coeff, tokens in zip(self.window_bytes, b.decode_window_tokens, strict=False):
            total += coeff * tokens
        return total

    def prefill_flops(self, b: Batch, tokens: int | None = None) -> float:
        """FLOPs of the iteration's prefill attention (and of state layers' updates, for every token of
        the batch, or for `tokens` of them)."""
        if not self.grouped:
            return self.flops_per_pair * b.prefill_attn_pairs
        if tokens is None:
            tokens = b.prefill_tokens + b.decode_seqs
        total = self.ctx_flops * b.prefill_attn_pairs + self.token_flops * tokens
        for coeff, pairs in zip(self.window_flops, b.prefill_window_pairs, strict=False):
            total += coeff * pairs
        return total
