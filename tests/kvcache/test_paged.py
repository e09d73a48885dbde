"""PagedKVManager: block counts, all-or-nothing allocation, fork, copy-on-write, swap (hand-computed)."""

import pytest

from kvsim.kvcache.paged import PagedKVManager


def snapshot(m: PagedKVManager):
    return (
        {s: list(t) for s, t in m.tables.items()},
        dict(m.ntok),
        list(m.pool.refcount),
        m.pool.free_ids(),
        m.shared_dup_tokens,
        m.cow_copies,
        {s: (list(t), n) for s, (t, n) in m.swapped.items()},
        m.swap_used_blocks,
    )


def token_states(m: PagedKVManager) -> int:
    return sum(m.ntok.values()) - m.shared_dup_tokens


@pytest.mark.parametrize(("tokens", "blocks"), [(0, 0), (1, 1), (15, 1), (16, 1), (17, 2), (32, 2), (33, 3)])
def test_new_sequence_block_count(tokens, blocks):
    m = PagedKVManager(8, 16)
    assert m.blocks_needed(0, tokens) == blocks
    assert m.allocate(0, tokens)
    assert m.num_blocks_of(0) == blocks
    assert (m.used_blocks, m.num_free_blocks) == (blocks, 8 - blocks)
    m.check_invariants()


def test_append_across_block_boundaries():
    m = PagedKVManager(8, 16)
    assert m.allocate(0, 1)
    assert m.tables[0] == [0]
    assert m.blocks_needed(0, 16) == 0
    assert m.allocate(0, 16)
    assert m.tables[0] == [0]
    assert m.blocks_needed(0, 17) == 1
    assert m.allocate(0, 17)
    assert m.tables[0] == [0, 1]
    assert m.allocate(0, 10)  # shrinking is a no-op
    assert (m.tables[0], m.ntok[0]) == ([0, 1], 17)
    assert m.allocate(0, 49)  # 17 -> 49 tokens: 2 -> 4 blocks
    assert m.tables[0] == [0, 1, 2, 3]
    m.check_invariants()


def test_allocation_is_all_or_nothing():
    m = PagedKVManager(3, 16)
    assert m.allocate(0, 32)
    before = snapshot(m)
    assert not m.allocate(1, 33)  # needs 3, 1 free
    assert not m.allocate(0, 49)  # needs 2 more, 1 free
    assert snapshot(m) == before
    assert m.allocate(0, 48)
    assert m.num_free_blocks == 0
    m.check_invariants()


def test_copy_on_write_counts_in_all_or_nothing():
    m = PagedKVManager(3, 4)
    assert m.allocate(0, 6)  # [0, 1], block 1 holds 2 tokens
    m.fork(0, 1)
    before = snapshot(m)
    assert m.blocks_needed(1, 9) == 2  # one copy + one new block, only 1 free
    assert not m.allocate(1, 9)
    assert snapshot(m) == before
    assert m.blocks_needed(1, 8) == 1
    assert m.allocate(1, 8)
    assert (m.tables[1], m.cow_copies) == ([0, 2], 1)
    m.check_invariants()


def test_free_returns_blocks_and_reuse_is_lifo():
    m = PagedKVManager(6, 16)
    assert m.allocate(0, 48)  # [0, 1, 2]
    assert m.allocate(1, 1)  # [3]
    assert m.free(0) == 3
    assert (m.used_blocks, m.num_free_blocks) == (1, 5)
    assert m.allocate(2, 48)
    assert m.tables[2] == [2, 1, 0]  # most recently freed first
    assert m.allocate(3, 32)
    assert m.tables[3] == [4, 5]
    m.check_invariants()


def test_double_free_raises():
    m = PagedKVManager(4, 16)
    assert m.allocate(0, 20)
    m.free(0)
    before = snapshot(m)
    with pytest.raises(KeyError):
        m.free(0)
    assert snapshot(m) == before


def test_fork_shares_all_blocks():
    m = PagedKVManager(8, 16)
    assert m.allocate(0, 40)  # [0, 1, 2]
    m.fork(0, 1)
    assert m.tables[1] == [0, 1, 2]
    assert m.tables[1] is not m.tables[0]
    assert m.pool.refcount[:3] == [2, 2, 2]
    assert m.used_blocks == 3
    assert m.shared_dup_tokens == 40
    assert token_states(m) == 40
    assert m.free(0) == 0  # the child still holds every block
    assert m.pool.refcount[:3] == [1, 1, 1]
    assert m.shared_dup_tokens == 0
    assert m.free(1) == 3
    m.check_invariants()


def test_copy_on_write_three_way_fork_last_writer_does_not_copy():
    m = PagedKVManager(8, 16)
    assert m.allocate(0, 20)  # [0, 1]; block 1 holds 4 tokens
    m.fork(0, 1)
    m.fork(0, 2)
    assert m.shared_dup_tokens == 40
    assert m.allocate(1, 21)
    assert (m.tables[1], m.cow_copies, m.pool.refcount[1]) == ([0, 2], 1, 2)
    assert m.shared_dup_tokens == 36  # block 0 shared 3 ways (32) + block 1 shared 2 ways (4)
    assert m.allocate(2, 21)
    assert (m.tables[2], m.cow_copies, m.pool.refcount[1]) == ([0, 3], 2, 1)
    assert m.shared_dup_tokens == 32
    assert m.allocate(0, 21)  # sole owner of block 1 now: write in place
    assert (m.tables[0], m.cow_copies) == ([0, 1], 2)
    assert m.shared_dup_tokens == 32
    assert token_states(m) == 16 + 3 * 5
    assert m.used_blocks == 4
    m.check_invariants()


def test_copy_on_write_then_grow_past_the_block():
    m = PagedKVManager(8, 16)
    assert m.allocate(0, 20)
    m.fork(0, 1)
    assert m.blocks_needed(1, 40) == 2  # copy of block 1 + block for tokens 33..40
    assert m.allocate(1, 40)
    assert (m.tables[1], m.cow_copies) == ([0, 2, 3], 1)
    assert m.shared_dup_tokens == 16
    m.check_invariants()


def test_no_copy_when_shared_last_block_is_full():
    m = PagedKVManager(8, 16)
    assert m.allocate(0, 32)  # [0, 1], both full
    m.fork(0, 1)
    assert m.blocks_needed(1, 33) == 1
    assert m.allocate(1, 33)
    assert m.allocate(0, 33)
    assert (m.tables[0], m.tables[1], m.cow_copies) == ([0, 1, 3], [0, 1, 2], 0)
    assert m.shared_dup_tokens == 32
    assert token_states(m) == 34
    m.check_invariants()


def test_free_of_forked_sequence_updates_shared_dup_tokens():
    m = PagedKVManager(8, 4)
    assert m.allocate(0, 10)  # [0, 1, 2]; block 2 holds 2 tokens
    m.fork(0, 1)
    m.fork(0, 2)
    assert m.shared_dup_tokens == 20
    assert m.free(1) == 0
    assert m.shared_dup_tokens == 10
    assert m.allocate(2, 13)  # copy of block 2, plus block 3
    assert m.shared_dup_tokens == 8
    assert m.free(0) == 1  # block 2 had only seq 0 left
    assert m.shared_dup_tokens == 0
    m.check_invariants()


def test_swap_out_and_in_preserve_sharing():
    m = PagedKVManager(8, 4, swap_capacity_blocks=8)
    assert m.allocate(9, 4)  # a bystander on block 0
    assert m.allocate(0, 10)  # [1, 2, 3]
    m.fork(0, 1)
    assert m.allocate(1, 12)  # copy of block 3 -> [1, 2, 4]
    rc_before = [[m.pool.refcount[b] for b in m.tables[s]] for s in (0, 1)]
    assert rc_before == [[2, 2, 1], [2, 2, 1]]
    dup_before = m.shared_dup_tokens
    assert dup_before == 8
    assert m.can_swap_out([0, 1])
    assert m.swap_out([0, 1]) == 4
    assert (m.used_blocks, m.swap_used_blocks, m.shared_dup_tokens) == (1, 4, 0)
    assert set(m.tables) == {9}
    m.check_invariants()
    assert m.allocate(7, 8)  # move blocks around so swap-in lands elsewhere
    assert m.swap_blocks_needed([0, 1]) == 4
    assert m.swap_in([0, 1]) == 4
    a, b = m.tables[0], m.tables[1]
    assert a[:2] == b[:2] and a[2] != b[2]
    assert [[m.pool.refcount[x] for x in m.tables[s]] for s in (0, 1)] == rc_before
    assert (m.ntok[0], m.ntok[1]) == (10, 12)
    assert m.shared_dup_tokens == dup_before
    assert (m.used_blocks, m.swap_used_blocks) == (1 + 2 + 4, 0)
    m.check_invariants()


def test_swap_out_part_of_a_fork_group():
    m = PagedKVManager(8, 4, swap_capacity_blocks=8)
    assert m.allocate(0, 8)  # [0, 1]
    m.fork(0, 1)
    assert m.allocate(1, 9)  # [0, 1, 2]
    assert m.swap_out([1]) == 3
    assert (m.used_blocks, m.swap_used_blocks, m.shared_dup_tokens) == (2, 3, 0)
    assert m.pool.refcount[:3] == [1, 1, 0]
    m.check_invariants()
    assert m.swap_in([1]) == 3  # the host copy comes back on its own blocks
    assert not set(m.tables[1]) & set(m.tables[0])
    assert (m.used_blocks, m.swap_used_blocks, m.shared_dup_tokens) == (5, 0, 0)
    m.check_invariants()


def test_swap_capacity_counts_shared_blocks_once():
    m = PagedKVManager(8, 4, swap_capacity_blocks=4)
    assert m.allocate(0, 16)  # 4 blocks
    m.fork(0, 1)
    assert m.allocate(2, 1)
    assert m.unique_blocks([0, 1]) == 4
    assert m.can_swap_out([0, 1])
    assert not m.can_swap_out([0, 1, 2])
    assert m.swap_out([0, 1]) == 4
    assert m.swap_used_blocks == 4
    assert not m.can_swap_out([2])
    assert m.swap_in([0, 1]) == 4
    assert m.can_swap_out([2])
    assert PagedKVManager(8, 4).can_swap_out([]) is True
    m.check_invariants()


def test_grow_one_block_appends_or_changes_nothing():
    m = PagedKVManager(2, 16)
    assert m.allocate(0, 16)
    assert (m.capacity_tokens(0), m.last_block_shared(0)) == (16, False)
    assert m.grow_one_block(0, 17)
    assert (m.tables[0], m.ntok[0], m.capacity_tokens(0)) == ([0, 1], 17, 32)
    assert m.allocate(0, 32)
    before = snapshot(m)
    assert not m.grow_one_block(0, 33)
    assert snapshot(m) == before
    m.check_invariants()


def test_grow_one_block_matches_allocate_on_a_block_boundary():
    a, b = PagedKVManager(8, 4), PagedKVManager(8, 4)
    for m in (a, b):
        assert m.allocate(0, 8)
        m.fork(0, 1)  # full shared last block: no copy needed
    assert a.grow_one_block(1, 9)
    assert b.allocate(1, 9)
    assert snapshot(a) == snapshot(b)
    a.check_invariants()


def test_last_block_shared_and_capacity():
    m = PagedKVManager(8, 4)
    assert m.allocate(0, 6)
    assert (m.capacity_tokens(0), m.last_block_shared(0)) == (8, False)
    m.fork(0, 1)
    assert m.last_block_shared(0) and m.last_block_shared(1)
    assert m.allocate(1, 7)
    assert not m.last_block_shared(0) and not m.last_block_shared(1)
    assert m.allocate(2, 8)
    m.fork(2, 3)
    assert not m.last_block_shared(3)  # full block: next token goes to a new block


def test_has_and_admit():
    m = PagedKVManager(4, 4, swap_capacity_blocks=4)
    assert not m.has(0)
    assert m.admit(0, None, 100, 10).tokens == 0  # no prefix cache
    assert m.allocate(0, 3)
    assert m.has(0)
    m.swap_out([0])
    assert not m.has(0)
    m.swap_in([0])
    assert m.has(0)
    m.free(0)
    assert not m.has(0)


def _three_sequences(num_blocks):
    """Sequences 0, 1, 2 of 1, 2, 1 full blocks; with more than 4,096 blocks, exactly three left on the free
    stack (a batch of three empties it)."""
    kv = PagedKVManager(num_blocks, 16)
    kv.allocate(0, 16)
    kv.allocate(1, 32)
    kv.allocate(2, 16)
    if num_blocks > 4096:
        kv.allocate(9, (4096 - 4 - 3) * 16)
    return kv


def _grown(kv, seqs, tokens):
    tables = {s: (list(kv.tables[s]), kv.ntok[s]) for s in seqs}
    return tables, kv.pool.known_free_ids(), list(kv.pool.refcount)


@pytest.mark.parametrize("num_blocks", [20, 4096 + 9])  # the second refills the free stack mid-way
def test_grow_each_takes_the_blocks_one_by_one_growth_would(num_blocks):
    seqs, tokens = [0, 1, 2], [17, 33, 17]
    runs = []
    for batched in (False, True):
        kv = _three_sequences(num_blocks)
        if batched:
            assert kv.grow_each(seqs, tokens)
        else:
            for s, n in zip(seqs, tokens, strict=True):
                assert kv.grow_one_block(s, n)
        runs.append(_grown(kv, seqs, tokens))
    assert runs[0] == runs[1]
    if num_blocks == 20:
        assert runs[0][0] == {0: ([0, 4], 17), 1: ([1, 2, 5], 33), 2: ([3, 6], 17)}


@pytest.mark.parametrize("num_blocks", [20, 4096 + 9])
def test_grow_due_is_grow_each_over_the_due_entries(num_blocks):
    seqs, tokens = [0, 1, 2], [17, 33, 17]
    runs = []
    for due in (False, True):
        kv = _three_sequences(num_blocks)
        if due:  # (epoch, group, sequence, base): base + offset slots
            assert kv.grow_due([(0, None, s, n - 5) for s, n in zip(seqs, tokens, strict=True)], 5)
        else:
            assert kv.grow_each(seqs, tokens)
        runs.append(_grown(kv, seqs, tokens))
    assert runs[0] == runs[1]


def test_grow_due_short_of_blocks_changes_nothing():
    kv = PagedKVManager(4, 16)
    kv.allocate(0, 32)
    kv.allocate(1, 16)
    before = _grown(kv, [0, 1], [])
    assert not kv.grow_due([(0, None, 0, 30), (0, None, 1, 14)], 3)
    assert _grown(kv, [0, 1], []) == before


def test_grow_each_short_of_blocks_changes_nothing():
    kv = PagedKVManager(4, 16)
    kv.allocate(0, 32)
    kv.allocate(1, 16)
    before = _grown(kv, [0, 1], [])
    assert not kv.grow_each([0, 1], [33, 17])  # two wanted, one free
    assert _grown(kv, [0, 1], []) == before
    assert kv.grow_each([], [])
    assert _grown(kv, [0, 1], []) == before


def test_copies_and_pickles_keep_every_field():
    """__reduce__ (an extension type when compiled): a deep copy or a pickle is an independent manager with
    the same tables, counts and pool, and goes on allocating as the original would."""
    import copy
    import pickle

    m = PagedKVManager(8, 4, swap_capacity_blocks=4)
    m.allocate(1, 6)
    m.fork(1, 2)
    m.allocate(2, 7)
    m.swap_out([2])
    before = snapshot(m)
    for how in (copy.deepcopy, lambda x: pickle.loads(pickle.dumps(x))):
        c = how(m)
        assert type(c) is PagedKVManager and c.pool is not m.pool and c.host is not m.host
        assert snapshot(c) == before
        c.check_invariants()
        c.swap_in([2])
        c.allocate(3, 5)
        c.check_invariants()
        assert snapshot(m) == before  # the original is untouched
        d = how(m)
        d.swap_in([2])
        d.allocate(3, 5)
        assert snapshot(d) == snapshot(c)
