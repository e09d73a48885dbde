"""How evicted slots return to the block pool (`kv.sparsity.reclaim`), what that costs, and which layer
groups and heads share a slot (`kv.sparsity.block_tables`, `kv.sparsity.selection`).

compact: a sequence's retained KV stays packed. A new token is written into the slot an eviction just
    freed; when evictions outrun appends (compression at the end of prefill, a ScissorHands burst) the
    retained tokens in the blocks being vacated are copied into the holes, which costs a read and a write
    of each copied token's KV.
block: KV stays where it was written (position order) and a block is freed only once every token in it
    is evicted. Slots of evicted tokens inside held blocks are holes: allocated, holding nothing.

A slot holds one token's KV for every KV head of a layer (vLLM's [block, slot, head, dim] layout), and
with `block_tables: shared` (vLLM: one block table per sequence spans every layer) a block is held while
any layer group keeps a token in it: compact holds the most any group keeps, block the blocks touched by
the union of kept positions over groups. The attention model puts heavy hitters at the same positions in
every layer group and the groups' windows are nested, so that union is the widest group's set.
`block_tables: per_layer` is the idealisation of one table per layer group: the mean over groups.
With `selection: per_head` each of K heads keeps its own heavy hitters, at independent positions of the
same density: a position of the outside region is kept by some head with probability
1 - (1 - c)^K, c the share one head keeps, and a middle block of block_size slots is held with
probability 1 - (1 - d)^((block_size + k - 1) K), d the density of the kept runs' starts (k = 1 without
pooling: single tokens). Sinks, window and recency tail are the same for every head.
Kept heavy hitters are otherwise spread at random over the outside region; the other kept outside tokens
extend the window (keep.split_outside).
"""

from __future__ import annotations

import math

import numpy as np

from kvsim.kvcache.sparsity.keep import Keep, split_outside, spread_hitters

RECLAIM_MODES: tuple[str, ...] = ("compact", "block")
BLOCK_TABLES: tuple[str, ...] = ("shared", "per_layer")


def compact_blocks(resident_tokens: float, block_size: int) -> int:
    """Blocks holding `resident_tokens` packed (whole-model token equivalents)."""
    return max(0, math.ceil(resident_tokens / block_size - 1e-9))


def _outside_union(spread: float, region: float, heads: int) -> float:
    """Positions of the outside region that some of `heads` independent selections keep, each keeping
    `spread` of the `region` positions."""
    if spread <= 0 or region <= 0:
        return 0.0
    if heads == 1:
        return spread
    c = min(1.0, spread / region)
    return region * (1.0 - (1.0 - c) ** heads)


def kept_slots(keep: Keep, length: int, sink_tokens: int, heavy_fraction: float, heads: int = 1) -> float:
    """Positions kept by at least one of `heads` heads of a layer group (slots it needs packed): sinks,
    window and recency tail, and the union of the heads' spread heavy hitters."""
    if heads == 1:
        return float(keep.total)
    spread, adjacent = split_outside(keep, length, sink_tokens, heavy_fraction)
    tail = keep.window + adjacent
    region = length - tail - min(sink_tokens, length)
    return keep.sinks + tail + _outside_union(spread, region, heads)


def block_mode_blocks(keep: Keep, length: int, sink_tokens: int, block_size: int,
                      heavy_fraction: float, heads: int = 1) -> int:
    """Expected blocks still held in position order: blocks with kept sinks, blocks touching the window
    or the recency tail before it, and middle blocks holding at least one kept token of some head (rounded
    to the nearest block; at least the blocks the kept middle tokens fill)."""
    bs = block_size
    spread, adjacent = split_outside(keep, length, sink_tokens, heavy_fraction)
    tail = keep.window + adjacent              # kept suffix: window plus the recency tail
    sink_end = -(-keep.sinks // bs)            # blocks [0, sink_end) hold kept sinks
    last = -(-length // bs)
    tail_start = int((length - tail) // bs) if tail > 0 else last
    held = sink_end + max(0, last - max(tail_start, sink_end))
    mid = max(0, tail_start - sink_end)
    if mid and spread > 0:
        region = length - tail - min(sink_tokens, length)
        runs = spread_hitters(keep, spread)    # kept runs (single tokens without pooling)
        density = min(1.0, runs / region) if region > 0 else 1.0
        reach = bs + keep.pool - 1 if keep.pool > 1 else bs
        expected = mid * (1.0 - (1.0 - density) ** (reach * heads))
        covered = _outside_union(spread, region, heads) if region > 0 else spread
        floor_blocks = min(mid, math.ceil(covered / bs - 1e-9))
        held += max(floor_blocks, min(mid, int(expected + 0.5)))
    return held


def window_blocks(length: int, window: int, block_size: int) -> int:
    """Blocks touching the last `window` positions of a context of `length` tokens."""
    if window <= 0:
        return 0
    return -(-length // block_size) - (length - window) // block_size


def footprint_blocks(mode: str, resident_tokens: float, widest: Keep, length: int, sink_tokens: int,
                     block_size: int, heavy_fraction: float) -> int:
    """Blocks a sequence holds under reclaim `mode`, one selection shared by all heads, the groups'
    union given as `widest` (see Footprint for the general case)."""
    if mode == "compact":
        return compact_blocks(resident_tokens, block_size)
    return max(block_mode_blocks(widest, length, sink_tokens, block_size, heavy_fraction),
               compact_blocks(resident_tokens, block_size))


class Footprint:
    """Blocks and slots one sequence holds for its per-layer-group Keeps, under `reclaim`, `block_tables`
    and `heads` independent selections per layer (1: `selection: shared`). `packed_outside` (InfiniGen's
    prefetch buffer): the sinks and outside tokens (as the caller passes them: InfiniGen's double buffer
    share of its selection) sit packed after the window, whatever the reclaim mode."""

    __slots__ = ("compact", "shared", "heads", "sinks", "bs", "rho", "packed")

    def __init__(self, reclaim: str, block_tables: str, heads: int, sink_tokens: int, block_size: int,
                 heavy_fraction: float, packed_outside: bool = False) -> None:
        self.compact = reclaim == "compact"
        self.shared = block_tables == "shared"
        self.heads = 1 if packed_outside else heads
        self.sinks = sink_tokens
        self.bs = block_size
        self.rho = heavy_fraction
        self.packed = packed_outside

    def only_resident(self, per_layer_policy: bool) -> bool:
        """True when the blocks follow from the resident count alone (compact, one selection, groups that
        keep the same or their own tables): ceil(resident / block_size)."""
        return self.compact and self.heads == 1 and (not per_layer_policy or not self.shared)

    def slots(self, keeps: list[Keep], length: int) -> float:
        """Kept slots: the most any layer group needs (shared tables), or the mean (per-layer tables)."""
        per = [kept_slots(k, length, self.sinks, self.rho, self.heads) for k in keeps]
        return max(per) if self.shared else sum(per) / len(per)

    def blocks(self, keeps: list[Keep], widest: Keep, resident: float, length: int) -> tuple[int, float]:
        """(blocks held, kept slots) for the groups' `keeps` (`widest`: their union) holding `resident`
        whole-model token equivalents."""
        slots = self.slots(keeps, length)
        if self.compact:
            return compact_blocks(slots, self.bs), slots
        bs = self.bs
        if self.packed:
            packed = compact_blocks(widest.sinks + widest.outside, bs)
            held = window_blocks(length, widest.window, bs) + packed
        elif self.shared:
            held = block_mode_blocks(widest, length, self.sinks, bs, self.rho, self.heads)
        else:
            per = [block_mode_blocks(k, length, self.sinks, bs, self.rho, self.heads) for k in keeps]
            held = math.ceil(sum(per) / len(per) - 1e-9)
        return max(held, compact_blocks(resident, bs)), slots

    def holes(self, blocks: int, slots: float, resident: float, length: int) -> int:
        """Evicted slot equivalents inside held blocks: compact, the kept slots some layer group or head
        leaves empty (slots - resident); block, hole_slots."""
        if self.compact:
            return max(0, int(slots - resident + 1e-9))
        return hole_slots(blocks, resident, length, self.bs)


def union_blocks(masks, block_size: int) -> int:
    """Blocks touched by the union of explicit kept-position masks (one per layer group or head): the
    blocks a shared block table holds in position order (tests, small examples)."""
    union = np.logical_or.reduce([np.asarray(m, dtype=bool) for m in masks])
    if not len(union):
        return 0
    pad = (-len(union)) % block_size
    return int(np.concatenate((union, np.zeros(pad, dtype=bool))).reshape(-1, block_size).any(axis=1).sum())


def hole_slots(blocks: int, resident_tokens: float, length: int, block_size: int) -> int:
    """Slots inside held blocks whose KV was evicted: allocated slots minus retained tokens minus the
    not-yet-written tail of the last block (which is ordinary internal fragmentation)."""
    tail = (-length) % block_size
    return max(0, int(blocks * block_size - resident_tokens - tail + 1e-9))


def compaction_copies(kept_before: float, kept_after: float, blocks_before: int, blocks_after: int,
                      block_size: int) -> float:
    """Tokens copied when a packed sequence shrinks from kept_before to kept_after tokens: the retained
    tokens found in the vacated blocks, taking the evicted slots as spread evenly over the packed blocks."""
    vacated = blocks_before - blocks_after
    if vacated <= 0 or kept_before <= 0:
        return 0.0
    return min(kept_after, vacated * block_size * kept_after / kept_before)
