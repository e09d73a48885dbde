"""The value object the scheduler hands to the cost model: what one engine iteration computes and moves."""

from __future__ import annotations

from typing import NamedTuple


class Batch(NamedTuple):
    """Work of one engine iteration (immutable: a NamedTuple, built once per iteration, three times
    cheaper to build than a frozen dataclass).

    prefill_tokens: new prompt tokens computed this iteration (sum of chunk sizes).
    prefill_attn_pairs: sum over prefill sequences of query-key pairs attended, i.e. for a chunk of c new
        tokens after p cached/computed ones, c * p + c * (c + 1) / 2 (causal).
    decode_seqs: sequences generating one token each.
    decode_context_tokens: sum over decode sequences of the context length attended (KV tokens read).
    decode_blocks: sum over decode sequences of KV blocks read through the block table.
    swap_in_bytes / swap_out_bytes: KV bytes moved between GPU and host memory this iteration.
    copy_blocks: blocks copied on device (copy-on-write).
    recall_bytes: KV recalled from host memory by an offload policy (kv.sparsity) on a re-read of evicted
        content; the iteration waits for it (charged serially).
    offload_bytes: KV written to host memory by an offload policy.
    kv_copy_bytes: KV bytes copied on device when token-level eviction compacts a sequence.
    decode_window_tokens: for each window cap of the KV manager (`kv.windows`: sliding-window layers'
        window - 1), the sum over decode sequences of min(context, cap).
    prefill_window_pairs: for each window cap, the (query, key) pairs the prefill chunks attend within a
        window of cap + 1 keys (the pairs of prefill_attn_pairs a sliding layer computes).
    kv_load_wait_s: KV tiers with pipelined loads: how long after the iteration starts the last KV its
        prefills load from the tiers arrives; the iteration lasts at least that long.
    prefetch_bytes: host -> GPU bytes fetched ahead of the layer that uses them (InfiniGen's per-step
        prefetch of the selected entries, kv.sparsity.policy infinigen): overlapped with the forward
        pass layer by layer, so only the part compute cannot hide adds to the iteration
        (RooflineCost.prefetch_overlap, docs/cost_model.md).
    spec_tokens: speculative decoding (docs/speculative.md): the draft tokens the decode sequences verify,
        k per sequence (SpeculativeCost.verify_batch fills it); the verify forward's linear layers compute
        decode_seqs + spec_tokens decode tokens (their KV read is in decode_context_tokens, the k lookahead
        slots included).
    lora_tokens / lora_adapters / lora_load_s: multi-LoRA (docs/lora.md): tokens of requests with an
        adapter, the distinct adapters the running requests use, and the seconds loading adapters into
        GPU slots adds before the forward pass (kvsim/lora/cost.py charges them).
    """

    num_seqs: int = 0
    prefill_seqs: int = 0
    prefill_tokens: int = 0
    prefill_attn_pairs: float = 0.0
    decode_seqs: int = 0
    decode_context_tokens: int = 0
    decode_blocks: int = 0
    swap_in_bytes: float = 0.0
    swap_out_bytes: float = 0.0
    copy_blocks: int = 0
    recall_bytes: float = 0.0
    offload_bytes: float = 0.0
    kv_copy_bytes: float = 0.0
    decode_window_tokens: tuple[int, ...] = ()
    prefill_window_pairs: tuple[float, ...] = ()
    kv_load_wait_s: float = 0.0
    prefetch_bytes: float = 0.0
    spec_tokens: int = 0
    lora_tokens: int = 0
    lora_adapters: int = 0
    lora_load_s: float = 0.0

    @property
    def num_tokens(self) -> int:
        return self.prefill_tokens + self.decode_seqs + self.spec_tokens


PREFILL_SEQS, PREFILL_TOKENS, DECODE_SEQS, DECODE_CONTEXT_TOKENS, SPEC_TOKENS = (
    Batch._fields.index(f) for f in ("prefill_seqs", "prefill_tokens", "decode_seqs", "decode_context_tokens",
                                     "spec_tokens"))
"""Positions of Batch fields the cost model reads each iteration as `batch[POSITION]` (Python ints: an
object index takes a tuple subclass's mapping slot, tuple's own subscript; a C integer index would take
its sequence slot, which a Python subclass of tuple routes through a Python-level __getitem__ call)."""
