"""Admission: waiting groups are admitted FCFS and swapped-out groups come back, within the budgets."""

from __future__ import annotations

from heapq import heappush

from kvsim.cost.batch import Batch
from kvsim.engine.block_growth import BlockGrowth
from kvsim.engine.group import DECODE, PREFILL, RUNNING, Group


class Admission(BlockGrowth):
    """The admission part of `Scheduler` (kvsim/engine/scheduler.py), in its chain Preemption <- BlockGrowth
    <- Admission <- Scheduler: its methods read and move the scheduler's state, set in
    `Scheduler.__init__`. A prefix hit's KV below the GPU comes in
    through the scheduler's `TierWaits`, a P/D hand-off's through its `HandOff`; a group whose KV has not
    arrived holds its blocks (reserved) and starts its prefill once it is there."""

    __slots__ = ()

    def _push(self, heap: list, it: int, g: Group) -> None:
        self._push_no += 1
        heappush(heap, (it, self._push_no, g.epoch, g))

    def _start_chunk(self, g: Group, chunk: int) -> None:
        g.chunk = chunk
        self._budget -= chunk
        self.prefill_tokens_held += chunk
        self._scheduled_prefills.append(g)

    def _prefill_only(self, now: float, copies_before: int) -> Batch | None:
        """vLLM V0 without chunked prefill (`_schedule_default`): while no group is swapped out, whole
        prompts first, FCFS, with the whole token budget; an iteration that schedules any runs them alone
        (decodes wait). None when none was scheduled: the iteration runs the decodes (and swap-ins)."""
        if self.swapped and not self._admit_while_swapped:
            return None
        for g in list(self.prefilling):  # admitted before, waiting for a tier load that has arrived since
            if self._budget <= 0:
                break
            if g.state != RUNNING or g.ready_s > now or g.prompt - g.computed > self._budget:
                continue
            if not self._alloc_or_preempt(g, g.seqs[:1], g.prompt):
                continue
            self._start_chunk(g, g.prompt - g.computed)
        if not self.preempted_now or not self.running:
            self._admit(now)
        prefills = self._scheduled_prefills
        if not prefills:
            return None
        self._paused = True
        return self._batch(prefills, 0, copies_before, False)

    def _swap_in(self, now: float) -> int:
        """Swapped groups come back FCFS while the sequence and token budgets allow and the blocks they
        need (the sizing's figure, plus a block per sequence for the next token) leave the watermark free.
        Returns the blocks moved from host memory."""
        kv = self.kv
        it = self.it
        sizing = self.sizing
        moved = 0
        while self.swapped:
            g = self.swapped[0]
            if self.running_seqs + g.n > self._max_seqs or self._budget < g.n * self._charge:
                break
            if self.lora is not None and not self.lora.admissible(g.req.adapter):
                break  # (its adapter would be one too many in the batch: vLLM V0's swapped queue waits)
            length = g.base + 1
            need = sizing.swap_in_blocks(g, length, kv.swap_blocks_needed(g.seqs))
            if need + g.n * kv.block_pages > kv.num_free_blocks - self.lim.watermark_blocks:
                break
            self.swapped.popleft()
            moved += kv.swap_in(g.seqs)
            if self._by_context:  # room for the next token; other sizings resize it in on_swap_in
                for s in g.seqs:
                    kv.allocate(s, length)
            g.state = RUNNING
            g.phase = DECODE
            self.running[g] = None
            self.running_seqs += g.n
            if self.lora is not None and g.req.adapter >= 0:
                self.lora.activate(g.req.adapter, g.req.rid, False, g.n)
            g.base = length - it
            g.gen_base = g.generated + 1 - it
            self.dec_seqs += g.n
            self.dec_base_sum += g.n * g.base
            g.seq_blocks = self._blocks_of(g.seqs)
            self.dec_blocks += g.seq_blocks
            self._budget -= g.n * self._charge
            self._push(self._finish_heap, it - 1 + sizing.decode_steps(g, g.output - g.generated), g)
            if self._by_context:
                self._schedule_next_alloc(g)
            if self.win is not None:
                self.win.join(g, it)
            delta = sizing.on_swap_in(g, it, self._resize_fn)  # may preempt: _leave_decode moves the sum
            self.dec_held_offset += delta
        return moved

    def _admit(self, now: float) -> None:
        kv = self.kv
        paged = self._paged  # (the paged manager's methods: C calls when compiled)
        lim = self.lim
        tiers = self.tier_waits
        lora = self.lora
        skipped = None
        while self.waiting and self._budget > 0:
            g = self.waiting[0]
            if self.running_seqs + g.n > self._max_seqs:
                break
            if lora is not None and not lora.admissible(g.req.adapter):
                # vLLM v1: a request whose adapter would exceed max_loras is skipped, later ones may go
                lora.skip(g.req.rid)
                if skipped is None:
                    skipped = []
                skipped.append(self.waiting.popleft())
                continue
            seq = g.seqs[0]
            if paged is not None:
                hit = paged.admit(seq, g.req, g.prompt, g.output)
            else:
                hit = kv.admit(seq, g.req, g.prompt, g.output)
            hit_tokens = hit.tokens  # (read once)
            cached = hit_tokens
            # P/D: the prompt's KV beyond the local hit comes from the prefill replica, all but the last
            # token, which the decode replica computes for the first output token (as vLLM's connectors)
            remote = max(0, min(g.remote_tokens, g.prompt - 1) - cached) if g.remote_tokens else 0
            cached += remote
            remaining = g.prompt - cached
            chunk = min(remaining, self._budget)
            if paged is not None:
                need = paged.blocks_needed(seq, cached + chunk)
                free = paged.free_blocks()
            else:
                need = kv.blocks_needed(seq, cached + chunk)
                free = kv.num_free_blocks
            if ((not self._chunked and remaining > self._budget) or need > free
                    or (self.running and free - need < self._watermark)):
                if kv.has(seq):
                    kv.free(seq)  # undo what admit mapped from the cache
                break
            self.waiting.popleft()
            ready = now if tiers is None else tiers.arrival(now, g, hit.by_tier)
            handed = g.remote_tokens > 0
            if handed:  # (with nothing to move, the prefill replica's copy is freed at once)
                g.decode_admit_s = now
                ready = max(ready, self.handoff.receive(now, g, remote))
                g.remote_tokens = 0  # a later preemption recomputes here
            g.ready_s = ready
            blocked = ready > now and (lim.tier_load == "blocking" or remote > 0)
            if blocked:  # its blocks are held, but hit by nobody until the KV is there
                kv.reserve(seq, cached)
            elif paged is not None:
                paged.allocate(seq, cached + chunk)
            else:
                kv.allocate(seq, cached + chunk)
            # hit of the first admission (on the prefill replica, for P/D): later ones find its own KV
            if not g.preemptions and not handed and g.prefill_replica < 0:
                g.cached_tokens = hit_tokens
                g.hit_by_tier = hit.by_tier
            g.computed = cached
            g.state = RUNNING
            g.phase = PREFILL
            self.running[g] = None
            self.running_seqs += g.n
            self.prefilling[g] = None
            self.prefill_tokens_held += cached
            if lora is not None and g.req.adapter >= 0:
                lora.activate(g.req.adapter, g.req.rid, not g.preemptions, g.n)
            if g.first_scheduled_s != g.first_scheduled_s:
                g.first_scheduled_s = now
            if blocked:  # holds its blocks; the prefill loop starts it once the KV has arrived
                continue
            if ready - now > self._load_wait:
                self._load_wait = ready - now
            self._start_chunk(g, chunk)
        if skipped:
            self.waiting.extendleft(reversed(skipped))
