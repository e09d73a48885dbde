"""The draft of a speculative-decoding run: what it adds to the GPU's memory (weights, KV per token) and the
model spec its forwards are costed with.

- ngram: prompt lookup on the CPU: nothing on the GPU.
- draft_model: the `speculative.model` spec as it is: its weights and its KV per token (every layer).
- eagle (EAGLE-1): one decoder layer of the target's shape plus fc (2h x h, over the token embedding and
  the target's last hidden state), sharing the target's embedding and LM head: new weights = layer + fc,
  KV of one layer.
- eagle3: one decoder layer whose q/k/v projections take 2h (embedding and fused hidden state), fc over 3
  concatenated hidden states (3h x h) and its own LM head over a draft vocabulary of 32,000 tokens (the
  published EAGLE-3 heads: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B has draft_vocab_size 32000): new weights =
  layer + fc + LM head, KV of one layer. vLLM applies the fc once per step, to the target's hidden states
  before the first draft forward (`combine_hidden_states`); the later forwards take the draft's own
  hidden state (h): the first forward is costed with the fc, the later ones (`step_spec`) without.
- mtp: the target's `mtp_layers` MTP modules (DeepSeek-V3: num_nextn_predict_layers = 1), each one decoder
  layer of the target (its routed experts included) plus eh_proj (2h x h), sharing the embedding and LM
  head: new weights = mtp_layers x (layer + eh_proj), KV of mtp_layers layers; each draft forward runs one
  module (draft step i runs module i, vLLM reusing the last when k is larger), so its forward is costed as
  one layer + eh_proj + LM head.

A target layer's parameters are the per-layer average of the spec's counts: active per layer =
(active_params - embedding - LM head) / layers, plus, for an MoE model, its (experts - top-k) idle
experts (ModelSpec.expert_params) in the total. With `speculative.model` set for eagle / eagle3 / mtp, that
spec is the head (its weights and KV whole, as draft_model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kvsim.errors import KvsimError
from kvsim.specs.dtypes import DTYPE_BYTES
from kvsim.specs.model import ModelSpec
from kvsim.speculative.config import SpeculativeConfig

EAGLE3_DRAFT_VOCAB = 32_000
"""Draft vocabulary of the published EAGLE-3 heads (config.json `draft_vocab_size`)."""


@dataclass(frozen=True, slots=True)
class Draft:
    """The draft of one replica configuration (per GPU under tensor parallelism)."""

    method: str
    k: int
    spec: ModelSpec | None
    """The spec the draft's forwards are costed with (None: ngram, no GPU work)."""
    weight_bytes: float
    """Weight bytes the draft adds on each GPU (shared embedding / LM head not counted again)."""
    kv_bytes_per_token: float
    """KV bytes per token of the draft's own layers on each GPU (in every block, beside the target's)."""
    kv_layers: int
    params: float
    """Parameters the draft adds (all GPUs together)."""
    derived: bool
    """True when the head was derived from the target (no `speculative.model`)."""
    step_spec: ModelSpec | None = None
    """The spec draft forwards 2..k are costed with, when not `spec` (eagle3: without the fc)."""


def _layer_params(target: ModelSpec) -> tuple[float, float]:
    """(total, active) parameters of one decoder layer of the target (module docstring)."""
    lookup = target.vocab_size * target.hidden_size
    head = 0 if target.tie_word_embeddings else lookup
    active = max(0.0, (target.active_params - lookup - head) / target.num_layers)
    total = active
    if target.routes_experts:
        total += (target.num_experts - target.experts_per_token) * target.expert_params
    return total, active


def _head_spec(target: ModelSpec, name: str, layers: int, total: float, active: float,
               vocab: int) -> ModelSpec:
    """A spec of `layers` target-shaped layers holding `total` (`active`) parameters besides an input
    embedding and an LM head of `vocab` rows (the lookup is not streamed; the head is)."""
    table = 2.0 * vocab * target.hidden_size
    return replace(target, name=name, num_layers=layers, vocab_size=vocab,
                   num_params=max(1, round(total + table)), active_params=max(1, round(active + table)),
                   layer_types=(), moe_layers=(), sliding_window=None, sliding_window_layers=0,
                   compress_ratios=(), tie_word_embeddings=False, source=f"{target.name}: {name} (derived)")


def build_draft(cfg: SpeculativeConfig, target: ModelSpec, kv_dtype: Any, tp: int,
                draft_model: ModelSpec | None = None) -> Draft:
    """The Draft of a `speculative` section for `target` under tensor parallelism `tp` (the draft runs at
    the target's TP, vLLM's default). `draft_model`: the resolved `speculative.model`, if given."""
    method, k = cfg.method, cfg.num_speculative_tokens
    if method == "ngram":
        return Draft(method, k, None, 0.0, 0.0, 0, 0.0, False)
    if draft_model is not None:
        try:
            draft_model.validate_tp(tp)
        except KvsimError as exc:
            raise KvsimError(f"speculative.model: {exc}") from None
        kinds = {g.kind for g in draft_model.layer_groups(kv_dtype, tp)}
        if not kinds <= {"full", "mla"}:
            raise KvsimError(f"speculative.model: {draft_model.name} keeps KV in {'/'.join(sorted(kinds))} "
                             "layer groups; a draft of full or MLA attention only is modelled")
        return Draft(method, k, draft_model, draft_model.weight_bytes(tp),
                     draft_model.kv_bytes_per_token(kv_dtype, tp), draft_model.num_layers,
                     float(draft_model.num_params), False)
    h = target.hidden_size
    total, active = _layer_params(target)
    per_layer_kv = target.kv_bytes_per_token(kv_dtype, tp) / target.num_layers
    if method == "eagle":
        layers, extra, vocab, own_head = 1, 2.0 * h * h, target.vocab_size, 0.0
    elif method == "eagle3":
        q_kv = h * (target.num_attention_heads + 2 * target.num_kv_heads) * target.head_dim
        vocab = min(EAGLE3_DRAFT_VOCAB, target.vocab_size)
        layers, extra, own_head = 1, q_kv + 3.0 * h * h, float(vocab * h)
    else:  # mtp
        layers, extra, vocab, own_head = cfg.mtp_layers, cfg.mtp_layers * 2.0 * h * h, target.vocab_size, 0.0
    # each draft forward runs one layer: the head's, or one MTP module (draft step i runs module i)
    per_forward = extra / layers
    spec = _head_spec(target, method, 1, total + per_forward, active + per_forward, vocab)
    step_spec = None
    if method == "eagle3":  # the fc (3h x h) runs once per step, with the first forward
        step_spec = _head_spec(target, method, 1, total + q_kv, active + q_kv, vocab)
    params = layers * total + extra + own_head
    weight = params * DTYPE_BYTES[target.weight_dtype] / tp
    return Draft(method, k, spec, weight, layers * per_layer_kv, layers, params, True, step_spec)
