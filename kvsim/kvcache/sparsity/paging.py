"""How evicted slots return to the block pool (`kv.sparsity.reclaim`), and what that costs.

compact: a sequence's retained KV stays packed in ceil(R / block_size) blocks. A new token is written into
    the slot an eviction just freed; when evictions outrun appends (compression at the end of prefill, a
    ScissorHands burst) the retained tokens in the blocks being vacated are copied into the holes, which
    costs a read and a write of each copied token's KV.
block: KV stays where it was written (position order) and a block is freed only once every token in it
    is evicted. Slots of evicted tokens inside held blocks are holes: allocated, holding nothing.

Blocks span all layers, so in block mode a block is held while any layer group keeps a token in it (the
caller passes the widest group's Keep). Kept heavy hitters are spread at random over the outside region (a
middle block of block_size slots is held with probability 1 - (1 - density)^block_size); the other kept
outside tokens extend the window (keep.split_outside).
"""

from __future__ import annotations

import math

from kvsim.kvcache.sparsity.keep import Keep, split_outside

RECLAIM_MODES: tuple[str, ...] = ("compact", "block")


def compact_blocks(resident_tokens: float, block_size: int) -> int:
    """Blocks holding `resident_tokens` packed (whole-model token equivalents)."""
    return max(0, math.ceil(resident_tokens / block_size - 1e-9))


def block_mode_blocks(keep: Keep, length: int, sink_tokens: int, block_size: int,
                      heavy_fraction: float) -> int:
    """Expected blocks still held in position order: blocks with kept sinks, blocks touching the window
    or the recency tail before it, and middle blocks holding at least one kept heavy hitter (rounded to
    the nearest block)."""
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
        density = min(1.0, spread / region) if region > 0 else 1.0
        expected = mid * (1.0 - (1.0 - density) ** bs)
        floor_blocks = min(mid, math.ceil(spread / bs - 1e-9))
        held += max(floor_blocks, min(mid, int(expected + 0.5)))
    return held


def footprint_blocks(mode: str, resident_tokens: float, widest: Keep, length: int, sink_tokens: int,
                     block_size: int, heavy_fraction: float) -> int:
    """Blocks a sequence holds under reclaim `mode`."""
    if mode == "compact":
        return compact_blocks(resident_tokens, block_size)
    return max(block_mode_blocks(widest, length, sink_tokens, block_size, heavy_fraction),
               compact_blocks(resident_tokens, block_size))


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
