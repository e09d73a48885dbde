"""Paging interplay: blocks held under compact and block reclaim, holes, compaction copies."""

from __future__ import annotations

import numpy as np
import pytest

from kvsim.kvcache.sparsity.keep import Keep
from kvsim.kvcache.sparsity.paging import (
    Footprint,
    block_mode_blocks,
    compact_blocks,
    compaction_copies,
    footprint_blocks,
    hole_slots,
    kept_slots,
    union_blocks,
    window_blocks,
)


def test_compact_blocks():
    assert compact_blocks(32.0, 16) == 2 and compact_blocks(33.0, 16) == 3 and compact_blocks(0.5, 16) == 1
    assert compact_blocks(0, 16) == 0


def test_block_mode_streaming_frees_whole_blocks():
    # L = 100, bs = 16: sinks in block 0; window [80, 100) in blocks 5 and 6; blocks 1..4 empty
    assert block_mode_blocks(Keep(4, 20, 0), 100, 4, 16, 0.05) == 3
    # everything kept: all ceil(100 / 16) = 7 blocks
    assert block_mode_blocks(Keep(4, 96, 0), 100, 4, 16, 0.05) == 7


def test_block_mode_scattered_heavy_hitters_pin_blocks():
    # L = 404: 15 heavy hitters kept spread over [4, 304); window blocks 19..25 (7) + sink block;
    # 18 middle blocks each held with probability 1 - (1 - 15/300)^16 = 0.5599 -> round(10.08) = 10
    assert block_mode_blocks(Keep(4, 100, 15), 404, 4, 16, 0.05) == 1 + 7 + 10
    # 40 kept outside: 15 spread, 25 extend the window to [279, 404) (blocks 17..25, 9 of them);
    # 16 middle blocks, density 15/275: 16 * (1 - (1 - 15/275)^16) = 9.48 -> 9
    assert block_mode_blocks(Keep(4, 100, 40), 404, 4, 16, 0.05) == 1 + 9 + 9


def test_footprint_by_mode():
    keep = Keep(4, 100, 15)
    assert footprint_blocks("compact", 119.0, keep, 404, 4, 16, 0.05) == 8
    assert footprint_blocks("block", 119.0, keep, 404, 4, 16, 0.05) == 18


def test_hole_slots():
    # 18 blocks = 288 slots hold 119 tokens; the last block's unwritten tail is (-404) % 16 = 12 slots
    assert hole_slots(18, 119.0, 404, 16) == 288 - 119 - 12
    assert hole_slots(8, 119.0, 119, 16) == 0  # packed, nothing evicted: 128 - 119 - 9 unwritten
    assert hole_slots(8, 119.0, 404, 16) == 0  # never negative


def test_compaction_copies():
    # 1000 tokens in 63 blocks shrink to 500 in 32: the 31 vacated blocks held 31 * 16 * 500 / 1000 kept
    assert compaction_copies(1000, 500, 63, 32, 16) == pytest.approx(248.0)
    assert compaction_copies(100, 32, 7, 2, 16) == pytest.approx(25.6)
    assert compaction_copies(100, 90, 7, 6, 16) == pytest.approx(14.4)
    assert compaction_copies(100, 99, 7, 7, 16) == 0.0  # no block vacated: holes refill with new tokens


def test_union_blocks_of_two_layer_groups_keeping_disjoint_tokens():
    """L = 64, blocks of 16: group A keeps 0..3 and 60..63, group B 20..23 and 60..63. One table per
    sequence holds the blocks touched by the union (0, 1, 3); one table per group would hold 2 each."""
    a = np.zeros(64, dtype=bool)
    b = np.zeros(64, dtype=bool)
    a[0:4] = a[60:] = True
    b[20:24] = b[60:] = True
    assert union_blocks([a, b], 16) == 3
    assert union_blocks([a], 16) == union_blocks([b], 16) == 2
    assert union_blocks([np.zeros(20, dtype=bool)], 16) == 0


def test_shared_tables_hold_the_widest_group_per_layer_tables_the_mean():
    """Two layer groups keeping 64 and 24 tokens of 1000 (compact, blocks of 16): one table per sequence
    holds ceil(64 / 16) = 4 blocks (the smaller group leaves 64 - 44 = 20 slot equivalents empty);
    per-layer tables the mean, ceil(44 / 16) = 3."""
    keeps = [Keep(4, 10, 50), Keep(4, 10, 10)]
    shared = Footprint("compact", "shared", 1, 4, 16, 0.05)
    per_layer = Footprint("compact", "per_layer", 1, 4, 16, 0.05)
    assert shared.blocks(keeps, keeps[0], 44.0, 1000) == (4, 64.0)
    assert per_layer.blocks(keeps, keeps[0], 44.0, 1000) == (3, 44.0)
    assert shared.holes(4, 64.0, 44.0, 1000) == 20 and per_layer.holes(3, 44.0, 44.0, 1000) == 0
    assert not shared.only_resident(True) and shared.only_resident(False) and per_layer.only_resident(True)


def test_per_head_selection_takes_the_union_over_heads():
    """Keep(4, 100, 40) at L = 404: 15 spread heavy hitters over a 275-position region (window 100 plus a
    25-token recency tail). Two heads choosing theirs independently keep 275 (1 - (1 - 15/275)^2) =
    30 - 15^2/275 of them between them; block mode holds a middle block with probability
    1 - (1 - 15/275)^(16 x 2)."""
    keep = Keep(4, 100, 40)
    assert kept_slots(keep, 404, 4, 0.05, heads=1) == 144
    assert kept_slots(keep, 404, 4, 0.05, heads=2) == pytest.approx(4 + 125 + 30 - 225 / 275)
    # 1 sink block + 9 window/tail blocks + 16 middle blocks x (1 - (260/275)^32) = 13.34 -> 13
    expected = 16 * (1 - (260 / 275) ** 32)
    assert int(expected + 0.5) == 13
    assert block_mode_blocks(keep, 404, 4, 16, 0.05, heads=2) == 1 + 9 + 13
    assert block_mode_blocks(keep, 404, 4, 16, 0.05, heads=1) == 1 + 9 + 9
    per_head = Footprint("compact", "shared", 2, 4, 16, 0.05)
    blocks, slots = per_head.blocks([keep], keep, 144.0, 404)
    assert slots == pytest.approx(4 + 125 + 30 - 225 / 275) and blocks == 10  # ceil(158.2 / 16)


def test_pooled_runs_pin_fewer_blocks():
    """Keep(4, 100, 40) with pool 5 at L = 404: the 40 outside tokens are 8 runs of 5 around heavy hitters
    (15 in the region; 75 would be needed for all), no recency tail, over the 300-position region. A
    middle block is touched by a run starting in 16 + 4 positions: 18 x (1 - (1 - 8/300)^20) = 7.52 -> 8,
    against 1 + 9 + 9 unpooled."""
    pooled = Keep(4, 100, 40, 5)
    expected = 18 * (1 - (1 - 8 / 300) ** 20)
    assert int(expected + 0.5) == 8
    assert block_mode_blocks(pooled, 404, 4, 16, 0.05) == 1 + 7 + 8


def test_infinigen_buffer_is_packed_in_block_mode():
    """The prefetched entries (sinks + outside) sit packed after the window: blocks touching the 100-token
    window of 404 (26 - 19 = 7) plus ceil(44 / 16) = 3."""
    foot = Footprint("block", "shared", 8, 4, 16, 0.05, packed_outside=True)
    keep = Keep(4, 100, 40)
    assert window_blocks(404, 100, 16) == 7
    assert foot.blocks([keep], keep, 144.0, 404)[0] == 7 + 3
    assert foot.heads == 1  # the buffer is packed per head as well
