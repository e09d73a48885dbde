"""kvsim/kvcache/coordinator.py: one pool of pages shared by full, sliding-window and state cache groups.
Hand-counted cases, then a property test of random operation sequences with the invariants checked
after every step (no leaked or double-freed page, refcounts equal table references, a sliding group never
holds more than its window's pages + 2, one state slot per sequence holding KV)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache.coordinator import KVCoordinator
from kvsim.kvcache.managers.sliding import SlidingTables
from kvsim.kvcache.view import ContextSums
from kvsim.specs.layers import LayerGroup
from kvsim.specs.pages import plan_pages

FULL = LayerGroup("full", (0, 1), 2 * 1024.0)
SLIDING = LayerGroup("sliding", (2, 3), 2 * 1024.0, window=64)
STATE = LayerGroup("state", (4, 5), state_bytes=2 * 16 * 1024.0)


def coordinator(*groups: LayerGroup, pages: int = 64, block_size: int = 16, swap: int = 64) -> KVCoordinator:
    return KVCoordinator(plan_pages(groups, block_size), pages, swap)


def test_sliding_group_keeps_only_the_window():
    kv = coordinator(FULL, SLIDING, pages=200)
    assert kv.allocate(1, 16 * 10)  # 10 blocks of prompt: full 10 pages, sliding 10 pages (not trimmed yet)
    assert kv.num_blocks_of(1) == 20
    assert kv.allocate(1, 16 * 10 + 1)  # computed 160: sliding keeps blocks from (160 - 63) // 16 = 6 on
    assert kv.tokens[0].held(1) == 11 and kv.tokens[1].held(1) == 11 - 6
    kv.check_invariants()
    assert kv.free(1) == 11 + 5
    assert kv.num_free_blocks == 200
    kv.check_invariants()


def test_grow_one_block_takes_a_page_per_group_and_gives_back_what_left_the_window():
    kv = coordinator(FULL, SLIDING, pages=100)
    kv.allocate(1, 64)           # 4 blocks in each group
    free = kv.num_free_blocks
    assert kv.grow_one_block(1, 65)  # computed 64: sliding keeps from block (64 - 63) // 16 = 0: none back
    assert kv.num_free_blocks == free - 2
    assert kv.grow_one_block(1, 81)  # computed 80: keeps from (80 - 63) // 16 = 1: one page back
    assert kv.num_free_blocks == free - 3
    assert kv.capacity_tokens(1) == 96
    kv.check_invariants()


def test_state_slot_is_taken_once_and_copied_on_fork():
    kv = coordinator(FULL, STATE, pages=50)
    plan = kv.plan
    state_pages = next(g.state_pages for g in plan.groups if g.kind == "state")
    assert kv.blocks_needed(1, 32) == 2 + state_pages
    kv.allocate(1, 32)
    assert kv.blocks_needed(1, 48) == 1  # the state does not grow
    kv.fork(1, 2)
    assert kv.cow_copies == state_pages  # the child's state is a copy
    kv.check_invariants()
    assert kv.free(1) == state_pages      # the shared full pages stay with seq 2
    kv.check_invariants()


def test_all_or_nothing_when_pages_are_short():
    kv = coordinator(FULL, SLIDING, pages=5)
    assert not kv.allocate(1, 16 * 3)  # 3 + 3 pages > 5
    assert kv.num_free_blocks == 5 and not kv.has(1)
    assert kv.allocate(1, 16 * 2)
    assert not kv.grow_one_block(1, 33)  # needs 2, 1 free
    kv.check_invariants()


def test_token_states_are_page_slots_of_real_kv():
    kv = coordinator(FULL, SLIDING, pages=100)
    kv.allocate(1, 100)
    # full: 100 tokens; sliding: min(100, 63) tokens; both groups unpadded
    assert kv.windows == (63,)
    assert kv.token_states(ContextSums(100, (63,), 1)) == 163
    kv.fork(1, 2)  # seq 2 shares every page: 2 x 100 tokens held, 100 + 68 (sliding: live pages) shared
    sliding_live = kv.tokens[1].ntok[1] - kv.tokens[1].first[1] * 16
    assert sliding_live == 100 - 2 * 16  # the fork gave back the blocks before the window first
    assert kv.token_states(ContextSums(200, (126,), 2)) == 200 - 100 + 126 - sliding_live


def test_fork_after_a_one_chunk_prefill_shares_only_the_window():
    # a 320-token prompt in one chunk holds 20 pages in each group until its next growth; forking it three
    # ways once shared all 20 sliding pages, so the sliding group's shared slots (2 x 320) exceeded what the
    # three samples hold in its window (3 x 63) and the token states went negative (stress seeds 428, 869)
    kv = coordinator(FULL, SLIDING, pages=100)
    kv.allocate(1, 320)
    assert kv.num_free_blocks == 100 - 40
    kv.fork(1, 2)
    kv.fork(1, 3)
    sliding = kv.tokens[1]
    # computed 319 (the check's bound): blocks from (319 - 63) // 16 = 16 on, 4 pages, shared by all three
    assert [sliding.first[s] for s in (1, 2, 3)] == [16, 16, 16] and sliding.held(2) == 4
    assert kv.num_free_blocks == 100 - 20 - 4
    assert sliding.dup == 2 * (320 - 16 * 16)
    states = kv.token_states(ContextSums(3 * 320, (3 * 63,), 3))
    assert states == 320 + 3 * 63 - 2 * 64 and 0 <= states <= kv.used_blocks * 16
    kv.check_invariants()
    assert kv.allocate(2, 321)  # the first decode step copies the shared last page, trims nothing more
    kv.check_invariants()


def test_swap_out_and_in_keeps_sharing():
    kv = coordinator(FULL, SLIDING, STATE, pages=80, swap=40)
    kv.allocate(1, 40)
    kv.fork(1, 2)
    assert kv.can_swap_out([1, 2])
    moved = kv.swap_out([1, 2])
    assert kv.num_free_blocks == 80 and moved == kv.swap_blocks_needed([1, 2])
    assert kv.swap_in([1, 2]) == moved
    kv.check_invariants()


OPS = st.lists(st.tuples(st.sampled_from(["alloc", "grow", "fork", "free", "swap"]),
                         st.integers(0, 5), st.integers(1, 40)), max_size=60)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(OPS, st.sampled_from([(FULL,), (SLIDING,), (FULL, SLIDING), (FULL, STATE), (FULL, SLIDING, STATE)]))
def test_random_operations_keep_every_invariant(ops, groups):
    kv = coordinator(*groups, pages=60, block_size=8, swap=30)
    length: dict[int, int] = {}
    swapped: set[int] = set()
    for op, seq, n in ops:
        if op == "alloc" and seq not in swapped:
            target = length.get(seq, 0) + n
            if kv.allocate(seq, target):
                length[seq] = target
        elif op == "grow" and seq in length and length[seq] == kv.capacity_tokens(seq):
            if kv.grow_one_block(seq, length[seq] + 1):
                length[seq] += 1
                for m in kv.tokens:  # a decode step holds at most the window + one page
                    if isinstance(m, SlidingTables):
                        assert m.held(seq) <= m.decode_bound()
        elif op == "fork" and seq in length:
            child = 100 + seq + n
            if child not in length and child not in swapped and kv.blocks_needed(child, 0) >= 0:
                need = sum(s.pages for s in kv.states)
                if need <= kv.num_free_blocks:
                    kv.fork(seq, child)
                    length[child] = length[seq]
        elif op == "free" and seq in length:
            kv.free(seq)
            del length[seq]
        elif op == "swap" and seq in length and kv.can_swap_out([seq]):
            kv.swap_out([seq])
            swapped.add(seq)
            del length[seq]
        elif op == "swap" and seq in swapped and kv.swap_blocks_needed([seq]) <= kv.num_free_blocks:
            kv.swap_in([seq])
            swapped.discard(seq)
            length[seq] = kv.tokens[0].ntok[seq] if kv.tokens else 0
        kv.check_invariants()
        assert kv.used_blocks <= kv.num_blocks
        states = kv.states[0] if kv.states else None
        if states is not None:
            assert len(states.slots) == len(length)  # one state slot per sequence holding KV


def _request(rid: int, prompt: int, shared: int):
    from kvsim.workload.request import Request

    return Request(rid=rid, arrival_s=0.0, prompt_len=prompt, output_len=4, segments=((7, shared),))


def test_prefix_hit_is_the_prefix_every_group_can_serve():
    kv = KVCoordinator(plan_pages((FULL, SLIDING), 16), 200, 0, prefix_cache="hash")
    first = _request(1, 16 * 12, 16 * 12)  # 12 blocks of shared content
    assert kv.admit(1, first, first.prompt_len, 4).tokens == 0
    kv.allocate(1, first.prompt_len)
    kv.free(1)
    kv.check_invariants()
    assert kv.cached_blocks == 24  # 12 pages per group, all keyed and unreferenced
    second = _request(2, 16 * 12 + 5, 16 * 12)
    assert kv.peek_hit(second, second.prompt_len).tokens == 16 * 12
    hit = kv.admit(2, second, second.prompt_len, 4)
    assert hit.tokens == 16 * 12 and hit.by_tier == (("gpu", 192),)
    # the sliding group maps only the blocks holding the last window - 1 = 63 tokens before token 192
    assert kv.tokens[0].held(2) == 12 and kv.tokens[1].held(2) == 12 - (192 - 63) // 16
    kv.allocate(2, second.prompt_len)
    kv.check_invariants()


def test_a_sliding_group_that_lost_its_window_lowers_the_hit():
    kv = KVCoordinator(plan_pages((FULL, SLIDING), 16), 200, 0, prefix_cache="hash")
    first = _request(1, 16 * 12, 16 * 12)
    kv.admit(1, first, first.prompt_len, 4)
    kv.allocate(1, first.prompt_len)
    kv.free(1)
    sliding = kv.tokens[1]
    keys = kv.memo.get(first).upto(12)
    victim = sliding.cached(keys[10])  # evict the sliding group's block 10 only
    kv.pool.queue.discard(victim)
    del kv.pool.by_key[kv.pool.key_of[victim]]
    kv.pool.key_of[victim] = None
    kv.pool.rc[victim] = 1  # (a truly free block's)
    kv.pool._put_free([victim])  # as the pool's eviction would
    second = _request(2, 16 * 12 + 5, 16 * 12)
    # blocks 11 is cached but 10 is not: the window ending at 12 fails; the one ending at 10 needs
    # blocks (160 - 63) // 16 = 6 .. 9, all cached
    assert kv.peek_hit(second, second.prompt_len).tokens == 16 * 10
    kv.check_invariants()


CACHE_OPS = st.lists(st.tuples(st.sampled_from(["admit", "grow", "free", "undo"]), st.integers(0, 7),
                               st.integers(1, 60)), max_size=80)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(CACHE_OPS, st.sampled_from([(FULL,), (SLIDING,), (FULL, SLIDING)]))
def test_random_admissions_with_prefix_caching_keep_every_invariant(ops, groups):
    kv = KVCoordinator(plan_pages(groups, 8), 40, 0, prefix_cache="hash")
    length: dict[int, int] = {}
    next_seq = 0
    for op, content, n in ops:
        if op in ("admit", "undo"):
            seq = next_seq = next_seq + 1
            req = _request(seq, n + 8, 8 * (content % 4 + 1))
            hit = kv.admit(seq, req, req.prompt_len, 4).tokens
            assert hit % 8 == 0 and hit < req.prompt_len
            if op == "undo" or not kv.allocate(seq, req.prompt_len):
                if kv.has(seq):
                    kv.free(seq)  # the scheduler undoes an admission it could not place
            else:
                length[seq] = req.prompt_len
        elif op == "grow" and length:
            seq = sorted(length)[content % len(length)]
            target = length[seq] + n
            if kv.allocate(seq, target):
                length[seq] = target
        elif op == "free" and length:
            seq = sorted(length)[content % len(length)]
            kv.free(seq)
            del length[seq]
        kv.check_invariants()
        assert kv.used_blocks + kv.pool.num_free == kv.num_blocks


def test_set_computed_tokens_bounds_what_free_registers():
    """Block size 4, prompt 8 (2 pages keyed as allocated) grown to 21 slots (6 pages: a speculative
    sequence's drafts and lookahead past its tokens). Told 17 tokens with KV, free keys the floor(17 / 4)
    = 4 pages they fill: 4 cached; not told, every page but the last: 5."""
    from kvsim.workload.request import Request

    for told, cached in ((17, 4), (None, 5)):
        kv = KVCoordinator(plan_pages((FULL,), 4), 64, 0, prefix_cache="hash")
        kv.admit(1, Request(rid=1, arrival_s=0.0, prompt_len=8, output_len=10), 8, 10)
        kv.allocate(1, 8)
        kv.allocate(1, 21)
        assert kv.num_blocks_of(1) == 6
        if told is not None:
            kv.set_computed_tokens(1, told)
        kv.free(1)
        kv.check_invariants()
        assert kv.cached_blocks == cached


def test_a_finished_sequence_keys_its_full_pages():
    """No speculation, block size 4, prompt 8: the scheduler tells 8 + output - 1 tokens with KV (the last
    sampled token has none) and free keys floor of them / 4 pages in each group, the exactly full last
    one included (vLLM's cache_blocks). Output 9: 16 tokens in 4 full pages: 4 per group (before: every
    page but the last, 3); output 10: 17 tokens, 5 pages, 4 full: 4 (unchanged). With a sliding group
    (window 64, wider than the sequence: it keeps every page) each group keys its own: 8 in all."""
    from kvsim.workload.request import Request

    for groups, per in (((FULL,), 1), ((FULL, SLIDING), 2)):
        for output, cached in ((9, 4), (10, 4)):
            kv = KVCoordinator(plan_pages(groups, 4), 64, 0, prefix_cache="hash")
            kv.admit(1, Request(rid=1, arrival_s=0.0, prompt_len=8, output_len=output), 8, output)
            kv.allocate(1, 8)
            kv.allocate(1, 8 + output - 1)
            assert kv.num_blocks_of(1) == per * -(-(8 + output - 1) // 4)
            kv.set_computed_tokens(1, 8 + output - 1)
            kv.free(1)
            kv.check_invariants()
            assert kv.cached_blocks == per * cached
