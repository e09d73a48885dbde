"""Layer-group kinds as classes: one `GroupKind` subclass per kind, registered by name in `KINDS`.

A kind holds every rule that differs between kinds (as vLLM v1 has one KVCacheSpec per attention type):
which layers of a model form its group and their bytes (`build`, from the formulas of
kvsim/specs/groups.py), the bytes a sequence holds and reads, its window caps, how its cache groups count
pages in the page plan (kvsim/specs/pages.py), and its attention cost terms (decode bytes read and prefill
FLOPs, `add_attention` for kvsim/cost/attention.py and `prefill_flops` for kvsim/specs/compute.py).
`LayerGroup.kind` keeps the name (outputs print it); `LayerGroup.kind_spec` is the kind object, looked up
once when the group is built. The cache side maps the same names to managers
(kvsim/kvcache/managers/kinds.py). A new kind: a subclass here with `@register`, its managers there.

The formulas' helpers are imported inside the methods: this module is imported by kvsim/specs/layers.py,
which kvsim/specs/groups.py and kvsim/specs/compute.py import.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kvsim.specs.kv_precision import KVPrecision
    from kvsim.specs.layers import LayerGroup
    from kvsim.specs.model import ModelSpec
    from kvsim.specs.pages import CacheGroup

KINDS: dict[str, GroupKind] = {}
"""Kind name -> its kind object (one instance of its class), in the order `ModelSpec.layer_groups()`
lists the groups."""


def register(cls: type[GroupKind]) -> type[GroupKind]:
    """Class decorator: add one instance of a GroupKind subclass to KINDS under its name."""
    KINDS[cls.name] = cls()
    return cls


class AttentionTerms:
    """Coefficients of one model's per-iteration attention work, summed over its groups (what
    kvsim/cost/attention.py AttentionWork multiplies by the batch's sums): ctx_* by the summed context,
    window_*[i] by the sums at window cap i, seq_bytes by the decode sequences, token_flops by the tokens."""

    __slots__ = ("ctx_bytes", "window_bytes", "seq_bytes", "ctx_flops", "window_flops", "token_flops",
                 "attention_layers")

    def __init__(self, caps: int) -> None:
        self.ctx_bytes = 0.0
        self.window_bytes = [0.0] * caps
        self.seq_bytes = 0.0
        self.ctx_flops = 0.0
        self.window_flops = [0.0] * caps
        self.token_flops = 0.0
        self.attention_layers = 0


class GroupKind:
    """The rules of one layer-group kind (the base: no per-token KV, no window, no attention).

    Flags: attends (attention layers: pair FLOPs, ModelSpec.attention_flops_per_pair), token_paged (its
    pages follow the context: CacheGroup.grows), full_context (decode reads every context token: a lone
    unpadded group of it is the classic paged layout), per_token_kv (a per-layer KV size per token sizes
    the pages), entry_paged (compressed entries: blocks span whole entries), fixed_state (a page holds one
    layer slot's state), needs_window / windowed (a window is required / allowed), has_parts
    (CompressedParts, exactly for this kind), folds_into_full (allocated as full attention without the
    hybrid manager)."""

    name: ClassVar[str] = ""
    attends: ClassVar[bool] = False
    token_paged: ClassVar[bool] = False
    full_context: ClassVar[bool] = False
    per_token_kv: ClassVar[bool] = False
    entry_paged: ClassVar[bool] = False
    fixed_state: ClassVar[bool] = False
    needs_window: ClassVar[bool] = False
    windowed: ClassVar[bool] = False
    has_parts: ClassVar[bool] = False
    folds_into_full: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"<layer-group kind {self.name}>"

    def build(self, m: ModelSpec, p: KVPrecision, tp: int, by_kind: dict[str, Sequence[int]],
              per_token: float) -> LayerGroup | None:
        """This kind's group of model m (None if m has none): by_kind is m.layers_by_kind(), per_token
        the KV bytes one token adds to one attention layer (groups.token_bytes_per_layer)."""
        raise NotImplementedError

    def check(self, g: LayerGroup) -> None:
        """ValueError if g's window or parts do not suit the kind."""
        if self.needs_window and g.window is None:
            raise ValueError(f"a {self.name} group needs a window")
        if g.window is not None and not self.windowed:
            raise ValueError("a window is given only for sliding (and compressed) groups")
        if self.has_parts != bool(g.parts):
            raise ValueError("compressed parts are given exactly for compressed groups")

    # ---- bytes -------------------------------------------------------------------------------
    def resident_tokens(self, g: LayerGroup, context: int) -> int:
        """Tokens of a `context`-token sequence whose per-token KV the group holds."""
        return 0

    def kv_bytes(self, g: LayerGroup, context: int) -> float:
        """Exact bytes the group holds for one sequence of `context` tokens."""
        return self.resident_tokens(g, context) * g.bytes_per_token + g.state_bytes

    def read_bytes(self, g: LayerGroup, context: int) -> float:
        """KV bytes one decode step of a `context`-token sequence reads in the group."""
        return self.kv_bytes(g, context)

    def caps(self, g: LayerGroup) -> tuple[int, ...]:
        """Token caps of the group's reads (kvsim.specs.layers.window_caps)."""
        return ()

    def held_cap(self, g) -> int | None:
        """The window cap bounding the tokens a sequence holds in the group's pages (None: every token)."""
        return None

    # ---- pages -------------------------------------------------------------------------------
    def cache_group(self, g: LayerGroup, layers: int, per_group: int, block_size: int,
                    page: float) -> tuple[int | None, int, int, float]:
        """(window, sink_tokens, state_pages, real_fraction) of a cache group of `layers` of g's layers in
        `per_group` slots, pages of `page` bytes spanning `block_size` tokens."""
        used = block_size * g.layer_bytes_per_token * layers
        return g.window, g.sink_tokens, 0, used / page

    def pages(self, cg: CacheGroup, block_size: int, context: int) -> int:
        """Pages cache group cg holds for a sequence of `context` tokens: every block touched, plus its
        state pages."""
        return -(-context // block_size) + cg.state_pages

    def prefill_pages(self, cg: CacheGroup, block_size: int, blocks: int, prompt: int, chunk: int) -> int:
        """Most pages cg holds while a `prompt` (`blocks` blocks) is computed in chunks of `chunk` tokens."""
        return blocks + cg.state_pages

    # ---- attention cost ----------------------------------------------------------------------
    def add_attention(self, t: AttentionTerms, m: ModelSpec, g: LayerGroup, caps: tuple[int, ...],
                      pair: float, tp: int) -> None:
        """Add the group's terms to t (caps: window_caps of the model's groups; pair: the FLOPs of one
        (query, key) pair in one layer, compute.layer_pair_flops)."""

    def prefill_flops(self, m: ModelSpec, g: LayerGroup, f: float, start: int, chunk: int, tp: int) -> float:
        """The group's attention FLOPs for a prefill chunk of `chunk` tokens after `start` (f: the FLOPs of
        one pair in one layer)."""
        return 0.0


@register
class FullKind(GroupKind):
    """MHA / GQA / MQA attention: every token's K and V in every layer of the group."""

    name = "full"
    attends = token_paged = full_context = per_token_kv = folds_into_full = True

    def build(self, m, p, tp, by_kind, per_token):
        full = by_kind.get("full")
        if full and (m.attention == "mla") == (self.name == "mla"):
            from kvsim.specs.layers import LayerGroup

            return LayerGroup(self.name, full, per_token * len(full))
        return None

    def resident_tokens(self, g, context):
        return context

    def add_attention(self, t, m, g, caps, pair, tp):
        t.ctx_bytes += g.bytes_per_token
        t.ctx_flops += pair * g.num_layers
        t.attention_layers += g.num_layers

    def prefill_flops(self, m, g, f, start, chunk, tp):
        from kvsim.specs.compute import causal_pairs

        return f * g.num_layers * causal_pairs(start, chunk)


@register
class MlaKind(FullKind):
    """Multi-head latent attention (DeepSeek-V2/V3): one latent per token and layer (the model's full
    layers when its attention is MLA)."""

    name = "mla"
    folds_into_full = False


@register
class SlidingKind(GroupKind):
    """Sliding-window attention: the last `window` tokens (plus `sink_tokens` first ones) stay resident;
    pages before the last window - 1 tokens go back (vLLM's SlidingWindowManager)."""

    name = "sliding"
    attends = token_paged = per_token_kv = needs_window = windowed = folds_into_full = True

    def build(self, m, p, tp, by_kind, per_token):
        sliding = by_kind.get("sliding")
        if sliding and "compressed" not in by_kind:  # a compressed model's sliding layers are in its group
            from kvsim.specs.layers import LayerGroup

            return LayerGroup(self.name, sliding, per_token * len(sliding), window=m.sliding_window)
        return None

    def resident_tokens(self, g, context):
        return min(context, g.window + g.sink_tokens)

    def caps(self, g):
        return (max(g.window - 1, 0),) if g.window else ()

    def held_cap(self, g):
        return max(g.window - 1, 0)

    def pages(self, cg, block_size, context):
        blocks = -(-context // block_size)
        first = max(0, context - cg.window + 1) // block_size  # vLLM frees blocks before the last W - 1
        sinks = -(-cg.sink_tokens // block_size)
        return min(blocks, blocks - first + min(sinks, first)) + cg.state_pages

    def prefill_pages(self, cg, block_size, blocks, prompt, chunk):
        return min(blocks, -(-(min(chunk, prompt) + cg.window - 1) // block_size) + 1)

    def add_attention(self, t, m, g, caps, pair, tp):
        i = caps.index(max(g.window - 1, 0))
        t.window_bytes[i] += g.bytes_per_token
        t.window_flops[i] += pair * g.num_layers
        t.attention_layers += g.num_layers

    def prefill_flops(self, m, g, f, start, chunk, tp):
        from kvsim.specs.compute import window_pairs

        return f * g.num_layers * window_pairs(start, chunk, g.window)


@register
class StateKind(GroupKind):
    """A recurrent layer (Mamba, linear attention): a constant-size state per sequence."""

    name = "state"
    fixed_state = True

    def build(self, m, p, tp, by_kind, per_token):
        state = by_kind.get("state")
        if not state:
            return None
        from kvsim.specs.groups import state_bytes_per_layer
        from kvsim.specs.layers import LayerGroup

        return LayerGroup(self.name, state, state_bytes=state_bytes_per_layer(m, tp) * len(state))

    def cache_group(self, g, layers, per_group, block_size, page):
        used = g.layer_state_bytes * layers
        pages = max(1, math.ceil(g.layer_state_bytes * per_group / page)) if page else 1
        return None, 0, pages, used / (pages * page) if page else 1.0

    def pages(self, cg, block_size, context):
        return cg.state_pages

    def prefill_pages(self, cg, block_size, blocks, prompt, chunk):
        return cg.state_pages

    def add_attention(self, t, m, g, caps, pair, tp):
        from kvsim.specs.compute import state_flops_per_token

        t.seq_bytes += 2 * g.state_bytes  # read and written back each step
        t.token_flops += state_flops_per_token(m, tp) * g.num_layers

    def prefill_flops(self, m, g, f, start, chunk, tp):
        from kvsim.specs.compute import state_flops_per_token

        return state_flops_per_token(m, tp) * g.num_layers * chunk


@register
class CompressedKind(GroupKind):
    """DeepSeek-V4-style compressed attention: entries of `tokens_per_entry` tokens per CompressedPart
    (a block spans whole entries of every part), plus a fixed state cache (the uncompressed window and
    the tail not yet compressible) in whole pages."""

    name = "compressed"
    attends = token_paged = entry_paged = windowed = has_parts = True

    def build(self, m, p, tp, by_kind, per_token):
        if "compressed" not in by_kind:
            return None
        from kvsim.specs.groups import compressed_group

        return compressed_group(m, p, by_kind["compressed"], by_kind.get("sliding") or (), self.name)

    def kv_bytes(self, g, context):
        entries = sum(p.entries(context) * p.bytes_per_entry for p in g.parts)
        return entries + g.state_bytes

    def read_bytes(self, g, context):
        return sum(p.read_entries(context) * p.bytes_per_entry for p in g.parts) + g.state_bytes

    def caps(self, g):
        window = (max(g.window - 1, 0),) if g.window else ()
        return window + tuple(p.topk * p.tokens_per_entry for p in g.parts if p.topk)

    def cache_group(self, g, layers, per_group, block_size, page):
        per_block = sum((block_size // p.tokens_per_entry) * p.bytes_per_entry for p in g.parts)
        used = per_block * layers / g.num_layers
        state = math.ceil(g.layer_state_bytes * per_group / page) if g.state_bytes else 0
        return g.window, g.sink_tokens, state, used / page

    def add_attention(self, t, m, g, caps, pair, tp):
        """Decode reads each part's entries (a top-k part at most topk of them) and the state cache; prefill
        attends the window's pairs over every layer of the group, each part's entry pairs over the layers
        keeping it (kvsim/specs/compute.py), and the CSA indexer scores every entry."""
        from kvsim.specs import groups

        t.seq_bytes += g.state_bytes
        t.attention_layers += g.num_layers
        if g.window:
            t.window_flops[caps.index(max(g.window - 1, 0))] += pair * g.num_layers
        names = groups.part_names(m)
        layers_of = {names[r]: n for r, n in groups.compressed_layer_counts(m).items()}
        for p in g.parts:
            per_token = p.bytes_per_entry / p.tokens_per_entry
            if p.name == "csa-indexer":  # keys scored by the indexer's heads, every entry, no top-k cap
                score = 2.0 * m.index_num_heads * m.index_head_dim * layers_of["csa"]
                t.ctx_bytes += per_token
                t.ctx_flops += score / p.tokens_per_entry
                continue
            flops = pair * layers_of[p.name] / p.tokens_per_entry
            if p.topk:
                i = caps.index(p.topk * p.tokens_per_entry)
                t.window_bytes[i] += per_token
                t.window_flops[i] += flops
            else:
                t.ctx_bytes += per_token
                t.ctx_flops += flops

    def prefill_flops(self, m, g, f, start, chunk, tp):
        from kvsim.specs import groups
        from kvsim.specs.compute import entry_pairs, window_pairs

        total = f * g.num_layers * window_pairs(start, chunk, m.sliding_window)
        names = groups.part_names(m)
        for ratio, n in groups.compressed_layer_counts(m).items():
            if names[ratio] == "csa":
                total += f * n * entry_pairs(start, chunk, ratio, m.index_topk)
                total += 2.0 * m.index_num_heads * m.index_head_dim * n * entry_pairs(start, chunk, ratio)
            else:
                total += f * n * entry_pairs(start, chunk, ratio)
        return total
