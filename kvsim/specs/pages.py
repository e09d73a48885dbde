"""How a model's layer groups share one KV pool of equal-size pages (vLLM's hybrid KV cache manager).

The pool is cut into pages of one size. Layers are split into *cache groups*: each holds layers of one
layer group (so they need the same pages for a request) and every cache group is sized for the same
number of layers, `layers_per_group` = the smallest layer count among the model's layer groups; a
layer group whose count is not a multiple of it gets a last cache group padded with empty layer slots
(Gemma-3-27B: 52 sliding + 10 full layers -> 10 per group: 1 full group, 6 sliding groups, the last with
2 layers and 8 padding). One page then holds `block_size` tokens of KV for `layers_per_group` layers:

    page_bytes = layers_per_group x block_size x (largest per-layer KV bytes per token)

Groups whose layers are smaller than the largest are padded to it too. A page of a `state` group holds
one layer slot's state per layer; where the states are larger than an attention page the attention
block size is raised (in steps of the requested block size) until one page holds one state, as vLLM
does. A `compressed` group's pages span the lcm of its entry ratios in tokens (DeepSeek-V4's block cache);
its fixed per-sequence state (the sliding window and the uncompressed tail) takes whole pages.

With a single full-attention (or MLA) group and no padding, the plan is the classic one: page_bytes =
block_size x KV bytes per token, one page per block of tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvsim.errors import KvsimError
from kvsim.specs.layers import LayerGroup

MAX_CACHE_GROUPS = 65536
"""Most cache groups a plan may have (a spec of 10**9 full layers and one sliding layer would need 10**9)."""


@dataclass(frozen=True, slots=True)
class CacheGroup:
    """One cache group: `padded_layers` layer slots of one layer group, `layers` of them real.

    kind, window, sink_tokens: the layer group's rule. state_pages: pages one sequence's state takes
    (state and compressed groups; 0 otherwise). real_fraction: the share of a page's bytes that holds KV
    of a real layer (1 without padding)."""

    kind: str
    layers: tuple[int, ...]
    padded_layers: int
    window: int | None
    sink_tokens: int
    state_pages: int
    real_fraction: float
    source: LayerGroup

    @property
    def grows(self) -> bool:
        """Whether the group's pages follow the context (token-paged) rather than a fixed state."""
        return self.source.kind_spec.token_paged


@dataclass(frozen=True, slots=True)
class PagePlan:
    """The page layout of one model's KV on one GPU: every cache group, the page size in bytes and the
    tokens one page of a token-paged group spans."""

    groups: tuple[CacheGroup, ...]
    block_size: int
    page_bytes: float
    layers_per_group: int

    @property
    def single(self) -> bool:
        """One full-attention (or MLA) group without padding: the classic paged layout."""
        return (len(self.groups) == 1 and self.groups[0].source.kind_spec.full_context
                and self.groups[0].real_fraction == 1.0)

    def pages(self, context: int) -> int:
        """Pages one sequence of `context` tokens holds (its last token's KV written)."""
        bs = self.block_size
        return sum(g.source.kind_spec.pages(g, bs, context) for g in self.groups)

    def pages_during_prefill(self, prompt: int, chunk: int) -> int:
        """Most pages one sequence holds while its prompt is computed in chunks of at most `chunk` tokens:
        every block of the prompt in a full / MLA / compressed group; in a sliding group the blocks of a
        chunk and of the window before it (it trims only when it grows again), never more than the
        prompt's; plus the states."""
        bs = self.block_size
        blocks = -(-prompt // bs)
        total = 0
        for g in self.groups:
            total += g.source.kind_spec.prefill_pages(g, bs, blocks, prompt, chunk)
        return total

    def real_bytes(self, context: int) -> float:
        """Bytes of real KV one sequence of `context` tokens holds (no padding, no unfilled slots)."""
        return sum(g.source.kv_bytes(context) * len(g.layers) / g.source.num_layers for g in self.groups)


def group_pages(g: CacheGroup, block_size: int, context: int) -> int:
    """Pages one cache group holds for a sequence of `context` tokens: full / mla / compressed every block
    touched; sliding the blocks from the one holding token context - window + 1 on (the last W - 1 tokens
    the next token attends to, as vLLM keeps them) plus the sinks' blocks; a state its state_pages
    (compressed groups add theirs to their blocks)."""
    return g.source.kind_spec.pages(g, block_size, context)


def as_full_attention(groups: tuple[LayerGroup, ...]) -> tuple[LayerGroup, ...]:
    """The layer groups as vLLM's KV cache manager sees them with --disable-hybrid-kv-cache-manager:
    sliding-window layers allocated as full attention (every token kept; they still attend only their
    window, so reads are unchanged), merged with the full layers into one group. State and compressed
    groups are left as they are (vLLM needs the hybrid manager for them)."""
    full = [g for g in groups if g.kind_spec.folds_into_full]
    if not full or len({g.layer_bytes_per_token for g in full}) > 1:
        return groups  # layers of different sizes stay apart
    layers = tuple(sorted(i for g in full for i in g.layers))
    merged = LayerGroup("full", layers, sum(g.bytes_per_token for g in full))
    return (merged, *(g for g in groups if not g.kind_spec.folds_into_full))


def plan_pages(groups: tuple[LayerGroup, ...], block_size: int) -> PagePlan:
    """The page plan for a model's layer groups (ModelSpec.layer_groups()) at `block_size` tokens."""
    if not groups:
        raise ValueError("a model has at least one layer group")
    per_layer = max((g.layer_bytes_per_token for g in groups if g.kind_spec.per_token_kv), default=0.0)
    compressed = [g for g in groups if g.kind_spec.entry_paged]
    if compressed:
        unit = math.lcm(*(g.tokens_per_block_unit for g in compressed))
        block_size = unit * -(-block_size // unit)
    state_layer = max((g.layer_state_bytes for g in groups if g.kind_spec.fixed_state), default=0.0)
    if state_layer and per_layer:  # raise the block size until one attention page holds one state
        step = block_size
        block_size = step * max(1, math.ceil(state_layer / (step * per_layer)))
    per_group = min(g.num_layers for g in groups)
    count = sum(-(-g.num_layers // per_group) for g in groups)
    if count > MAX_CACHE_GROUPS:
        sizes = " + ".join(str(g.num_layers) for g in groups)
        raise KvsimError(f"the page plan of layer groups of {sizes} layers needs {count:,} cache groups of"
                         f" {per_group} layers; at most {MAX_CACHE_GROUPS:,}")
    page = per_group * max(block_size * per_layer, _compressed_page_layer(compressed, block_size),
                           state_layer if not per_layer and not compressed else 0.0)
    cache_groups = []
    for g in groups:
        for start in range(0, g.num_layers, per_group):
            layers = g.layers[start:start + per_group]
            cache_groups.append(_cache_group(g, layers, per_group, block_size, page))
    return PagePlan(tuple(cache_groups), block_size, page, per_group)


def _compressed_page_layer(groups: list[LayerGroup], block_size: int) -> float:
    """Bytes one layer of a compressed group keeps for `block_size` tokens (whole entries of each part)."""
    best = 0.0
    for g in groups:
        per_block = sum((block_size // p.tokens_per_entry) * p.bytes_per_entry for p in g.parts)
        best = max(best, per_block / g.num_layers)
    return best


def _cache_group(g: LayerGroup, layers: tuple[int, ...], per_group: int, block_size: int,
                 page: float) -> CacheGroup:
    rule = g.kind_spec.cache_group(g, len(layers), per_group, block_size, page)
    return CacheGroup(g.kind, layers, per_group, *rule, g)
