"""Hand-computed scheduling cases for the continuous-batching scheduler."""

from __future__ import annotations

import pytest

from kvsim.engine.group import DECODE, FINISHED, PREFILL, RUNNING, WAITING, Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.errors import KvsimError
from kvsim.kvcache.paged import PagedKVManager
from kvsim.workload.request import Request


def make(num_blocks=64, bs=16, max_seqs=8, max_tokens=64, chunked=True, mode="recompute", watermark=0,
         swap_blocks=0):
    kv = PagedKVManager(num_blocks, bs, swap_capacity_blocks=swap_blocks)
    lim = SchedulerLimits(max_seqs, max_tokens, chunked, mode, watermark, bytes_per_block=100.0)
    return Scheduler(lim, kv)


_seq = [0]


def group(rid, prompt, output, n=1):
    seqs = list(range(_seq[0], _seq[0] + n))
    _seq[0] += n
    return Group(req=Request(rid, 0.0, prompt, output, n=n), order=rid, seqs=seqs, output=output,
                 prompt=prompt, n=n)


def step(s: Scheduler, t: float):
    batch = s.schedule(t)
    s.kv.check_invariants()
    done = s.complete(t + 1.0)
    return batch, done


def test_single_request_prefill_then_decode():
    s = make()
    g = group(0, prompt=20, output=5)
    s.add(g)
    b, done = step(s, 0.0)
    assert (b.prefill_tokens, b.decode_seqs, b.prefill_seqs) == (20, 0, 1)
    assert b.prefill_attn_pairs == 20 * 21 / 2
    assert s.kv.used_blocks == 2 and not done
    assert g.phase == DECODE and g.generated == 1 and g.first_token_s == 1.0
    contexts = []
    for it in range(1, 5):
        b, done = step(s, float(it))
        contexts.append(b.decode_context_tokens)
        assert b.decode_seqs == 1 and b.decode_blocks == 2
    # decode iterations feed output tokens 1..4: context 21, 22, 23, 24
    assert contexts == [21, 22, 23, 24]
    assert done == [g] and g.state == FINISHED and g.finish_s == 5.0
    assert s.kv.used_blocks == 0 and not s.has_work()


def test_output_of_one_token_finishes_at_prefill():
    s = make()
    g = group(0, prompt=10, output=1)
    s.add(g)
    _, done = step(s, 0.0)
    assert done == [g] and g.first_token_s == g.finish_s == 1.0
    assert s.kv.used_blocks == 0


def test_chunked_prefill_splits_prompt_by_token_budget():
    s = make(max_seqs=4, max_tokens=32)
    g = group(0, prompt=100, output=2)
    s.add(g)
    chunks = []
    for it in range(4):
        b, _ = step(s, float(it))
        chunks.append(b.prefill_tokens)
    assert chunks == [32, 32, 32, 4]
    assert g.phase == DECODE and g.first_token_s == 4.0
    # last chunk of 4 after 96 computed: 4 * 96 + 4 * 5 / 2 attention pairs
    s2 = make(max_seqs=4, max_tokens=32)
    g2 = group(1, prompt=100, output=2)
    s2.add(g2)
    for it in range(3):
        step(s2, float(it))
    b = s2.schedule(3.0)
    assert b.prefill_attn_pairs == 4 * 96 + 10


def test_without_chunked_prefill_a_prompt_waits_for_the_whole_budget():
    s = make(max_seqs=4, max_tokens=32, chunked=False)
    a = group(0, prompt=20, output=3)
    b_ = group(1, prompt=20, output=3)
    s.add(a)
    s.add(b_)
    b, _ = step(s, 0.0)
    assert b.prefill_tokens == 20 and b_.state == WAITING  # 20 + 20 > 32
    b, _ = step(s, 1.0)
    # a decodes (1 token), b's whole prompt of 20 fits in the remaining 31
    assert (b.decode_seqs, b.prefill_tokens) == (1, 20)


def test_decode_first_then_new_prefills_share_the_budget():
    s = make(max_seqs=4, max_tokens=16)
    a = group(0, prompt=8, output=10)
    s.add(a)
    step(s, 0.0)
    c = group(1, prompt=40, output=2)
    s.add(c)
    b, _ = step(s, 1.0)
    assert (b.decode_seqs, b.prefill_tokens) == (1, 15)


def test_block_boundary_allocates_one_block():
    s = make()
    g = group(0, prompt=16, output=3)
    s.add(g)
    step(s, 0.0)
    assert s.kv.used_blocks == 1
    b, _ = step(s, 1.0)  # writes token 17 -> second block
    assert s.kv.used_blocks == 2 and b.decode_blocks == 2 and b.decode_context_tokens == 17


def test_max_num_seqs_limits_admission():
    s = make(max_seqs=2, max_tokens=64)
    gs = [group(i, prompt=4, output=5) for i in range(3)]
    for g in gs:
        s.add(g)
    b, _ = step(s, 0.0)
    assert b.prefill_seqs == 2 and gs[2].state == WAITING


def test_watermark_blocks_admission_while_others_run():
    s = make(num_blocks=10, bs=4, max_tokens=64, watermark=3)
    a = group(0, prompt=15, output=50)   # 4 blocks; its 16th token still fits
    s.add(a)
    step(s, 0.0)
    c = group(1, prompt=12, output=2)    # needs 3 blocks: 6 free - 3 = 3 >= watermark -> admitted
    d = group(2, prompt=4, output=2)     # needs 1 more: 3 free - 1 = 2 < 3 -> waits
    s.add(c)
    s.add(d)
    step(s, 1.0)
    assert c.state == RUNNING and d.state == WAITING


def test_recompute_preemption_takes_the_latest_admitted_and_requeues_it_first():
    s = make(num_blocks=3, bs=2, max_tokens=64)
    a = group(0, prompt=2, output=4)
    b_ = group(1, prompt=2, output=4)
    s.add(a)
    s.add(b_)
    step(s, 0.0)
    assert s.kv.used_blocks == 2
    batch, _ = step(s, 1.0)
    # both need a third slot; a gets the last free block, b (admitted last) is preempted
    assert batch.decode_seqs == 1
    assert b_.state == WAITING and b_.phase == PREFILL and b_.preemptions == 1
    assert b_.prompt == 3 and b_.generated == 1   # recompute prompt + the token generated so far
    assert s.waiting[0] is b_
    t = 2.0
    while s.has_work():
        step(s, t)
        t += 1
    assert a.state == FINISHED and b_.state == FINISHED
    assert s.total_preemptions >= 1 and s.kv.used_blocks == 0


def test_swap_preemption_moves_blocks_and_resumes():
    s = make(num_blocks=3, bs=2, max_tokens=64, mode="swap", swap_blocks=8)
    a = group(0, prompt=2, output=4)
    b_ = group(1, prompt=2, output=4)
    s.add(a)
    s.add(b_)
    step(s, 0.0)
    batch, _ = step(s, 1.0)
    assert b_.state == 2 and batch.swap_out_bytes == 100.0  # one block of 100 bytes
    t = 2.0
    swapped_in = 0.0
    while s.has_work():
        batch, _ = step(s, t)
        swapped_in += batch.swap_in_bytes
        t += 1
    assert swapped_in == 100.0
    assert b_.state == FINISHED and b_.generated == 4 and s.kv.swap_used_blocks == 0


def test_parallel_sampling_forks_and_copies_the_partial_last_block():
    s = make(bs=16)
    g = group(0, prompt=20, output=3, n=2)
    s.add(g)
    step(s, 0.0)
    assert s.kv.used_blocks == 2 and s.kv.shared_dup_tokens == 20
    b = s.schedule(1.0)
    # the shared last block (4 prompt tokens) is copied once; the last writer keeps the original
    assert b.copy_blocks == 1 and s.kv.used_blocks == 3 and b.decode_seqs == 2
    # 16 shared + (4 + 1) + (4 + 1)
    assert s.token_states() == 26
    s.complete(2.0)
    step(s, 2.0)
    assert g.state == FINISHED and s.kv.used_blocks == 0


def test_stall_is_an_error_not_a_hang():
    s = make(num_blocks=1, bs=2)
    g = group(0, prompt=4, output=2)
    s.add(g)
    with pytest.raises(KvsimError, match="stalled"):
        s.schedule(0.0)


def test_a_group_sharing_its_last_block_needs_copies_for_all_but_the_last_writer():
    # 2 blocks: the n=2 prompt of 5 tokens takes one; the first decode copies it once (2 blocks in all)
    s = make(num_blocks=2, bs=16)
    g = group(0, prompt=5, output=2, n=2)
    s.add(g)
    step(s, 0.0)
    assert s.kv.group_blocks_needed(g.seqs, 6) == 1
    b, done = step(s, 1.0)
    assert b.copy_blocks == 1 and done == [g] and g.preemptions == 0

