"""PagedKVManager swap-in of sequences that were not swapped out together: host blocks get their own
ids (GPU ids are reused once freed) and are released when the last sequence holding them comes back."""


from kvsim.kvcache.paged import PagedKVManager


def test_same_batch_round_trip_is_fine():
    m = PagedKVManager(4, 4, swap_capacity_blocks=8)
    assert m.allocate(0, 4)
    m.fork(0, 1)
    m.swap_out([0, 1])
    assert m.swap_in([0, 1]) == 1
    assert m.tables[0] == m.tables[1]
    assert m.swap_used_blocks == 0
    m.check_invariants()


def test_unrelated_sequences_from_two_batches_do_not_share_after_swap_in():
    m = PagedKVManager(4, 4, swap_capacity_blocks=8)
    assert m.allocate(0, 4)  # block 0
    m.swap_out([0])
    assert m.allocate(1, 4)  # block 0 again (LIFO), different content
    m.swap_out([1])
    assert m.swap_used_blocks == 2
    assert m.swap_blocks_needed([0, 1]) == 2
    assert m.swap_in([0, 1]) == 2
    assert m.tables[0] != m.tables[1]
    assert (m.used_blocks, m.swap_used_blocks, m.shared_dup_tokens) == (2, 0, 0)


def test_block_written_while_its_twin_was_swapped_out_is_not_shared_again():
    m = PagedKVManager(4, 4, swap_capacity_blocks=8)
    assert m.allocate(0, 6)  # [0, 1]; block 1 holds tokens 5-6
    m.fork(0, 1)
    m.swap_out([0])  # host copy of block 1 holds tokens 5-6 of seq 0
    assert m.allocate(1, 7)  # seq 1 now owns block 1 alone and writes token 7 in place
    assert m.cow_copies == 0
    m.swap_out([1])
    m.swap_in([0, 1])
    assert m.tables[0][1] != m.tables[1][1]
    assert m.swap_used_blocks == 0


def test_partial_swap_in_of_a_batch_keeps_host_accounting():
    m = PagedKVManager(4, 4, swap_capacity_blocks=8)
    assert m.allocate(0, 4)
    m.fork(0, 1)
    m.swap_out([0, 1])
    assert m.swap_used_blocks == 1
    m.swap_in([0])
    assert m.swap_used_blocks == 1  # seq 1 still holds the host block
    m.swap_in([1])
    assert m.swap_used_blocks == 0
