"""Contiguous KV layouts: reservation sizes, the manager's KVManager behaviour, and hand-computed memory
breakdowns of two or three requests per layout run through the scheduler."""

from __future__ import annotations

import pytest

from kvsim.engine.breakdown import breakdown_of, check_scheduler_breakdown
from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.kvcache.contiguous import (
    ContiguousKVManager,
    build_contiguous,
    final_slots,
    next_pow2,
    reservation_slots,
)
from kvsim.kvcache.paged import PagedKVManager
from kvsim.scenario import KVConfig
from kvsim.workload.request import Request


def test_next_pow2_and_reservations():
    assert [next_pow2(x) for x in (1, 2, 3, 4, 5, 512, 513)] == [1, 2, 4, 4, 8, 512, 1024]
    assert reservation_slots("max", 100, 300, 2048) == 2048
    assert reservation_slots("pow2", 100, 300, 2048) == 100 + 512
    # next_pow2(200) = 256 would pass max_model_len: capped at 2048 - 1800 = 248
    assert reservation_slots("pow2", 1800, 200, 2048) == 2048
    assert reservation_slots("oracle", 100, 300, 2048) == 400
    assert final_slots(100, 300) == 399 and final_slots(10, 1) == 10
    with pytest.raises(ValueError):
        reservation_slots("min", 1, 1, 8)


def test_manager_places_whole_region_at_admission():
    m = ContiguousKVManager(num_blocks=4, block_size=4, policy="oracle", max_model_len=16)
    r = Request(0, 0.0, prompt_len=3, output_len=3)
    assert m.admit(0, r, 3, 3).tokens == 0 and not m.has(0)
    assert m.blocks_needed(0, 3) == 6 // 4  # a 6-slot region, floor in blocks
    assert m.allocate(0, 3) and m.has(0)
    assert m.capacity_tokens(0) == 6 and m.num_blocks_of(0) == 2
    assert (m.num_free_blocks, m.used_blocks) == (10 // 4, 2)
    assert m.blocks_needed(0, 6) == 0 and not m.grow_one_block(0, 4) and not m.last_block_shared(0)
    assert (m.reserved_slots, m.never_filled_slots) == (6, 1)
    with pytest.raises(RuntimeError):
        m.blocks_needed(0, 7)
    m.check_invariants()
    assert m.free(0) == 1 and m.space.free_slots == 16 and m.reserved_slots == 0
    with pytest.raises(RuntimeError):
        m.blocks_needed(5, 3)  # never admitted


def test_no_hole_large_enough_blocks_admission():
    m = ContiguousKVManager(num_blocks=6, block_size=4, policy="oracle", max_model_len=24)
    for seq, (p, o) in enumerate([(6, 2), (6, 2), (6, 2)]):  # three 8-slot regions fill the 24 slots
        m.admit(seq, Request(seq, 0.0, p, o), p, o)
        assert m.allocate(seq, p)
    m.free(0)
    m.free(2)  # holes [0, 8) and [16, 24): 16 slots free, none 9 long
    m.admit(3, Request(3, 0.0, 5, 4), 5, 4)
    assert m.num_free_blocks == 4 and m.blocks_needed(3, 5) == 5  # more than free: the scheduler waits
    assert not m.allocate(3, 5) and not m.has(3)
    m.check_invariants()


def test_parallel_samples_get_their_own_regions():
    m = ContiguousKVManager(num_blocks=8, block_size=4, policy="oracle", max_model_len=32)
    r = Request(0, 0.0, prompt_len=5, output_len=3, n=3)
    m.admit(0, r, 5, 3)
    assert m.blocks_needed(0, 5) == 3 * 8 // 4
    assert m.allocate(0, 5) and m.reserved_slots == 24 and m.never_filled_slots == 3
    m.fork(0, 1)
    m.fork(0, 2)
    assert m.regions == {0: (0, 8), 1: (8, 8), 2: (16, 8)} and m.ntok[2] == 5
    assert m.cow_copies == 0  # the prompt's KV is written to every region at the end of prefill
    m.reparent(1, 0)  # a beam overwritten with another's KV copies ceil(5 / 4) blocks
    assert m.cow_copies == 2
    with pytest.raises(RuntimeError):
        m.fork(0, 3)
    m.check_invariants()
    for s in (1, 0, 2):
        m.free(s)
    assert m.space.holes() == [(0, 32)] and m.never_filled_slots == 0


def test_build_contiguous_and_refuse_reason():
    # the pool-size and combination rules live in the Simulation / the schema (tests/engine, test_scenario)
    m = build_contiguous(KVConfig(block_size=4, layout="contiguous:pow2", placement="best_fit"), 8, 32)
    assert (m.policy, m.block_size, m.num_blocks, m.evictions, m.cached_blocks) == ("pow2", 4, 8, 0, 0)
    m = ContiguousKVManager(4, 4, "pow2", 64)
    assert m.refuse_reason(Request(0, 0.0, 10, 10), 10) == (
        "contiguous reservation of 1 x 26 slots exceeds the KV capacity of 16 slots")
    assert m.refuse_reason(Request(0, 0.0, 2, 2), 2) is None


# ---------------------------------------------------------------------------------------------- breakdowns
def sched_with(kv) -> Scheduler:
    lim = SchedulerLimits(max_num_seqs=8, max_num_batched_tokens=64, chunked_prefill=True,
                          preemption_mode="recompute", watermark_blocks=0, bytes_per_block=1.0)
    return Scheduler(lim, kv)


def add(s: Scheduler, rid: int, prompt: int, output: int) -> Group:
    g = Group(req=Request(rid, 0.0, prompt, output), order=rid, seqs=[rid], output=output, prompt=prompt)
    s.add(g)
    return g


def rows(s: Scheduler, iterations: int) -> list[tuple[int, ...]]:
    """(token states, reservation, internal, external, free) after each iteration's scheduling."""
    out = []
    for it in range(iterations):
        s.schedule(float(it))
        states = s.token_states()
        out.append((states, *breakdown_of(s, states)[:4]))
        s.kv.check_invariants()
        check_scheduler_breakdown(s)
        s.complete(it + 1.0)
    return out


@pytest.mark.parametrize("policy, expected", [
    # r0 P=4 O=3 (final 6 slots), r1 P=6 O=2 (final 7): both prefill in iteration 0 (10 token states),
    # then both decode once (r0 5 + r1 7 = 12); r1 finishes after iteration 1, r0 after iteration 2.
    # Reservation counts the slots the two will still fill: 2 + 1 = 3, then 1 + 0, then 0.
    ("oracle", [(10, 3, 2, 0, 17), (12, 1, 2, 0, 17), (6, 0, 1, 0, 25)]),  # regions 7 + 8, never 1 + 1
    ("pow2", [(10, 3, 3, 0, 16), (12, 1, 3, 0, 16), (6, 0, 2, 0, 24)]),    # 4+4=8 (never 2), 6+2=8 (1)
    ("max", [(10, 3, 19, 0, 0), (12, 1, 19, 0, 0), (6, 0, 10, 0, 16)]),    # 16 each: never 10 + 9
])
def test_breakdown_two_requests(policy, expected):
    s = sched_with(ContiguousKVManager(num_blocks=8, block_size=4, policy=policy, max_model_len=16))
    add(s, 0, 4, 3)
    add(s, 1, 6, 2)
    assert rows(s, 3) == expected


def test_breakdown_paged_two_requests():
    s = sched_with(PagedKVManager(num_blocks=8, block_size=4))
    add(s, 0, 4, 3)
    add(s, 1, 6, 2)
    # it0: blocks 1 + 2 = 12 slots for 10 states; it1: lengths 5 and 7 -> 2 + 2 blocks = 16 slots for 12;
    # it2: r0 alone at 6 -> 2 blocks = 8 slots
    assert rows(s, 3) == [(10, 0, 2, 0, 20), (12, 0, 4, 0, 16), (6, 0, 2, 0, 24)]


def test_external_fragmentation_when_no_hole_fits():
    """Oracle, first fit, 24 slots. r0 (P6 O2 -> 8 slots) at [0, 8), r1 (P4 O4 -> 8) at [8, 16), r2 (P3 O3
    -> 6) at [16, 22); r3 (P5 O4 -> 9) waits. After r0 finishes the holes are 8 and 2 (10 free, none 9
    long), after r2 8 and 8: all of it is external fragmentation. r3 fits once r1 leaves."""
    s = sched_with(ContiguousKVManager(num_blocks=6, block_size=4, policy="oracle", max_model_len=24))
    for rid, (p, o) in enumerate([(6, 2), (4, 4), (3, 3), (5, 4)]):
        add(s, rid, p, o)
    assert rows(s, 5) == [
        (13, 6, 3, 2, 0),   # prefills 6 + 4 + 3; reserved 22 = 13 + 6 + never 3; hole [22, 24)
        (16, 3, 3, 2, 0),   # lengths 7, 5, 4
        (11, 1, 2, 10, 0),  # r0 gone: lengths 6 + 5; holes 8 + 2 < 9
        (7, 0, 1, 16, 0),   # r2 gone: r1 at 7 of its 8 slots; holes 8 + 8 < 9
        (5, 3, 1, 0, 15),   # r3 admitted at [0, 9): prefill 5 of final 8
    ]


def test_breakdown_buddy_rounds_regions_up():
    # oracle reservations 7 and 8 slots become buddy blocks of 8 and 8: never-filled 8 - 6 and 8 - 7
    s = sched_with(ContiguousKVManager(num_blocks=8, block_size=4, policy="oracle", max_model_len=16,
                                       placement="buddy"))
    add(s, 0, 4, 3)
    add(s, 1, 6, 2)
    assert rows(s, 3) == [(10, 3, 3, 0, 16), (12, 1, 3, 0, 16), (6, 0, 2, 0, 24)]
    assert s.kv.space.holes() == [(0, 32)]  # both gone: the buddies merged back into one block


def test_buddy_external_fragmentation():
    """Oracle + buddy, 32 slots: r0 (P6 O2 -> 8), r1 (P9 O7 -> 16 -> 16), r2 (P3 O3 -> 6 -> 8) fill it;
    r3 (P5 O4 -> 9 -> 16) waits until a 16-block is free: r0 and r2 leaving frees two 8-blocks that are
    not buddies of each other, all of it external fragmentation for a 16-slot block."""
    m = ContiguousKVManager(num_blocks=8, block_size=4, policy="oracle", max_model_len=32, placement="buddy")
    for seq, (p, o) in enumerate([(6, 2), (9, 7), (3, 3)]):
        m.admit(seq, Request(seq, 0.0, p, o), p, o)
        assert m.allocate(seq, p)
    assert [m.regions[s] for s in range(3)] == [(0, 8), (16, 16), (8, 8)]
    m.free(0)
    m.free(2)  # [0, 8) + [8, 8) merge: buddies -> one 16-block
    m.admit(3, Request(3, 0.0, 5, 4), 5, 4)
    assert m.allocate(3, 5) and m.regions[3] == (0, 16)
    m.check_invariants()
