"""Speculative decoding as a decode sizing (kvsim/engine/decode_sizing.py): each decode step of a sequence
verifies k draft tokens and advances it by its accepted drafts plus one (`speculative` set).

When a sequence starts decoding (after its prefill, or back from a swap) its verify steps are drawn at once
(`decode_steps`: AcceptanceDraws.plan, from the replica's seeded Generator), so the scheduler knows the
iteration it completes in (its finish heap) and, at step j, how far it has run ahead of one token per
iteration: X_j = drafts accepted in steps 0..j-1. Before each iteration (`before_decode`) every decoding
sequence holds blocks for its context, the k drafts it verifies and the `lookahead` slots the drafter
writes its next proposals into (vLLM: num_lookahead_tokens = k for eagle / eagle3 / mtp / draft_model,
0 for ngram): ceil((base + it + X_j + k + lookahead) / block_size), vLLM's allocate_slots(1 + k new
tokens, num_lookahead_tokens), grown through the scheduler's allocate-or-preempt; the held offset is
n (X_j + k + lookahead) (the scheduler's context sum then counts every slot held and read). Blocks never
shrink between steps (vLLM rolls num_computed_tokens back by the rejected drafts and keeps the blocks: the
next step needs at least one more slot than this one kept). The k - a_j rejected drafts' slots are the
step's `rejected_kv_slots` (their KV was written and is overwritten).
This costs O(decoding sequences) per iteration, unlike context sizing's O(changes).

A preemption (`progress`) ends the sequence's plan after the steps it ran; its generated tokens include
the accepted drafts; a recompute or swap-in draws a new plan for what remains.
"""

from __future__ import annotations

import numpy as np

from kvsim.engine.decode_sizing import NO_EXTRAS, Extras, Figures, Resize, resize_each
from kvsim.engine.group import Group
from kvsim.speculative.acceptance import AcceptanceDraws


class SpecState:
    """One decoding group's plan: cum[j] = tokens emitted after steps 0..j; steps run at iterations
    start + 1 + j."""

    __slots__ = ("cum", "start", "offset", "done")

    def __init__(self, cum: np.ndarray, start: int) -> None:
        self.cum = cum
        self.start = start
        self.offset = 0
        """n (X_j + k + lookahead) of the last sizing: the group's part of the scheduler's held offset."""
        self.done = -1
        """Steps run when it was preempted (-1: not preempted; a finished group ran them all)."""

    def ahead(self, steps: int) -> int:
        """X after `steps` steps: the accepted drafts (tokens emitted beyond one per step)."""
        return int(self.cum[steps - 1]) - steps if steps > 0 else 0


class SpecSizing:
    """Decoding groups advance a + 1 tokens per verify step and hold k lookahead slots (module docstring)."""

    by_context = False

    def __init__(self, k: int, rates: tuple[float, ...], rng: np.random.Generator, block_size: int,
                 lookahead: int = 0) -> None:
        self.k = k
        self.extra = k + lookahead
        """Slots a decoding sequence holds beyond its context: the k drafts verified and the lookahead."""
        self.decode_tokens = k + 1
        """Query tokens a decoding sequence brings to an iteration (the scheduler's token budget)."""
        self.draws = AcceptanceDraws(rates, rng)
        self.bs = block_size
        self.states: dict[Group, SpecState] = {}
        self._plans: dict[Group, np.ndarray] = {}
        self.hist = np.zeros(k + 1, dtype=np.int64)
        """Verify steps run (sequences x steps) by accepted drafts 0..k, over every decode run that ended."""
        self.requests: dict[int, list[int]] = {}
        """rid -> [verify steps, accepted drafts] over its decode runs (request columns)."""

    # ----------------------------------------------------------------- plans
    def decode_steps(self, g: Group, remaining: int) -> int:
        """Draw g's plan for `remaining` output tokens; the number of iterations it decodes."""
        plan = self.draws.plan(remaining)
        self._plans[g] = plan
        return len(plan)

    def progress(self, g: Group, done: int) -> int:
        """g is preempted after iteration `done`: the tokens it emitted beyond one per iteration."""
        st = self.states.get(g)
        if st is None:
            return 0
        st.done = max(0, done - st.start)
        return st.ahead(st.done)

    def _start(self, g: Group) -> SpecState:
        st = SpecState(self._plans.pop(g), g.generated - g.gen_base)
        self.states[g] = st
        return st

    def _size(self, g: Group, st: SpecState, it: int, resize: Resize) -> int:
        """Blocks for step it - start - 1's context and lookahead; the change of g's held offset (0 when
        its growth preempted g itself)."""
        n = g.n
        x = st.ahead(it - st.start - 1)
        need = -(-(g.base + it + x + self.extra) // self.bs)
        if need > g.seq_blocks // n and not resize(g, need):
            return 0
        offset = n * (x + self.extra)
        delta = offset - st.offset
        st.offset = offset
        return delta

    # ----------------------------------------------------------------- DecodeSizing
    def on_join_decode(self, g: Group, resize: Resize) -> int:
        self._start(g)
        return 0

    def on_leave_decode(self, g: Group) -> int:
        st = self.states.pop(g, None)
        if st is None:
            return 0
        steps = len(st.cum) if st.done < 0 else st.done
        if steps:
            cum = st.cum[:steps]
            accepted = np.diff(cum, prepend=0) - 1
            counts = np.bincount(accepted, minlength=self.k + 1)
            self.hist += counts * g.n
            rec = self.requests.setdefault(g.req.rid, [0, 0])
            rec[0] += steps
            rec[1] += int(accepted.sum())
        return -st.offset

    def before_decode(self, it: int, resize: Resize) -> int:
        return resize_each(self.states, self._size, it, resize)

    def swap_in_blocks(self, g: Group, length: int, held: int) -> int:
        return max(held, -(-(length + self.extra) // self.bs) * g.n)

    def on_swap_in(self, g: Group, it: int, resize: Resize) -> int:
        st = self._start(g)
        return self._size(g, st, it, resize)

    def batch_extras(self, figures: Figures) -> Extras:
        return NO_EXTRAS

    def record_overlap(self, compute_s: float, transfer_s: float, exposed_s: float) -> None:
        return None

    # ----------------------------------------------------------------- recorder values
    def request_values(self, rid: int) -> tuple | None:
        """Request rid's (verify steps, accepted drafts), or None if it never decoded."""
        rec = self.requests.get(rid)
        return None if rec is None else (rec[0], rec[1])
