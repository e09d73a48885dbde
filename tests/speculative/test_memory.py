"""The KV pool with the draft in it."""

from __future__ import annotations

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.footprint import Capacity
from kvsim.speculative.draft import Draft
from kvsim.speculative.memory import with_draft


def cap():
    """1,000,000 usable bytes, 100 bytes per token, blocks of 10 tokens: 1,000 blocks."""
    return Capacity(kv_bytes_per_token=100.0, block_size=10, bytes_per_block=1000.0, budget_bytes=3e6,
                    weight_bytes=1.5e6, activation_reserve_bytes=5e5, usable_bytes=1e6, num_blocks=1000,
                    tokens=10_000)


def test_draft_weights_and_kv_come_out_of_the_pool():
    """A draft of 100,000 weight bytes and 25 KV bytes per token: 900,000 usable bytes in blocks of
    (100 + 25) x 10 = 1,250 bytes: 720 blocks, 7,200 tokens (2,800 fewer)."""
    d = Draft("eagle", 3, None, 100_000.0, 25.0, 1, 50_000.0, True)
    c = with_draft(cap(), d, "m")
    assert (c.num_blocks, c.tokens, c.bytes_per_block, c.kv_bytes_per_token) == (720, 7200, 1250.0, 125.0)
    assert c.weight_bytes == 1.6e6 and c.usable_bytes == 9e5


def test_ngram_changes_nothing_and_a_huge_draft_is_an_error():
    assert with_draft(cap(), Draft("ngram", 3, None, 0.0, 0.0, 0, 0.0, False), "m") == cap()
    with pytest.raises(KvsimError, match="leave no room for KV"):
        with_draft(cap(), Draft("draft_model", 3, None, 2e6, 1.0, 1, 1e6, False), "m")
