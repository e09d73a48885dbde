"""Preemption: when the block pool runs short, the most recently admitted running group gives its KV up
(recomputed later, or swapped to host memory), as vLLM's scheduler does."""

from __future__ import annotations

from kvsim.engine.group import DECODE, FINISHED, PREFILL, SWAPPED, WAITING, Group


class Preemption:
    """The preemption part of `Scheduler` (kvsim/engine/scheduler.py), the root of its single-parent chain
    Preemption <- BlockGrowth <- Admission <- Scheduler: its methods read and move the scheduler's state,
    set in `Scheduler.__init__` (compiled, preemption.pxd declares that state with C types, for the whole
    chain)."""

    __slots__ = ("lim", "kv", "tier_waits", "handoff", "lora", "sizing", "_resize_fn", "_figures_fn",
                 "waiting", "swapped", "beam", "win", "windows", "schedule_decodes", "dec_held_offset",
                 "running", "prefilling", "_alloc_due", "_alloc_its", "_finish_heap",
                 "_scheduled_prefills", "_sends", "_by_context", "_prefill_first",
                 "_admit_after_preemption", "_admit_while_swapped", "_paused", "_now", "_load_wait", "bs",
                 "_budget", "_swap_out_blocks", "it", "iterations", "_charge", "_push_no", "running_seqs",
                 "dec_seqs", "dec_base_sum", "dec_blocks", "prefill_tokens_held", "preempted_now",
                 "preempted_unrecorded", "total_preemptions",
                 "_max_seqs", "_max_tokens", "_no_bytes", "_chunked", "_watermark")

    def _int_slots(self) -> int:
        """Scheduler.token_slots() while the held offset is an integer: a sum of C integers when compiled (a
        C call from Replica._step, no Python int made)."""
        off = self.dec_held_offset
        paused = self.dec_seqs if self._paused else 0
        held_tokens = self.handoff.tokens if self._sends else 0  # (only a sending replica holds: _hand_off)
        return (self.dec_base_sum + self.dec_seqs * self.it - paused + self.prefill_tokens_held + off
                + held_tokens)

    def _hand_off(self, g: Group, t_end: float) -> None:
        """Prefill replica (Scheduler.complete): g's prefill is done; it leaves the batch, its KV held until
        `release`."""
        seq = g.seqs[0]
        self.prefill_tokens_held -= g.prompt
        self.handoff.hold(seq, g.prompt, self.kv.num_blocks_of(seq))
        del self.running[g]
        self.running_seqs -= g.n
        g.state = FINISHED
        g.prefill_done_s = t_end
        g.last_chunk_s = self._now

    def take_preempted(self) -> int:
        """Sequences preempted since the last recorded iteration, this one's included (the timeline's
        `preempted`)."""
        n = self.preempted_now + self.preempted_unrecorded
        self.preempted_unrecorded = 0
        return n

    def _preempt_last(self) -> Group:
        """Preempt the most recently admitted running group, passing over those still waiting for their
        KV to arrive (a blocking tier load, a P/D transfer: as vLLM keeps them out of its running queue)
        unless only such groups run."""
        now = self._now
        victim = None
        for g in reversed(self.running):
            if not (g.phase == PREFILL and g.chunk == 0 and g.ready_s > now):
                victim = g
                break
        if victim is None:
            victim = next(reversed(self.running))
        del self.running[victim]
        self.running_seqs -= victim.n
        if self.lora is not None and victim.req.adapter >= 0:
            self.lora.release(victim.req.adapter, victim.n)
        victim.preemptions += 1
        self.preempted_now += victim.n
        self.total_preemptions += 1
        kv = self.kv
        if victim.phase == DECODE:
            done = self.it - 1
            length = victim.base + done
            generated = victim.gen_base + done
            if not self._by_context:  # (speculative decoding: the accepted drafts ran it ahead)
                ahead = self.sizing.progress(victim, done)
                length += ahead
                generated += ahead
            self._leave_decode(victim)
            # vLLM swaps multi-sequence groups whatever the mode: they cannot be recomputed as one prompt
            swap = self.lim.preemption_mode == "swap" or victim.n > 1
            if swap and kv.can_swap_out(victim.seqs):
                moved = kv.swap_out(victim.seqs)
                self._swap_out_blocks += moved
                victim.state = SWAPPED
                victim.base = length
                victim.generated = generated
                self.swapped.appendleft(victim)
                return victim
            for s in victim.seqs:
                self._free_decoded(s, length)
            if victim.n > 1:
                # a multi-sample group cannot be recomputed as one prompt: it restarts
                victim.generated = 0
                victim.prompt = victim.req.prompt_len
                victim.forked = False
            else:
                victim.generated = generated
                victim.prompt = victim.req.prompt_len + generated
        else:
            self.prefilling.pop(victim, None)
            self.prefill_tokens_held -= victim.computed
            if kv.has(victim.seqs[0]):
                kv.free(victim.seqs[0])
            if victim in self._scheduled_prefills:
                self._scheduled_prefills.remove(victim)
                self.prefill_tokens_held -= victim.chunk
                self._budget += victim.chunk
        victim.computed = 0
        victim.chunk = 0
        victim.phase = PREFILL
        victim.state = WAITING
        self.waiting.appendleft(victim)
        return victim

    def _leave_decode(self, g: Group) -> None:
        if not self._by_context:  # (ContextSizing's on_leave_decode is a no-op)
            self.dec_held_offset += self.sizing.on_leave_decode(g)
        self.dec_seqs -= g.n
        self.dec_base_sum -= g.n * g.base
        self.dec_blocks -= g.seq_blocks
        g.epoch += 1
        if self.win is not None:
            self.win.leave(g)

    def _blocks_of(self, seqs: list[int]) -> int:
        """Blocks in the tables of seqs."""
        kv = self.kv
        total = 0
        for s in seqs:
            total += kv.num_blocks_of(s)
        return total

    def _private_of(self, seqs: list[int]) -> int:
        """Blocks of seqs' tables that no other holder shares (KVManager.private_blocks)."""
        kv = self.kv
        total = 0
        for s in seqs:
            total += kv.private_blocks(s)
        return total

    def _free_decoded(self, seq: int, tokens: int) -> None:
        """Free seq, which has `tokens` tokens with KV. The KV manager is told first, so that its prefix
        cache registers exactly the blocks full of them (KVManager.set_computed_tokens): the table may hold
        more slots (whole blocks grown ahead; speculative decoding's draft / lookahead slots)."""
        self.kv.set_computed_tokens(seq, tokens)
        self.kv.free(seq)

    def _alloc_or_preempt(self, g: Group, seqs: list[int], tokens: int) -> bool:
        """Give each seq of g room for `tokens` slots, preempting from the tail; False if g itself went."""
        kv = self.kv
        need = kv.group_blocks_needed(seqs, tokens)
        while need > kv.num_free_blocks:
            if self._preempt_last() is g:
                return False
        for s in seqs:
            kv.allocate(s, tokens)
        return True

    def _resize(self, g: Group, blocks: int, may_preempt: bool = True) -> bool:
        """Give each of decoding group g's sequences `blocks` blocks (decode_sizing.Resize): growing
        through allocate-or-preempt, shrinking by re-mapping each table onto `blocks` fresh blocks (the
        sizing accounts any copy). Blocks shared with other holders (a prefix cache) stay with them, so the
        pool may be short of the fresh blocks: then the most recently admitted groups are preempted, as for
        a decode allocation (may_preempt), or nothing changes. False when nothing changed for want of a
        preemption, or when g itself was preempted."""
        kv = self.kv
        n = g.n
        if blocks > g.seq_blocks // n:
            if not self._alloc_or_preempt(g, g.seqs, blocks * self.bs):
                return False
        else:
            while kv.num_free_blocks + self._private_of(g.seqs) < blocks * n:
                if not may_preempt or self._preempt_last() is g:
                    return False
            for s in g.seqs:
                kv.free(s)
                kv.allocate(s, blocks * self.bs)
        self.dec_blocks += blocks * n - g.seq_blocks
        g.seq_blocks = blocks * n
        return True
