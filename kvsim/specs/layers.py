"""A model's KV as layer groups: which layers keep what, and how many bytes it takes (per GPU).

One `LayerGroup` per kind of KV rule (and per per-layer size):

- `full`: MHA / GQA / MQA attention; every token's K and V in every layer of the group.
- `mla`: multi-head latent attention (DeepSeek-V2/V3); one latent per token and layer.
- `sliding`: sliding-window attention; a layer attends to the last `window` tokens (plus `sink_tokens`
  first tokens, where the model keeps sinks as KV), so only those need to stay resident. gpt-oss's
  attention sinks are learned per-head logits, not tokens: they need no KV (sink_tokens 0).
- `state`: a recurrent layer (Mamba, linear attention): a constant-size state per sequence,
  `state_bytes`, whatever the context length.
- `compressed`: DeepSeek-V4-style compressed attention: the context is kept as entries, each standing for
  `tokens_per_entry` tokens (one `CompressedPart` per kind of entry), plus a fixed per-sequence state
  (`state_bytes`: the uncompressed sliding window and the tail not yet compressible).

Byte figures are for one GPU under tensor parallelism and for all the group's layers together. Each
kind's rules are its class in kvsim/specs/kinds.py (`LayerGroup.kind_spec`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from kvsim.specs.kinds import KINDS, GroupKind

GROUP_KINDS = tuple(KINDS)
"""The layer-group kinds, in the order `ModelSpec.layer_groups()` lists them."""


@dataclass(frozen=True, slots=True)
class CompressedPart:
    """One kind of compressed entry of a `compressed` group: an entry stands for `tokens_per_entry`
    consecutive tokens and takes `bytes_per_entry` bytes over all the group's layers (one GPU) that keep
    this part. topk: at most this many entries of the part are read per layer and decode step (DeepSeek-V4
    CSA: the indexer's top-k selection, `index_topk`); 0 means every entry is read (HCA, the indexer keys)."""

    name: str
    tokens_per_entry: int
    bytes_per_entry: float
    topk: int = 0

    def entries(self, context: int) -> int:
        """Complete entries of a `context`-token sequence (the tail not yet compressible is in the state)."""
        return context // self.tokens_per_entry

    def read_entries(self, context: int) -> int:
        """Entries one decode step reads (per layer keeping the part): all, or at most topk."""
        n = self.entries(context)
        return min(n, self.topk) if self.topk else n


@dataclass(frozen=True, slots=True)
class LayerGroup:
    """The layers of one model that keep KV by the same rule and with the same per-layer size.

    kind: one of GROUP_KINDS. layers: their indices in the model (0-based; a tuple, or a range for a
    contiguous run). bytes_per_token: KV bytes one token adds over all the group's layers (full, mla,
    sliding; 0 for state and compressed). state_bytes: fixed bytes per sequence over all the layers (state:
    the recurrent + conv state; compressed: its state cache, the uncompressed window and the tail not yet
    compressible). window: sliding (the tokens attended), or compressed (the uncompressed window its state
    cache holds, informational); sink_tokens: sliding only. parts: compressed only. kind_spec: the kind's
    object (KINDS[kind]), set at construction.
    """

    kind: str
    layers: Sequence[int]
    bytes_per_token: float = 0.0
    state_bytes: float = 0.0
    window: int | None = None
    sink_tokens: int = 0
    parts: tuple[CompressedPart, ...] = ()
    kind_spec: GroupKind = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        spec = KINDS.get(self.kind)
        if spec is None:
            raise ValueError(f"layer group kind must be one of {', '.join(GROUP_KINDS)}, got {self.kind!r}")
        if not self.layers:
            raise ValueError("a layer group holds at least one layer")
        spec.check(self)
        object.__setattr__(self, "kind_spec", spec)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def layer_bytes_per_token(self) -> float:
        """KV bytes per token of one layer of the group (the `kv hidden size` of vLLM's page sizing)."""
        return self.bytes_per_token / len(self.layers)

    @property
    def layer_state_bytes(self) -> float:
        return self.state_bytes / len(self.layers)

    @property
    def tokens_per_block_unit(self) -> int:
        """Compressed groups: tokens one block must span so that it holds whole entries of every part
        (the lcm of the parts' tokens_per_entry); 1 for other kinds."""
        return math.lcm(*(p.tokens_per_entry for p in self.parts)) if self.parts else 1

    def resident_tokens(self, context: int) -> int:
        """Tokens of a `context`-token sequence whose KV this group must hold (full, mla: all; sliding:
        the last `window` plus the sinks; state and compressed hold no per-token KV beyond their state)."""
        return self.kind_spec.resident_tokens(self, context)

    def kv_bytes(self, context: int) -> float:
        """Exact bytes this group holds for one sequence of `context` tokens."""
        return self.kind_spec.kv_bytes(self, context)

    def read_bytes(self, context: int) -> float:
        """KV bytes one decode step of a `context`-token sequence reads in this group: every resident token
        once (full attention: the context; sliding: the window), the whole state, and of a compressed group
        every entry of each part, or its topk entries per layer, plus the state cache."""
        return self.kind_spec.read_bytes(self, context)


def window_caps(groups) -> tuple[int, ...]:
    """The distinct token caps of the layer groups' reads, ascending: a sliding (or a compressed group's
    uncompressed) window - 1 (the earlier tokens the next token attends to) and, for a compressed part
    read through a top-k selection, topk x tokens_per_entry (beyond it a step reads topk entries,
    whatever the context). The order of the scheduler's windowed sums (ContextSums.windowed) and of
    Batch.decode_window_tokens / prefill_window_pairs."""
    return tuple(sorted({cap for g in groups for cap in g.kind_spec.caps(g)}))
