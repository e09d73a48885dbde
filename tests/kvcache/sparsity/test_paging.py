"""Paging interplay: blocks held under compact and block reclaim, holes, compaction copies."""

from __future__ import annotations

import pytest

from kvsim.kvcache.sparsity.keep import Keep
from kvsim.kvcache.sparsity.paging import (
    block_mode_blocks,
    compact_blocks,
    compaction_copies,
    footprint_blocks,
    hole_slots,
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
