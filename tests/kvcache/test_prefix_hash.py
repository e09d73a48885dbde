"""Hand-computed cases for the hash prefix cache (vLLM automatic prefix caching semantics)."""

import pytest

from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.kvcache.radix import RadixKVManager
from kvsim.workload.request import Request

SYS = 1000  # content id of a shared system prompt


def req(rid, segs, out=4, output_id=-1):
    return Request(rid=rid, arrival_s=0.0, prompt_len=sum(n for _, n in segs), output_len=out,
                   segments=tuple(segs), output_id=output_id)


def start(m, seq, r):
    """Admit r as seq and allocate its whole prompt, as the scheduler does; return the cached tokens."""
    cached = m.admit(seq, r, r.prompt_len, r.output_len).tokens
    assert m.allocate(seq, r.prompt_len)
    m.check_invariants()
    return cached


def states(m):
    return sum(m.ntok.values()) - m.shared_dup_tokens


@pytest.fixture(params=["hash", "radix"])
def manager(request):
    def make(num_blocks=32, bs=4, eviction="lru"):
        cls = PrefixHashKVManager if request.param == "hash" else RadixKVManager
        return cls(num_blocks, bs, eviction=eviction)
    return make


def test_shared_system_prompt_across_requests(manager):
    """bs 4, system prompt of 8 tokens. A: 8 + 5 tokens, B: 8 + 6. B finds A's two system-prompt blocks;
    A's third block (its own user message) does not match B's."""
    m = manager()
    a = req(0, [(SYS, 8), (1, 5)])
    b = req(1, [(SYS, 8), (2, 6)])
    assert start(m, 0, a) == 0
    assert m.used_blocks == 4  # ceil(13 / 4)
    m.free(0)
    assert m.used_blocks == 0 and m.cached_blocks == 3  # full blocks 0..2 stay cached (block 3 partial)
    assert m.num_free_blocks == 32
    assert start(m, 1, b) == 8
    assert m.used_blocks == 4 and m.cached_blocks == 1  # A's user-message block is still cached


def test_concurrent_sharing_counts_slots_once(manager):
    m = manager()
    a = req(0, [(SYS, 8), (1, 5)])
    b = req(1, [(SYS, 8), (2, 6)])
    start(m, 0, a)
    assert start(m, 1, b) == 8  # A is still running: its blocks are referenced twice
    assert m.tables[1][:2] == m.tables[0][:2]
    assert m.shared_dup_tokens == 8
    assert m.used_blocks == 4 + 2  # B adds blocks for tokens 8..13 only
    assert states(m) == 13 + 14 - 8
    m.free(0)
    assert m.shared_dup_tokens == 0 and m.used_blocks == 4
    m.check_invariants()


def test_last_prompt_token_is_always_computed(manager):
    m = manager()
    a = req(0, [(SYS, 8), (1, 4)])
    start(m, 0, a)
    m.free(0)
    # the same 12-token prompt again: 3 full blocks cached, but at most floor(11 / 4) = 2 are used
    assert start(m, 1, req(1, [(SYS, 8), (1, 4)])) == 8
    # a prompt that is exactly the system prompt: floor(7 / 4) = 1 block
    assert start(m, 2, req(2, [(SYS, 8)])) == 4


def test_partial_blocks_are_never_shared(manager):
    m = manager()
    start(m, 0, req(0, [(SYS, 10)]))
    assert m.admit(1, req(1, [(SYS, 10)]), 10, 4).tokens == 8  # blocks 0, 1; block 2 (2 tokens) is not cached
    assert m.allocate(1, 10)
    assert m.tables[1][:2] == m.tables[0][:2] and m.tables[1][2] != m.tables[0][2]
    m.check_invariants()


def test_generated_tokens_are_cached_for_the_next_turn(manager):
    """Turn 1: system (8) + user (4), answer of 9 tokens with content id 50. Turn 2's prompt quotes the
    answer: system + user + answer (9) + new user (3). When turn 1 is freed after writing 12 + 8 KV
    tokens (the last answer token is never fed back), its full blocks 0..4 are cached."""
    m = manager()
    t1 = req(0, [(SYS, 8), (1, 4)], out=9, output_id=50)
    start(m, 0, t1)
    assert m.allocate(0, 20)  # 12 prompt + 8 decoded tokens written: 5 full blocks
    m.free(0)
    t2 = req(1, [(SYS, 8), (1, 4), (50, 9), (2, 3)])
    assert start(m, 1, t2) == 16  # blocks 0..3; block 4 (tokens 16..19) was the table's last block
    m.check_invariants()


def test_admission_undo_restores_everything(manager):
    m = manager()
    start(m, 0, req(0, [(SYS, 8), (1, 4)]))
    m.free(0)
    before = (m.num_free_blocks, m.cached_blocks, m.used_blocks)
    assert m.admit(1, req(1, [(SYS, 8), (2, 4)]), 12, 4).tokens == 8
    assert (m.num_free_blocks, m.cached_blocks, m.used_blocks) == (before[0] - 2, before[1] - 2, 2)
    m.free(1)  # the scheduler did not admit it after all
    assert (m.num_free_blocks, m.cached_blocks, m.used_blocks) == before
    m.check_invariants()


def test_exhausted_pool_evicts_cached_blocks(manager):
    m = manager(num_blocks=4)
    start(m, 0, req(0, [(SYS, 8), (1, 5)]))  # 4 blocks
    m.free(0)
    assert m.num_free_blocks == 4 and m.cached_blocks == 3
    assert m.allocate(1, 16)  # needs all 4: one free, three evicted
    assert m.evictions == 3 and m.cached_blocks == 0
    m.free(1)
    assert m.admit(2, req(2, [(SYS, 8), (1, 5)]), 13, 4).tokens == 0
    m.check_invariants()


def test_decode_fast_path_evicts(manager):
    m = manager(num_blocks=4)
    start(m, 0, req(0, [(SYS, 8)]))
    m.free(0)  # both blocks full: both cached
    start(m, 1, req(1, [(2, 4)]))
    assert m.num_free_blocks == 3 and m.cached_blocks == 2
    for k in range(3):
        assert m.grow_one_block(1, 5 + 4 * k)
    assert not m.grow_one_block(1, 17)
    assert m.evictions == 2  # the truly free block first, then both cached ones
    m.check_invariants()


@pytest.mark.parametrize("bs, blocks", [(1, 2_800), (16, 181)])
def test_best_of_8_memory_with_prefix_cache(manager, bs, blocks):
    """Parallel sampling with a prefix-caching manager: best-of-8 on a 2,000-token prompt, 100 output
    tokens each, holds 2,000 + 8 * 100 = 2,800 token slots (16,800 without sharing)."""
    m = manager(num_blocks=4000, bs=bs)
    start(m, 0, req(0, [(SYS, 2000)]))
    for child in range(1, 8):
        m.fork(0, child)
    for s in range(8):
        assert m.allocate(s, 2100)
    assert states(m) == 2_800 and sum(m.ntok.values()) == 16_800
    assert m.used_blocks == blocks  # 125 prompt blocks + 8 * 7 (bs 16)
    for s in range(8):
        m.free(s)
    m.check_invariants()


@pytest.mark.parametrize("cls", [PrefixHashKVManager, RadixKVManager])
def test_swap_out_keeps_cached_content_and_swap_in_uses_fresh_blocks(cls):
    m = cls(16, 4, swap_capacity_blocks=16)
    start(m, 0, req(0, [(SYS, 8), (1, 5)]))
    m.fork(0, 1)
    assert m.swap_out([0, 1]) == 4
    assert m.used_blocks == 0 and m.cached_blocks == 3  # GPU copies of the full blocks stay cached
    m.check_invariants()
    assert m.admit(2, req(2, [(SYS, 8), (1, 5)]), 13, 4).tokens == 12
    assert m.allocate(2, 13)
    assert m.swap_in([0, 1]) == 4
    assert m.tables[0] == m.tables[1] and not set(m.tables[0]) & set(m.tables[2])
    m.check_invariants()
    for s in (0, 1, 2):
        m.free(s)
    m.check_invariants()


def _cached_state():
    """bs 4, 8 blocks: A (12 tokens: 3 keyed blocks) is freed, so its 3 blocks are cached with refcount 0;
    B holds 2 blocks of other content (1 keyed, 1 partial)."""
    m = PrefixHashKVManager(8, 4)
    start(m, 0, req(0, [(7, 12)]))
    m.free(0)
    start(m, 1, req(1, [(8, 6)]))
    return m


def _put_on_free_list(pool, b):
    pool._free.append(b)
    pool.free_count += 1


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda m: _put_on_free_list(m.pool, next(iter(m.pool.queue.items()))), "cached block on the free list"),
    (lambda m: _put_on_free_list(m.pool, m.tables[1][0]), "referenced block on the free list"),
    (lambda m: m.pool.by_key.update({k: m.tables[1][0] for k in list(m.pool.by_key)[:1]}),
     "key map disagrees with blocks"),
    (lambda m: m.pool.by_key.pop(next(iter(m.pool.by_key))), "block with a key not in the map"),
    (lambda m: m.pool.queue.discard(next(iter(m.pool.queue.items()))), "evictable set drifted"),
    (lambda m: (m.pool._free.pop(), setattr(m.pool, "free_count", m.pool.free_count - 1)), "leaked block"),
])
def test_the_full_check_catches_each_broken_invariant(corrupt, message):
    m = _cached_state()
    assert m.check_invariants() == m.pool.known + 2  # blocks with state + B's 2 table entries
    corrupt(m)
    with pytest.raises(AssertionError, match=message):
        m.check_invariants()
