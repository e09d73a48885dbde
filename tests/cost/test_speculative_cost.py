"""SpeculativeCost: the verify batch (k draft tokens per decode sequence) and the draft's k forwards; the
target models' linear term over the verify tokens."""

from __future__ import annotations

import pytest

from kvsim.cost.batch import Batch
from kvsim.cost.roofline import RooflineCost
from kvsim.cost.speculative import SpeculativeCost
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware


class Recorder:
    """A stand-in cost model: step_time is 1 s; forward_time records its batch and takes 0.01 s per
    token (prefill tokens + decode sequences + draft tokens)."""

    name = "stub"
    request_overhead = 0.0

    def __init__(self):
        self.seen = []

    def step_time(self, b):
        self.seen.append(b)
        return 1.0

    def forward_time(self, b):
        self.seen.append(b)
        return 0.01 * (b.prefill_tokens + b.decode_seqs + b.spec_tokens)

    def describe(self):
        return {"model": "stub"}


def test_verify_and_draft_forwards_by_hand():
    """k = 3, 2 decode sequences and a 5-token prefill chunk: the target sees spec_tokens 2 x 3 = 6; the
    draft's first forward takes 5 + 2 + 6 = 13 tokens (0.13 s) after its 0.001 s of CPU preparation, the
    other two 2 tokens each (0.02 s), each overlapping the next one's 0.001 s of CPU work (max(0.02,
    0.001) = 0.02): 1 + 0.001 + 0.13 + 2 x 0.02 = 1.171 s."""
    target, draft = Recorder(), Recorder()
    cost = SpeculativeCost(target, draft, 3, overhead_s=0.001)
    b = Batch(num_seqs=3, prefill_seqs=1, prefill_tokens=5, decode_seqs=2, decode_context_tokens=100)
    assert cost.step_time(b) == pytest.approx(1.171)
    # the target is asked once, for the verify batch; a copy of it times the batch as built (plain_s, the
    # time without speculation), so the target's own counters count each iteration once
    assert [x.spec_tokens for x in target.seen] == [6] and cost.plain_s == 1.0
    assert [x.spec_tokens for x in cost.plain.seen] == [0]
    # (the k - 1 one-token forwards are alike: costed once, times k - 1)
    assert [x.prefill_tokens for x in draft.seen] == [5, 0]
    assert [(x.decode_seqs, x.spec_tokens, x.decode_context_tokens) for x in draft.seen] == [(2, 6, 100),
                                                                                          (2, 0, 100)]
    assert cost.draft_s == pytest.approx(0.171)
    assert cost.request_overhead == 0.0  # the rest is the target's


def test_cpu_bound_draft_steps_cost_the_cpu_time():
    """The same batch with 0.05 s of CPU per draft forward, more than a one-token forward's 0.02 s: the
    first forward 0.05 + 0.13, the other two max(0.02, 0.05) = 0.05 each: draft 0.28 s (the former
    serial sum would be 3 x 0.05 + 0.13 + 2 x 0.02 = 0.32 s)."""
    target, draft = Recorder(), Recorder()
    cost = SpeculativeCost(target, draft, 3, overhead_s=0.05)
    b = Batch(num_seqs=3, prefill_seqs=1, prefill_tokens=5, decode_seqs=2, decode_context_tokens=100)
    assert cost.step_time(b) == pytest.approx(1.28)
    assert cost.draft_s == pytest.approx(0.28)


def test_later_forwards_through_the_step_model():
    """A step model (EAGLE-3 without its fc) costing 0.5 of the Recorder per token: k = 3, 2 decode
    sequences, no prefill, overhead 0.001: first forward 2 + 6 = 8 tokens through the draft (0.08 s),
    the other two 2 tokens through the step model (0.01 s each): 0.001 + 0.08 + 2 x 0.01 = 0.101 s."""

    class Half(Recorder):
        def forward_time(self, b):
            return 0.5 * super().forward_time(b)

    target, draft, step = Recorder(), Recorder(), Half()
    cost = SpeculativeCost(target, draft, 3, overhead_s=0.001, draft_step=step)
    b = Batch(num_seqs=2, decode_seqs=2, decode_context_tokens=100)
    assert cost.step_time(b) == pytest.approx(1.101)
    assert len(draft.seen) == 1 and len(step.seen) == 1


def test_ngram_has_no_draft_time():
    target = Recorder()
    cost = SpeculativeCost(target, None, 4)
    assert cost.step_time(Batch(num_seqs=1, decode_seqs=1, decode_context_tokens=10)) == 1.0
    assert target.seen[0].spec_tokens == 4 and cost.draft_s == 0.0


def test_prefill_only_batch_runs_one_draft_forward():
    target, draft = Recorder(), Recorder()
    cost = SpeculativeCost(target, draft, 3, overhead_s=0.5)
    only_prefill = Batch(num_seqs=1, prefill_seqs=1, prefill_tokens=10)
    assert cost.step_time(only_prefill) == pytest.approx(1 + 0.1 + 0.5)
    assert len(draft.seen) == 1


def test_roofline_linear_term_counts_the_verify_tokens():
    """RooflineCost: a decode of 4 sequences verifying 3 drafts each computes its linear layers over
    4 + 12 = 16 tokens (linear_time(16)), the KV read being the context's."""
    rl = RooflineCost(get_model("llama-3.1-8b"), load_hardware("h100-sxm"), 1, "bf16", 16 * 131072.0)
    plain = Batch(num_seqs=4, decode_seqs=4, decode_context_tokens=4000)
    spec = Batch(num_seqs=4, decode_seqs=4, decode_context_tokens=4000, spec_tokens=12)
    diff = rl.forward_time(spec) - rl.forward_time(plain)
    assert diff == pytest.approx(rl.linear_time(16) - rl.linear_time(4))
    assert spec.num_tokens == 16
