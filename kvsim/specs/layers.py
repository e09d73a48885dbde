"""A model's KV as layer groups: which layers keep what, and how many bytes it takes (per GPU).

One `LayerGroup` per kind of KV rule (and per per-layer size):

- `full`: MHA / GQA / MQA attention; every token's K and V in every layer of the group.
- `mla`: multi-head latent attention (DeepSeek-V2/V3); one latent per token and layer.
- `sliding`: sliding-window attention; a layer attends to the last `window` tokens (plus `sink_tokens`
  first tokens, where the model keeps sinks as KV), so only those need to stay resident.
- `state`: a recurrent layer (Mamba, linear attention): a constant-size state per sequence,
  `state_bytes`, whatever the context length.
- `compressed`: DeepSeek-V4-style compressed attention: the context is kept as entries, each standing for
  `tokens_per_entry` tokens (one `CompressedPart` per kind of entry), plus a fixed per-sequence state
  (`state_bytes`: the uncompressed sliding window and the tail not yet compressible).

Byte figures are for one GPU under tensor parallelism and for all the group's layers together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GROUP_KINDS = ("full", "mla", "sliding", "state", "compressed")
"""The layer-group kinds, in the order `ModelSpec.layer_groups()` lists them."""


@dataclass(frozen=True, slots=True)
class CompressedPart:
    """One kind of compressed entry of a `compressed` group: an entry stands for `tokens_per_entry`
    consecutive tokens and takes `bytes_per_entry` bytes over all the group's layers (one GPU)."""

    name: str
    tokens_per_entry: int
    bytes_per_entry: float


@dataclass(frozen=True, slots=True)
class LayerGroup:
    """The layers of one model that keep KV by the same rule and with the same per-layer size.

    kind: one of GROUP_KINDS. layers: their indices in the model (0-based). bytes_per_token: KV bytes one
    token adds over all the group's layers (full, mla, sliding; 0 for state). state_bytes: fixed bytes per
    sequence over all the layers (state; compressed: its state cache). window / sink_tokens: sliding only.
    parts: compressed only.
    """

    kind: str
    layers: tuple[int, ...]
    bytes_per_token: float = 0.0
    state_bytes: float = 0.0
    window: int | None = None
    sink_tokens: int = 0
    parts: tuple[CompressedPart, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in GROUP_KINDS:
            raise ValueError(f"layer group kind must be one of {', '.join(GROUP_KINDS)}, got {self.kind!r}")
        if not self.layers:
            raise ValueError("a layer group holds at least one layer")
        if (self.kind == "sliding") != (self.window is not None):
            raise ValueError("a window is given exactly for sliding groups")
        if (self.kind == "compressed") != bool(self.parts):
            raise ValueError("compressed parts are given exactly for compressed groups")

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
        if self.kind in ("full", "mla"):
            return context
        if self.kind == "sliding":
            return min(context, self.window + self.sink_tokens)
        return 0

    def kv_bytes(self, context: int) -> float:
        """Exact bytes this group holds for one sequence of `context` tokens."""
        if self.kind == "compressed":
            entries = sum((context // p.tokens_per_entry) * p.bytes_per_entry for p in self.parts)
            return entries + self.state_bytes
        return self.resident_tokens(context) * self.bytes_per_token + self.state_bytes

    def read_bytes(self, context: int) -> float:
        """KV bytes one decode step of a `context`-token sequence reads in this group (every resident
        entry once: full attention over the context, the window, the state, every compressed entry)."""
        return self.kv_bytes(context)
