"""Speculative decoding's iteration time: the target's verify forward plus the draft's forwards
(docs/speculative.md).

The target's model costs the batch as the scheduler built it: decode sequences bring k + 1 query tokens each
(Batch.spec_tokens = k x decode_seqs beyond the one token each), and read their context's KV once, the k
lookahead slots included (memory-bound attention: the k + 1 queries share one read of the KV). The draft
runs k sequential forwards through a cost model of the same kind built on the draft's spec
(kvsim/speculative/draft.py): the first over what the target just computed (the prefill chunks and the
decode sequences' k + 1 tokens, as vLLM's EAGLE proposer runs over the verified tokens), the next k - 1 over
one token per decode sequence, each reading the draft's KV over the same contexts. Only the forward
passes count (CostModel.forward_time: per-layer overhead, linear layers, all-reduce, attention). Each
draft forward also takes `overhead_s` = c of CPU time (speculative.draft_overhead_s: vLLM's proposer
prepares positions, slot mappings and attention metadata and launches the step from Python;
DRAFT_OVERHEAD_S, fitted in docs/speculative.md). The proposer does not wait for the GPU between its k
forwards, so the CPU work of forward i + 1 overlaps the GPU work of forward i: draft time = c + g_1 +
(k - 1) x max(c, g), with g_1 the first forward's GPU time and g a later one's (the first's CPU work
follows the target's sampling, which the engine waits for). The iteration's fixed CPU and per-sequence
overheads are the target's, once. ngram has no draft model: no draft time (its prompt
lookup runs on the CPU, overlapped).
"""

from __future__ import annotations

import copy
from typing import Any

from kvsim.cost.base import CostModel
from kvsim.cost.batch import Batch

_FIELDS = tuple(f for f in Batch.__annotations__ if f != "spec_tokens")


class SpeculativeCost:
    """The target's cost model plus `k` draft forwards of `draft` (None for ngram) per iteration; forwards
    2..k through `draft_step` when given (EAGLE-3: the head without its fc, which runs once per step)."""

    def __init__(self, target: CostModel, draft: CostModel | None, k: int, overhead_s: float = 0.0,
                 draft_step: CostModel | None = None) -> None:
        self.target = target
        self.draft = draft
        self.draft_step = draft if draft_step is None else draft_step
        self.k = k
        self.overhead_s = overhead_s
        self.draft_s = 0.0
        """Draft seconds summed over the iterations costed (the run's total; meta speculative)."""
        self.plain_s = 0.0
        """What the same iterations would take without speculation: the target's time for each batch as
        the scheduler built it (no verify tokens, no draft forwards), summed."""
        self.plain = copy.deepcopy(target)
        """A copy of the target that times plain_s, so that the target's own counters (fallback
        iterations, expert-parallel steps: describe()) count each iteration once."""

    def __getattr__(self, name: str) -> Any:  # the rest (request_overhead, selected, ...) is the target's
        target = self.__dict__.get("target")
        if target is None:  # (not built yet: copy / pickle probing)
            raise AttributeError(name)
        return getattr(target, name)

    def draft_time(self, batch: Batch) -> float:
        """Seconds of the draft's k forwards for `batch` (0 for ngram or a batch without work)."""
        draft = self.draft
        b = batch.decode_seqs
        if draft is None or not (b or batch.prefill_tokens):
            return 0.0
        first = Batch(num_seqs=batch.num_seqs, prefill_seqs=batch.prefill_seqs,
                      prefill_tokens=batch.prefill_tokens, prefill_attn_pairs=batch.prefill_attn_pairs,
                      decode_seqs=b, decode_context_tokens=batch.decode_context_tokens,
                      decode_blocks=batch.decode_blocks, spec_tokens=batch.spec_tokens)
        c = self.overhead_s
        t = c + draft.forward_time(first)
        if b and self.k > 1:
            step = Batch(num_seqs=b, decode_seqs=b, decode_context_tokens=batch.decode_context_tokens,
                         decode_blocks=batch.decode_blocks)
            g = self.draft_step.forward_time(step)
            # forwards 2..k: the CPU prepares and launches forward i + 1 while the GPU runs forward i
            t += (self.k - 1) * (g if g > c else c)
        return t

    def verify_batch(self, batch: Batch) -> Batch:
        """`batch` with its decode sequences' k draft tokens each (Batch.spec_tokens)."""
        if not batch.decode_seqs:
            return batch
        return Batch(**{f: getattr(batch, f) for f in _FIELDS}, spec_tokens=batch.decode_seqs * self.k)

    def step_time(self, batch: Batch) -> float:
        self.plain_s += self.plain.step_time(batch)
        batch = self.verify_batch(batch)
        t = self.draft_time(batch)
        self.draft_s += t
        return self.target.step_time(batch) + t

    def describe(self) -> dict[str, Any]:
        out = dict(self.target.describe())
        if self.draft is not None:
            d = self.draft.describe()
            out["speculative_draft"] = {"model": d.get("model"), "forwards_per_step": self.k,
                                        "draft_overhead_s": self.overhead_s}
        return out
