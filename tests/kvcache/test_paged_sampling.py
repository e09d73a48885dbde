"""Parallel sampling on PagedKVManager: best-of-8 on a 2,000-token prompt, 100 output tokens each.

Token states = sum of sequence lengths - shared_dup_tokens; without sharing the 8 samples would hold
8 * 2,100 = 16,800 token slots.
"""

import math

import pytest

from kvsim.kvcache.paged import PagedKVManager


def token_states(m: PagedKVManager) -> int:
    return sum(m.ntok.values()) - m.shared_dup_tokens


PROMPT, OUT, N = 2000, 100, 8


def best_of_n(block_size: int, step: int) -> PagedKVManager:
    m = PagedKVManager(4000, block_size)
    assert m.allocate(0, PROMPT)
    for child in range(1, N):
        m.fork(0, child)
    for n in range(PROMPT + step, PROMPT + OUT + 1, step):
        for s in range(N):
            assert m.allocate(s, n)
    m.check_invariants()
    return m


@pytest.mark.parametrize("step", [1, 100])
def test_best_of_8_block_size_1(step):
    m = best_of_n(1, step)
    assert sum(m.ntok.values()) == N * (PROMPT + OUT) == 16_800
    assert token_states(m) == PROMPT + N * OUT == 2_800
    assert m.used_blocks == 2_800
    assert m.cow_copies == 0


@pytest.mark.parametrize("step", [1, 100])
def test_best_of_8_block_size_16(step):
    m = best_of_n(16, step)
    own = math.ceil(OUT / 16)
    assert (PROMPT // 16, own) == (125, 7)
    assert m.used_blocks == 125 + N * own == 181
    assert token_states(m) == 2_800
    assert m.cow_copies == 0  # the prompt ends on a block boundary
    # without sharing each sample holds ceil(2100 / 16) = 132 blocks
    assert N * math.ceil((PROMPT + OUT) / 16) == 1_056


def test_best_of_8_with_partial_prompt_block_copies_seven_times():
    m = PagedKVManager(400, 16)
    assert m.allocate(0, 2001)  # 126 blocks, the last holds 1 token
    for child in range(1, N):
        m.fork(0, child)
    for s in range(N):
        assert m.allocate(s, 2001 + OUT)
    assert m.cow_copies == N - 1
    # 125 shared full blocks; each sample owns ceil(2101 / 16) - 125 = 7 blocks
    assert m.used_blocks == 125 + N * 7
    # each sample's copy holds its own KV for prompt token 2001: 2000 + 8 * 101 slots
    assert token_states(m) == 2000 + N * (1 + OUT) == 2_808
    m.check_invariants()


@pytest.mark.parametrize(("block_size", "prompt", "blocks", "copies"),
                         [(1, 2000, 2_800, 0), (16, 2000, 181, 0), (16, 2001, 181, 7)])
def test_best_of_8_engine_style_calls(block_size, prompt, blocks, copies):
    """Call the manager only when a token needs a copy or a new block, as the engine does."""
    m = PagedKVManager(4000, block_size)
    assert m.allocate(0, prompt)
    for child in range(1, N):
        m.fork(0, child)
    for n in range(prompt + 1, prompt + OUT + 1):
        for s in range(N):
            if m.last_block_shared(s):
                assert m.allocate(s, n)
            elif n > m.capacity_tokens(s):
                assert m.grow_one_block(s, n)
    assert m.used_blocks == blocks
    assert m.cow_copies == copies
    for s in range(N):
        assert m.allocate(s, prompt + OUT)  # sync token counts: no new blocks
    assert m.used_blocks == blocks
    assert token_states(m) == 2000 + N * (prompt - 2000 + OUT)
    m.check_invariants()
