"""Beam search on the paged layout: block counts of a small hand-built beam tree (fork, copy-on-write on the
last block, pruned beams freed), the seeded parent draws, and beam groups run through the scheduler."""

from __future__ import annotations

import numpy as np

from kvsim.engine.beam import BeamSearch, apply_selection
from kvsim.engine.breakdown import breakdown_of, check_scheduler_breakdown
from kvsim.engine.group import FINISHED, Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.kvcache.contiguous import ContiguousKVManager
from kvsim.kvcache.paged import PagedKVManager
from kvsim.workload.request import Request


def grow(m: PagedKVManager, seqs: list[int], tokens: int) -> None:
    for s in seqs:
        assert m.allocate(s, tokens)
    m.check_invariants()


def unshared(m: PagedKVManager) -> int:
    return sum(len(t) for t in m.tables.values())


def test_beam_tree_block_counts():
    """block_size 4, prompt 6, width 3.
    prompt:  seq 0 = [b0 (4 tokens), b1 (2)]; forks -> 3 tables share 2 blocks
    token 7: beams 0 and 1 copy the shared, partial b1 (copy-on-write); beam 2, the last sharer, writes b1
    token 8: parents [0, 0, 1]: beam 2 pruned (its b1 freed), beam 0 forks into it; beam 0 copies its
             shared last block, beam 2 then writes it in place
    token 9: parents [0, 0, 0]: beams 1 and 2 pruned, beam 0 forks twice; all last blocks are full, so
             each beam takes a fresh block and nothing is copied."""
    m = PagedKVManager(num_blocks=16, block_size=4)
    seqs = [0, 1, 2]
    grow(m, [0], 6)
    m.fork(0, 1)
    m.fork(0, 2)
    assert (m.used_blocks, unshared(m), m.shared_dup_tokens) == (2, 6, 12)

    grow(m, seqs, 7)
    assert (m.used_blocks, unshared(m), m.cow_copies) == (4, 6, 2)

    assert apply_selection(m, seqs, [0, 0, 1]) == 1
    assert m.used_blocks == 3 and m.tables[2] == m.tables[0]  # b0, beam 0's and beam 1's second blocks
    grow(m, seqs, 8)
    assert (m.used_blocks, unshared(m), m.cow_copies) == (4, 6, 3)

    assert apply_selection(m, seqs, [0, 0, 0]) == 2
    assert (m.used_blocks, unshared(m)) == (2, 6)
    grow(m, seqs, 9)
    assert (m.used_blocks, unshared(m), m.cow_copies) == (5, 9, 3)
    # memory saved by sharing (PagedAttention section 6.3): (9 - 5) / 9
    assert (unshared(m) - m.used_blocks) / unshared(m) == 4 / 9
    for s in seqs:
        m.free(s)
    assert m.used_blocks == 0 and m.shared_dup_tokens == 0


def test_identity_selection_changes_nothing():
    m = PagedKVManager(num_blocks=8, block_size=4)
    grow(m, [0], 5)
    m.fork(0, 1)
    before = {s: list(t) for s, t in m.tables.items()}
    assert apply_selection(m, [0, 1], [0, 1]) == 0 and m.tables == before


def test_contiguous_beams_copy_instead_of_sharing():
    m = ContiguousKVManager(num_blocks=8, block_size=4, policy="oracle", max_model_len=32)
    m.admit(0, Request(0, 0.0, 6, 4, beam_width=2), 6, 4)
    assert m.allocate(0, 6)
    m.fork(0, 1)
    m.allocate(0, 7)
    m.allocate(1, 7)
    assert apply_selection(m, [0, 1], [1, 1]) == 1  # beam 0 pruned: beam 1's 7 tokens copied into it
    assert m.cow_copies == 2 and m.ntok[0] == 7
    m.check_invariants()


def test_parents_are_seeded_and_in_range():
    a = BeamSearch(None, np.random.default_rng(3))
    b = BeamSearch(None, np.random.default_rng(3))
    draws = [a.parents(4) for _ in range(2000)]
    assert draws == [b.parents(4) for _ in range(2000)]
    flat = [p for d in draws for p in d]
    assert set(flat) == {0, 1, 2, 3}
    assert abs(np.mean(flat) - 1.5) < 0.05  # uniform over 0..3


def run_beam_group(kv, width: int, prompt: int, output: int) -> tuple[Scheduler, Group, list]:
    lim = SchedulerLimits(max_num_seqs=16, max_num_batched_tokens=64, chunked_prefill=True,
                          preemption_mode="recompute", watermark_blocks=0, bytes_per_block=1.0, beam_seed=5)
    s = Scheduler(lim, kv)
    g = Group(req=Request(0, 0.0, prompt, output, beam_width=width), order=0, seqs=list(range(width)),
              output=output, prompt=prompt, n=width)
    s.add(g)
    rows = []
    for it in range(output + 2):
        if not s.has_work():
            break
        s.schedule(float(it))
        kv.check_invariants()
        check_scheduler_breakdown(s)
        rows.append((s.token_states(), kv.used_blocks, breakdown_of(s, s.token_states())[4]))
        s.complete(it + 1.0)
    return s, g, rows


def test_beam_group_through_scheduler_paged():
    kv = PagedKVManager(num_blocks=32, block_size=4)
    s, g, rows = run_beam_group(kv, width=3, prompt=6, output=5)
    assert g.state == FINISHED and g.finish_s == 5.0 and kv.used_blocks == 0
    # iteration 0: prefill of 6 tokens in one sequence: 2 blocks, 6 states
    assert rows[0] == (6, 2, 2)
    # iteration 1: 3 beams at 7 tokens forked from the prompt: 4 shared states + 3 x 3 own = 13 states,
    # blocks b0 + three second blocks (two copied) = 4, without sharing 3 x 2 = 6
    assert rows[1] == (13, 4, 6)
    # without sharing every beam would hold ceil(len / 4) blocks; sharing never holds more
    for _, used, unshared_blocks in rows[1:]:
        assert used <= unshared_blocks
    assert kv.cow_copies >= 2 and s.beam.steps == 4


def test_paged_unshared_blocks_matches_tables():
    kv = PagedKVManager(num_blocks=64, block_size=4)
    lim = SchedulerLimits(16, 64, True, "recompute", 0, 1.0, beam_seed=1)
    s = Scheduler(lim, kv)
    for rid, (p, o, w) in enumerate([(6, 9, 3), (9, 4, 1), (3, 7, 2)]):
        seqs = list(range(10 * rid, 10 * rid + w))
        s.add(Group(req=Request(rid, 0.0, p, o, beam_width=w), order=rid, seqs=seqs, output=o, prompt=p,
                    n=w))
    for it in range(12):
        s.schedule(float(it))
        assert s.unshared_blocks() == sum(len(t) for t in kv.tables.values())
        s.complete(it + 1.0)
    assert not s.has_work() and kv.used_blocks == 0


def test_beam_group_through_scheduler_contiguous():
    kv = ContiguousKVManager(num_blocks=16, block_size=4, policy="oracle", max_model_len=64)
    s, g, rows = run_beam_group(kv, width=2, prompt=6, output=5)
    assert g.state == FINISHED and kv.space.free_slots == 64
    # two regions of 6 + 5 = 11 slots reserved at admission; nothing shared
    assert rows[0] == (6, -(-22 // 4), -(-22 // 4))
    assert rows[1][0] == 14  # 2 beams x 7 tokens, each its own copy
