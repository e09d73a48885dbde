"""The scheduler with speculative decoding's sizing (SpecSizing) on hand-built requests: verify steps,
lookahead blocks, the decode clock running ahead, completion, preemption progress."""

from __future__ import annotations

import numpy as np

from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.spec_sizing import SpecSizing
from kvsim.kvcache.paged import PagedKVManager
from kvsim.workload.request import Request

BS = 4


class FixedUniforms:
    """A stand-in Generator whose random(n) hands out the given uniforms in turn."""

    def __init__(self, values):
        self.values = list(values)

    def random(self, n):
        out, self.values = self.values[:n], self.values[n:]
        return np.asarray(out + [0.0] * (n - len(out)))


def make(k=2, rates=(1.0, 1.0), lookahead=2, blocks=64, rng=None):
    kv = PagedKVManager(blocks, BS)
    lim = SchedulerLimits(8, 512, True, "recompute", 0, bytes_per_block=BS * 10.0)
    sizing = SpecSizing(k, rates, rng or np.random.default_rng(0), BS, lookahead)
    return Scheduler(lim, kv, sizing)


def group(rid, prompt, output):
    r = Request(rid, 0.0, prompt, output)
    return Group(req=r, order=rid, seqs=[rid], output=output, prompt=prompt)


def run(s, g):
    s.add(g)
    batches, blocks = [], []
    t = 0.0
    while s.has_work():
        b = s.schedule(t)
        s.kv.check_invariants()
        assert 0 <= s.token_states() <= s.kv.used_blocks * BS
        batches.append(b)
        blocks.append(s.kv.used_blocks)
        t += 1.0
        s.complete(t)
    return batches, blocks


def test_every_draft_accepted_advances_three_tokens_a_step():
    """k = 2, both drafts always accepted (rates 1), lookahead 2, block size 4, prompt 8, output 10.
    Iteration 0 prefills the 8 prompt tokens (2 blocks) and samples token 1; 9 remain, 3 per step: steps
    at iterations 1, 2, 3 (cum 3, 6, 9). Step j holds context 8 + 1 + 3j (X_j = 2j accepted drafts ahead)
    plus 2 drafts and 2 lookahead slots: 13, 16, 19 slots -> 4, 4, 5 blocks; the decode reads them all.
    The request finishes after 4 iterations (10 without speculation), having generated 10 tokens."""
    s = make()
    g = group(0, prompt=8, output=10)
    batches, blocks = run(s, g)
    assert len(batches) == 4
    assert [b.decode_context_tokens for b in batches] == [0, 13, 16, 19]
    assert blocks == [2, 4, 4, 5]
    assert g.generated == 10 and g.finish_s == 4.0
    assert s.sizing.request_values(0) == (3, 6)
    assert s.sizing.hist.tolist() == [0, 0, 3]  # three steps accepted both drafts


def test_no_draft_accepted_is_one_token_a_step():
    """Rates 0: every step emits only the target's token: 9 steps after the prefill, 0 accepted, 18
    rejected drafts; step j holds 8 + 1 + j + 4 slots (13 .. 21)."""
    s = make(rates=(0.0, 0.0))
    g = group(0, prompt=8, output=10)
    batches, _ = run(s, g)
    assert len(batches) == 10
    assert [b.decode_context_tokens for b in batches[1:]] == list(range(13, 22))
    assert s.sizing.request_values(0) == (9, 0)
    assert s.sizing.hist.tolist() == [9, 0, 0]


def test_last_step_stops_at_the_output_length():
    """Output 9 (8 to go after the prefill), every draft accepted: steps emit 3, 3, then 2 of their 3
    (cum 3, 6, 9 >= 8): 3 steps; the accepted count keeps the last step's 2 drafts (6 in all)."""
    s = make()
    g = group(0, prompt=8, output=9)
    batches, _ = run(s, g)
    assert len(batches) == 4 and g.generated == 9
    assert s.sizing.request_values(0) == (3, 6)


def test_drawn_lengths_follow_the_survival():
    """Rates (0.5, 0.5): P(a >= 1) = 0.5, P(a >= 2) = 0.25; uniforms 0.1 -> 2, 0.3 -> 1, 0.7 -> 0
    (a = #{i : u < P(a >= i)}). Output 1 + 4: step 0 emits 3 (a = 2), then 1 of step 1's 2 (a = 1):
    cum [3, 5] reaches 4 -> 2 steps, 3 drafts accepted."""
    s = make(rates=(0.5, 0.5), rng=FixedUniforms([0.1, 0.3, 0.7]))
    g = group(0, prompt=8, output=5)
    batches, _ = run(s, g)
    assert len(batches) == 3
    assert s.sizing.request_values(0) == (2, 3)


def test_verify_tokens_count_against_the_budget():
    """A decoding sequence with k = 2 takes 3 tokens of the budget: with max_num_batched_tokens 10 a
    waiting request's prefill chunk next to it gets 10 - 3 = 7 tokens."""
    kv = PagedKVManager(64, BS)
    lim = SchedulerLimits(8, 10, True, "recompute", 0, bytes_per_block=40.0)
    s = Scheduler(lim, kv, SpecSizing(2, (1.0, 1.0), np.random.default_rng(0), BS, 2))
    a, b = group(0, prompt=8, output=10), group(1, prompt=20, output=4)
    s.add(a)
    s.schedule(0.0)
    s.complete(1.0)
    s.add(b)
    batch = s.schedule(1.0)
    assert batch.decode_seqs == 1 and batch.prefill_tokens == 7


def test_progress_is_the_accepted_drafts_run_ahead():
    """After two steps that accepted 2 drafts each, a preemption finds the sequence 4 tokens ahead of
    one token per iteration."""
    s = make()
    g = group(0, prompt=8, output=20)
    s.add(g)
    for t in range(3):  # the prefill, then steps 0 and 1
        s.schedule(float(t))
        s.complete(t + 1.0)
    assert s.sizing.progress(g, s.it - 1) == 4
