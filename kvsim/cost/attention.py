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
pairs x FLOPs per pair), so its iteration times are exactly what they were before layer groups.
"""

from __future__ import annotations

from kvsim.cost.batch import Batch
from kvsim.specs import compute, groups
from kvsim.specs.layers import window_caps
from kvsim.specs.model import ModelSpec


class AttentionWork:
    """Per-iteration attention bytes and FLOPs for one model, KV precision and tensor-parallel size.

    Coefficients: ctx_* multiply the summed context (decode_context_tokens / prefill_attn_pairs),
    window_*[i] the sums at window cap i, seq_bytes the decode sequences, token_flops the batch's tokens."""

    __slots__ = ("grouped", "kv_bytes_per_token", "flops_per_pair", "ctx_bytes", "window_bytes", "seq_bytes",
                 "ctx_flops", "window_flops", "token_flops", "attention_layers")

    def __init__(self, model: ModelSpec, kv_dtype, tp: int) -> None:
        groups = model.layer_groups(kv_dtype, tp)
        caps = window_caps(groups)
        self.kv_bytes_per_token = model.kv_bytes_per_token(kv_dtype, tp)
        self.flops_per_pair = model.attention_flops_per_pair(tp)
        self.grouped = not (len(groups) == 1 and groups[0].kind in ("full", "mla"))
        pair = compute.layer_pair_flops(model, tp)
        self.ctx_bytes = 0.0
        self.window_bytes = [0.0] * len(caps)
        self.seq_bytes = 0.0
        self.ctx_flops = 0.0
        self.window_flops = [0.0] * len(caps)
        self.token_flops = 0.0
        self.attention_layers = 0
        for g in groups:
            if g.kind in ("full", "mla"):
                self.ctx_bytes += g.bytes_per_token
                self.ctx_flops += pair * g.num_layers
                self.attention_layers += g.num_layers
            elif g.kind == "sliding":
                i = caps.index(max(g.window - 1, 0))
                self.window_bytes[i] += g.bytes_per_token
                self.window_flops[i] += pair * g.num_layers
                self.attention_layers += g.num_layers
            elif g.kind == "state":
                self.seq_bytes += 2 * g.state_bytes  # read and written back each step
                self.token_flops += compute.state_flops_per_token(model, tp) * g.num_layers
            else:
                self._compressed(model, g, caps, pair)

    def _compressed(self, model: ModelSpec, g, caps: tuple[int, ...], pair: float) -> None:
        """A DeepSeek-V4 group: decode reads each part's entries (a top-k part at most topk of them) and the
        state cache; prefill attends the window's pairs over every layer of the group, each part's entry
        pairs over the layers keeping it (kvsim/specs/compute.py), and the CSA indexer scores every entry."""
        self.seq_bytes += g.state_bytes
        self.attention_layers += g.num_layers
        if g.window:
            self.window_flops[caps.index(max(g.window - 1, 0))] += pair * g.num_layers
        names = groups.part_names(model)
        layers_of = {names[r]: n for r, n in groups.compressed_layer_counts(model).items()}
        for p in g.parts:
            per_token = p.bytes_per_entry / p.tokens_per_entry
            if p.name == "csa-indexer":  # keys scored by the indexer's heads, every entry, no top-k cap
                score = 2.0 * model.index_num_heads * model.index_head_dim * layers_of["csa"]
                self.ctx_bytes += per_token
                self.ctx_flops += score / p.tokens_per_entry
                continue
            flops = pair * layers_of[p.name] / p.tokens_per_entry
            if p.topk:
                i = caps.index(p.topk * p.tokens_per_entry)
                self.window_bytes[i] += per_token
                self.window_flops[i] += flops
            else:
                self.ctx_bytes += per_token
                self.ctx_flops += flops

    def decode_bytes(self, b: Batch) -> float:
        """KV bytes the iteration's decode attention reads."""
        if not self.grouped:
            return b.decode_context_tokens * self.kv_bytes_per_token
        total = self.ctx_bytes * b.decode_context_tokens + self.seq_bytes * b.decode_seqs
        for coeff, tokens in zip(self.window_bytes, b.decode_window_tokens, strict=False):
            total += coeff * tokens
        return total

    def prefill_flops(self, b: Batch) -> float:
        """FLOPs of the iteration's prefill attention (and of state layers' updates, for every token)."""
        if not self.grouped:
            return self.flops_per_pair * b.prefill_attn_pairs
        total = self.ctx_flops * b.prefill_attn_pairs + self.token_flops * (b.prefill_tokens + b.decode_seqs)
        for coeff, pairs in zip(self.window_flops, b.prefill_window_pairs, strict=False):
            total += coeff * pairs
        return total
