"""Continuous-batching scheduler with vLLM semantics, advancing decode in O(changes) per iteration.

How a decoding sequence's KV is sized is a DecodeSizing the scheduler is given
(kvsim/engine/decode_sizing.py): by default its context (grown at block boundaries from a heap), or what a
token-level sparsity policy keeps (kvsim/engine/sparse_sizing.py, resized every iteration). The scheduler
keeps its sums either way.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kvsim.cost.batch import Batch
from kvsim.engine.beam import BeamSearch
from kvsim.engine.decode_sizing import NO_EXTRAS, ContextSizing, DecodeSizing
from kvsim.engine.group import DECODE, FINISHED, PREFILL, RUNNING, SWAPPED, WAITING, Group
from kvsim.engine.scheduler_policy import VLLM_V1, SchedulerRules
from kvsim.errors import KvsimError
from kvsim.kvcache.interface import KVManager
from kvsim.kvcache.view import ContextSums


@dataclass(slots=True, frozen=True)
class SchedulerLimits:
    """The knobs of the scheduler (names follow vLLM's engine arguments)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    preemption_mode: str
    watermark_blocks: int
    bytes_per_block: float
    beam_seed: int = 0
    tier_load: str = "blocking"
    """KV tiers: blocking (a request waits for its loaded KV before its prefill) or pipelined (the
    iteration that prefills it waits)."""
    windows: tuple[int, ...] = ()
    """The model's window caps (kvsim.specs.layers.window_caps): the scheduler keeps its context sums at
    each, for the cost of sliding / compressed layers, whatever the KV manager allocates."""
    rules: SchedulerRules = VLLM_V1
    """The scheduler variant's rules (kvsim/engine/scheduler_policy.py); `chunked_prefill` above is
    already the one they force."""


class Scheduler:
    """Decides each iteration's batch.

    Order inside an iteration: (1) every running decode group takes one token per sequence; groups that
    cross a block boundary (or must copy a shared last block) get blocks first, preempting the most recently
    admitted running group when the pool is empty (all of a group's blocks at once, recompute or swap);
    (2) running partial prefills continue (chunked prefill); (3) swapped groups come back, FCFS; (4) when
    nothing was preempted this iteration, waiting groups are admitted FCFS while the token budget, the
    sequence budget and the free-block watermark allow.

    Decode lengths are implicit (`base + iteration`), block boundaries and completions sit in heaps, and
    batch aggregates are kept as sums, so an iteration in which only token counts move costs O(1).

    `sizing` sizes the decoding groups' KV (kvsim/engine/decode_sizing.py); the default, ContextSizing,
    keeps each sequence's whole context.

    `limits.rules` (kvsim/engine/scheduler_policy.py) vary this per policy: whether decodes take their
    tokens from the budget, whether (3) and (4) may run in an iteration that preempted or while groups are
    swapped out, and, for vLLM V0 without chunked prefill, prefill-only iterations: (4) is tried first and,
    when it admits anything, the iteration runs those prefills alone. Decodes then do not advance, so `it`
    is the decode clock (it stays put through a prefill-only iteration) and `iterations` counts every
    iteration; the two are equal under every other policy.
    """

    def __init__(self, limits: SchedulerLimits, kv: KVManager, sizing: DecodeSizing | None = None,
                 loader: Callable[[float, tuple], float] | None = None, hand_off: bool = False) -> None:
        self.lim = limits
        self.kv = kv
        self.loader = loader
        """KV tiers: `loader(now, hit.by_tier) -> arrival time` of the KV a hit loads from below the GPU
        (kvsim/kvcache/links.py TierLinks.load); None without tiers."""
        self.hand_off = hand_off
        """Prefill replica (P/D): a finished prefill leaves the batch with its KV held (`held`) until
        `release`; it is returned by complete() like a finished group."""
        self.held: dict[int, tuple[int, int]] = {}
        """Prefill replica: sequence -> (tokens, blocks) of KV kept for a transfer to a decode replica."""
        self.held_tokens = 0
        self.held_blocks = 0
        self.kv_transfer: Callable[[float, Group, int], float] | None = None
        """Decode replica (P/D): `kv_transfer(now, group, tokens) -> arrival time` of the KV of `tokens`
        prompt tokens of a group that arrives with them on a prefill replica (Group.remote_tokens); called
        when the group is admitted here with blocks reserved for them."""
        self._now = 0.0
        self._load_wait = 0.0
        self.bs = kv.block_size
        self.sizing: DecodeSizing = ContextSizing() if sizing is None else sizing
        self._by_context = self.sizing.by_context
        if kv.windows and kv.windows != limits.windows:
            raise ValueError(f"KV manager window caps {kv.windows} differ from the model's {limits.windows}")
        if not self._by_context and limits.windows:
            raise ValueError("a decode sizing that is not by context needs a model without window caps")
        if not self._by_context and not limits.rules.mix:
            raise ValueError("a decode sizing that is not by context needs a policy that mixes prefills and "
                             "decodes")
        self._resize_fn = self._resize
        self._figures_fn = self._iteration_figures
        self.waiting: deque[Group] = deque()
        self.swapped: deque[Group] = deque()
        self.running: dict[Group, None] = {}
        self.prefilling: dict[Group, None] = {}
        self.it = 0
        """The decode clock: a decoding group's context at it is base + it."""
        self.iterations = 0
        """Iterations run (the timeline's iteration number)."""
        rules = limits.rules
        self._charge = 1 if rules.decodes_use_budget else 0
        self._prefill_first = not rules.mix
        self._admit_after_preemption = rules.admit_after_preemption
        self._admit_while_swapped = rules.admit_while_swapped
        self._paused = False
        """This iteration runs prefills only (vLLM V0): decodes do not advance."""
        self._alloc_due: dict[int, list[tuple[int, Group]]] = {}
        """Iteration -> (epoch, group) of the decoding groups that need a block then, in push order."""
        self._alloc_its: list[int] = []
        """Heap of the iterations in _alloc_due: the groups come out in (iteration, push) order."""
        self._finish_heap: list[tuple[int, int, int, Group]] = []
        self._push_no = 0
        self.running_seqs = 0
        self.dec_seqs = 0
        self.dec_base_sum = 0
        """Sum over decoding groups of n x base: their context at iteration it is this + dec_seqs x it."""
        self.dec_held_offset = 0
        """Sum over decoding sequences of (KV tokens held - context), from the sizing; 0 by context."""
        self.dec_blocks = 0
        self.prefill_tokens_held = 0
        self.preempted_now = 0
        self._scheduled_prefills: list[Group] = []
        self.total_preemptions = 0
        self.beam = BeamSearch(kv, np.random.default_rng([limits.beam_seed, 0xBEA]))
        self.windows: tuple[int, ...] = limits.windows
        # per window cap: decode sequences below it (count, sum of base) and past it (count)
        self._below_n = [0] * len(self.windows)
        self._below_base = [0] * len(self.windows)
        self._past_n = [0] * len(self.windows)
        self._cross_heap: list[tuple[int, int, int, Group, int]] = []

    # ----------------------------------------------------------------- queries
    def has_work(self) -> bool:
        return bool(self.running or self.waiting or self.swapped)

    def token_slots(self) -> int:
        """Sum over sequences of KV tokens held (shared slots counted once per sequence), those held for a
        transfer included."""
        return (self.dec_base_sum + self.dec_held_offset + self.dec_seqs * self.it + self.prefill_tokens_held
                + self.held_tokens)

    def prefill_blocks(self) -> int:
        """Blocks in the tables of the prefilling requests' sequences (one each)."""
        kv = self.kv
        total = 0
        for g in self.prefilling:
            seq = g.seqs[0]
            if kv.has(seq):
                total += kv.num_blocks_of(seq)
        return total

    def unshared_blocks(self) -> int:
        """Sum of block-table lengths over the sequences on the GPU (what they would hold without sharing):
        the decoding sequences' running sum plus each prefilling request's one sequence (and those held for
        a transfer)."""
        return self.dec_blocks + self.prefill_blocks() + self.held_blocks

    def _iteration_figures(self) -> tuple[int, int, int]:
        """(KV tokens the sequences' contexts hold, blocks of the decoding sequences, blocks of the
        prefilling ones) for the decode sizing's accounting (decode_sizing.Figures)."""
        return (self.dec_base_sum + self.dec_seqs * self.it + self.prefill_tokens_held + self.held_tokens,
                self.dec_blocks, self.prefill_blocks() + self.held_blocks)

    def context_sums(self) -> ContextSums:
        """What the KV of the sequences on the GPU adds up to, for the KV manager's token states."""
        if not self.windows:
            return ContextSums(self.token_slots(), (), self.running_seqs + len(self.held))
        it = self.it
        windowed = [b + n * it + p * cap for b, n, p, cap in
                    zip(self._below_base, self._below_n, self._past_n, self.windows, strict=True)]
        for g in self.prefilling:
            held = g.computed + g.chunk
            for i, cap in enumerate(self.windows):
                windowed[i] += min(held, cap)
        return ContextSums(self.token_slots(), tuple(windowed), self.running_seqs + len(self.held))

    def next_load_s(self, now: float) -> float | None:
        """When the first blocking load still in flight arrives (None if none): a replica with nothing
        else to run waits until then."""
        times = [g.ready_s for g in self.prefilling if g.ready_s > now]
        return min(times) if times else None

    def token_states(self) -> int:
        return self.kv.token_states(self.context_sums())

    def add(self, g: Group) -> None:
        g.state = WAITING
        self.waiting.append(g)

    def release(self, seq: int) -> None:
        """Prefill replica: the KV held for seq's transfer has gone; free its blocks."""
        tokens, blocks = self.held.pop(seq)
        self.held_tokens -= tokens
        self.held_blocks -= blocks
        self.kv.free(seq)

    # ----------------------------------------------------------------- heaps
    def _push(self, heap: list, it: int, g: Group) -> None:
        self._push_no += 1
        heapq.heappush(heap, (it, self._push_no, g.epoch, g))

    def _push_alloc(self, it: int, g: Group) -> None:
        self._due_list(it).append((g.epoch, g))

    def _due_list(self, it: int) -> list[tuple[int, Group]]:
        """The (epoch, group) list of the groups that need a block at iteration it (made, and the
        iteration put on the heap, when it has none yet)."""
        due = self._alloc_due.get(it)
        if due is None:
            due = self._alloc_due[it] = []
            heapq.heappush(self._alloc_its, it)
        return due

    def _schedule_next_alloc(self, g: Group) -> None:
        """Push the iteration at which g next needs a block (or a copy of its shared last block)."""
        seq = g.seqs[0]
        if g.n > 1 and (g.req.beam_width > 1 or self.kv.last_block_shared(seq)):
            self._push_alloc(self.it + 1, g)
            return
        self._push_alloc(self.kv.capacity_tokens(seq) - g.base + 1, g)

    # ----------------------------------------------------------------- decode bookkeeping
    def _join_decode(self, g: Group, it_done: int) -> None:
        """g's prefill finished in iteration it_done; it decodes from it_done + 1."""
        g.phase = DECODE
        g.base = g.prompt - it_done
        g.gen_base = g.generated - it_done
        self.prefill_tokens_held -= g.prompt
        if g.n > 1 and not g.forked:
            parent = g.seqs[0]
            for child in g.seqs[1:]:
                self.kv.fork(parent, child)
            g.forked = True
        self.dec_seqs += g.n
        self.dec_base_sum += g.n * g.base
        g.seq_blocks = sum(self.kv.num_blocks_of(s) for s in g.seqs)
        self.dec_blocks += g.seq_blocks
        self._push(self._finish_heap, g.output - g.gen_base, g)
        if self._by_context:
            self._schedule_next_alloc(g)
        if self.windows:
            self._join_windows(g, it_done + 1)
        delta = self.sizing.on_join_decode(g, self._resize_fn)  # (resizes first: preemptions move the sum)
        self.dec_held_offset += delta

    def _leave_decode(self, g: Group) -> None:
        self.dec_held_offset += self.sizing.on_leave_decode(g)
        self.dec_seqs -= g.n
        self.dec_base_sum -= g.n * g.base
        self.dec_blocks -= g.seq_blocks
        g.epoch += 1
        if self.windows:
            self._leave_windows(g)

    # ----------------------------------------------------------------- window caps (sliding layers)
    def _join_windows(self, g: Group, it_next: int) -> None:
        """g decodes from iteration it_next with context base + it: below or past each window cap."""
        g.past_windows = 0
        for i, cap in enumerate(self.windows):
            if g.base + it_next >= cap:
                g.past_windows |= 1 << i
                self._past_n[i] += g.n
            else:
                self._below_n[i] += g.n
                self._below_base[i] += g.n * g.base
                self._push_no += 1
                heapq.heappush(self._cross_heap, (cap - g.base, self._push_no, g.epoch, g, i))

    def _leave_windows(self, g: Group) -> None:
        for i in range(len(self.windows)):
            if g.past_windows >> i & 1:
                self._past_n[i] -= g.n
            else:
                self._below_n[i] -= g.n
                self._below_base[i] -= g.n * g.base
        g.past_windows = 0

    def _cross_windows(self, it: int) -> None:
        """Move the decode sequences whose context reaches a window cap at iteration it past it."""
        heap = self._cross_heap
        while heap and heap[0][0] <= it:
            _, _, epoch, g, i = heapq.heappop(heap)
            if epoch != g.epoch or g.state != RUNNING or g.past_windows >> i & 1:
                continue
            g.past_windows |= 1 << i
            self._below_n[i] -= g.n
            self._below_base[i] -= g.n * g.base
            self._past_n[i] += g.n

    def _window_figures(self, prefills: list[Group]) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """Batch.decode_window_tokens and prefill_window_pairs for this iteration."""
        it = self.it
        decode = tuple(b + n * it + p * cap for b, n, p, cap in
                       zip(self._below_base, self._below_n, self._past_n, self.windows, strict=True))
        pairs = []
        for cap in self.windows:
            w = cap + 1
            total = 0.0
            for g in prefills:
                c, p = g.chunk, g.computed
                inside = max(0, min(c, w - p))  # queries that still see every earlier key
                total += inside * p + inside * (inside + 1) / 2 + (c - inside) * w
            pairs.append(total)
        return decode, tuple(pairs)

    # ----------------------------------------------------------------- preemption
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
        victim.preemptions += 1
        self.preempted_now += victim.n
        self.total_preemptions += 1
        kv = self.kv
        if victim.phase == DECODE:
            done = self.it - 1
            length = victim.base + done
            generated = victim.gen_base + done
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
                kv.free(s)
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
            while kv.num_free_blocks + sum(kv.private_blocks(s) for s in g.seqs) < blocks * n:
                if not may_preempt or self._preempt_last() is g:
                    return False
            for s in g.seqs:
                kv.free(s)
                kv.allocate(s, blocks * self.bs)
        self.dec_blocks += blocks * n - g.seq_blocks
        g.seq_blocks = blocks * n
        return True

    # ----------------------------------------------------------------- one iteration
    def _begin(self, now: float) -> int:
        """Reset the per-iteration figures; the KV manager's copy count before this iteration."""
        self.preempted_now = 0
        self._swap_out_blocks = 0
        self._scheduled_prefills = []
        self._budget = self.lim.max_num_batched_tokens
        self._load_wait = 0.0
        self._now = now
        self._paused = False
        return self.kv.cow_copies

    def schedule_decodes(self, now: float) -> Batch | None:
        """schedule(), by a short path when this iteration can only run the decodes: nothing prefilling or
        swapped out, the KV sized by context, no window caps, and nothing waiting that admission could
        take (the queue is empty, or its head is over the sequence or token budget, which nothing but a
        finish or a preemption changes). Block-boundary allocations run as in schedule(); one that
        preempts hands the rest of the iteration to the general path. The same result as schedule()."""
        if self.prefilling or self.swapped or self.windows or not self._by_context or not self.dec_seqs:
            return self.schedule(now)
        waiting = self.waiting
        lim = self.lim
        if waiting and self.running_seqs + waiting[0].n <= lim.max_num_seqs and (
                self._prefill_first or lim.max_num_batched_tokens > self.dec_seqs * self._charge):
            return self.schedule(now)
        copies_before = self._begin(now)
        its = self._alloc_its
        if its and its[0] <= self.it:
            self._grow(self.it)
            if self.preempted_now:
                return self._schedule_rest(now, copies_before)
        self._budget -= self.dec_seqs * self._charge
        return self._batch([], 0, copies_before, True)

    def completes_quietly(self) -> bool:
        """True when complete() after this iteration finishes no group (and hands none off): it only
        moves prefill chunks and the decode clock on."""
        heap = self._finish_heap
        if heap and heap[0][0] <= self.it:
            return False
        for g in self._scheduled_prefills:
            if g.computed + g.chunk >= g.prompt and (self.hand_off or g.generated + 1 >= g.output):
                return False
        return True

    def schedule(self, now: float) -> Batch | None:
        """Pick this iteration's work; None when there is nothing to run."""
        copies_before = self._begin(now)
        if self.windows:
            self._cross_windows(self.it)
        if self._prefill_first:
            batch = self._prefill_only(now, copies_before)
            if batch is not None:
                return batch
        its = self._alloc_its
        if its and its[0] <= self.it:
            self._grow(self.it)
        return self._schedule_rest(now, copies_before)

    def _schedule_rest(self, now: float, copies_before: int) -> Batch | None:
        """schedule() after the block-boundary allocations: sizing hooks, prefill chunks, swap-ins,
        admissions, the batch."""
        it = self.it
        lim = self.lim
        if not self._by_context:  # (ContextSizing's per-iteration hooks are no-ops: skipped on the hot path)
            delta = self.sizing.before_decode(it, self._resize_fn)  # may preempt: _leave_decode moves the sum
            self.dec_held_offset += delta
        self._budget -= self.dec_seqs * self._charge

        for g in (() if self._prefill_first else list(self.prefilling)):
            if self._budget <= 0:
                break
            if g.state != RUNNING or g.ready_s > now:  # (a blocking load has not arrived)
                continue
            if not lim.chunked_prefill and g.prompt - g.computed > self._budget:
                continue
            chunk = min(g.prompt - g.computed, self._budget)
            if not self._alloc_or_preempt(g, g.seqs[:1], g.computed + chunk):
                continue
            self._start_chunk(g, chunk)

        swap_in_blocks = 0
        if not self.preempted_now or not self.running:
            swap_in_blocks = self._swap_in(now)
            if not self._prefill_first and (self._admit_while_swapped or not self.swapped):
                self._admit(now)
        elif self._admit_after_preemption and not self._prefill_first:
            self._admit(now)

        prefills = self._scheduled_prefills
        if not prefills and not self.dec_seqs:
            if self.has_work() and not self.running and not self.held:
                raise KvsimError("internal error: the scheduler stalled with waiting work it cannot "
                                 "schedule (please report the scenario)")
            return None
        return self._batch(prefills, swap_in_blocks, copies_before, True)

    def _grow(self, it: int) -> None:
        """Give the decoding groups whose next token at iteration it crosses a block boundary (or must copy
        a shared last block) their blocks, preempting when the pool is short, in (iteration, push) order."""
        kv = self.kv
        its = self._alloc_its
        due = self._alloc_due
        grow = kv.grow_one_block
        nxt = it + self.bs
        later = due.get(nxt)  # the groups due at nxt, which the fast path appends to
        grown = 0  # blocks the fast path added, not yet in dec_blocks
        grow_each = kv.grow_each
        while its and its[0] <= it:
            entries = due.pop(heapq.heappop(its))
            if len(entries) > 1:  # every live one a single sequence: their blocks in one call
                live = [e for e in entries if e[0] == e[1].epoch and e[1].state == RUNNING]
                seqs = [e[1].seqs[0] for e in live if e[1].n == 1]
                if seqs and len(seqs) == len(live) and grow_each(seqs, [e[1].base + it for e in live]):
                    for e in live:
                        e[1].seq_blocks += 1
                    grown += len(live)
                    if later is None:
                        later = self._due_list(nxt)
                    later += live
                    continue
            for entry in entries:
                epoch, g = entry
                if epoch != g.epoch or g.state != RUNNING:
                    continue
                if g.n == 1 and grow(g.seqs[0], g.base + it):
                    # fast path: a single sequence crossing a block boundary took its block(s)
                    delta = kv.last_grow_delta
                    g.seq_blocks += delta
                    grown += delta
                    if later is None:
                        later = self._due_list(nxt)
                    later.append(entry)
                    continue
                self.dec_blocks += grown
                grown = 0
                if g.req.beam_width > 1:
                    self.beam.step(g.seqs)  # beams pruned and forked before this step's token
                if not self._alloc_or_preempt(g, g.seqs, g.base + it):
                    continue
                blocks = sum(kv.num_blocks_of(s) for s in g.seqs)
                self.dec_blocks += blocks - g.seq_blocks
                g.seq_blocks = blocks
                self._schedule_next_alloc(g)
                if later is None:
                    later = due.get(nxt)
        self.dec_blocks += grown

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

    def _batch(self, prefills: list[Group], swap_in_blocks: int, copies_before: int, decodes: bool) -> Batch:
        """The iteration's Batch: the scheduled prefill chunks and, with `decodes`, every decoding group."""
        it = self.it
        kv = self.kv
        lim = self.lim
        p_tokens = 0
        pairs = 0.0
        for g in prefills:
            c = g.chunk
            p_tokens += c
            pairs += c * g.computed + c * (c + 1) / 2
        bpb = lim.bytes_per_block
        windows = self._window_figures(prefills) if self.windows else ((), ())
        extras = NO_EXTRAS if self._by_context else self.sizing.batch_extras(self._figures_fn)
        recall, offload, kv_copy, prefetch, read_extra = extras
        if decodes:
            dec_seqs = self.dec_seqs
            context = self.dec_base_sum + self.dec_held_offset + dec_seqs * it + read_extra
            dec_blocks = self.dec_blocks
        else:
            dec_seqs = context = dec_blocks = 0
            windows = ((0,) * len(self.windows), windows[1])
        return Batch(
            num_seqs=len(prefills) + dec_seqs,
            prefill_seqs=len(prefills),
            prefill_tokens=p_tokens,
            prefill_attn_pairs=pairs,
            decode_seqs=dec_seqs,
            decode_context_tokens=context,
            decode_blocks=dec_blocks,
            swap_in_bytes=swap_in_blocks * bpb,
            swap_out_bytes=self._swap_out_blocks * bpb,
            copy_blocks=kv.cow_copies - copies_before,
            recall_bytes=recall,
            offload_bytes=offload,
            kv_copy_bytes=kv_copy,
            prefetch_bytes=prefetch,
            decode_window_tokens=windows[0],
            prefill_window_pairs=windows[1],
            kv_load_wait_s=self._load_wait,
        )

    def _start_chunk(self, g: Group, chunk: int) -> None:
        g.chunk = chunk
        self._budget -= chunk
        self.prefill_tokens_held += chunk
        self._scheduled_prefills.append(g)

    def _swap_in(self, now: float) -> int:
        """Swapped groups come back FCFS while the sequence and token budgets allow and the blocks they
        need (the sizing's figure, plus one per sequence for the next token) leave the watermark free.
        Returns the blocks moved from host memory."""
        kv = self.kv
        it = self.it
        sizing = self.sizing
        moved = 0
        while self.swapped:
            g = self.swapped[0]
            if self.running_seqs + g.n > self.lim.max_num_seqs or self._budget < g.n * self._charge:
                break
            length = g.base + 1
            need = sizing.swap_in_blocks(g, length, kv.swap_blocks_needed(g.seqs))
            if need + g.n > kv.num_free_blocks - self.lim.watermark_blocks:
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
            g.base = length - it
            g.gen_base = g.generated + 1 - it
            self.dec_seqs += g.n
            self.dec_base_sum += g.n * g.base
            g.seq_blocks = sum(kv.num_blocks_of(s) for s in g.seqs)
            self.dec_blocks += g.seq_blocks
            self._budget -= g.n * self._charge
            self._push(self._finish_heap, g.output - g.gen_base, g)
            if self._by_context:
                self._schedule_next_alloc(g)
            if self.windows:
                self._join_windows(g, it)
            delta = sizing.on_swap_in(g, it, self._resize_fn)  # may preempt: _leave_decode moves the sum
            self.dec_held_offset += delta
        return moved

    def _admit(self, now: float) -> None:
        kv = self.kv
        lim = self.lim
        while self.waiting and self._budget > 0:
            g = self.waiting[0]
            if self.running_seqs + g.n > lim.max_num_seqs:
                break
            seq = g.seqs[0]
            hit = kv.admit(seq, g.req, g.prompt, g.output)
            cached = hit.tokens
            # P/D: the prompt's KV beyond the local hit comes from the prefill replica, all but the last
            # token, which the decode replica computes for the first output token (as vLLM's connectors)
            remote = max(0, min(g.remote_tokens, g.prompt - 1) - cached)
            cached += remote
            remaining = g.prompt - cached
            chunk = min(remaining, self._budget)
            need = kv.blocks_needed(seq, cached + chunk)
            free = kv.num_free_blocks
            if ((not lim.chunked_prefill and remaining > self._budget) or need > free
                    or (self.running and free - need < lim.watermark_blocks)):
                if kv.has(seq):
                    kv.free(seq)  # undo what admit mapped from the cache
                break
            self.waiting.popleft()
            ready = now
            by_tier = hit.by_tier
            if self.loader is not None and by_tier and (len(by_tier) > 1 or by_tier[0][0] != "gpu"):
                ready = self.loader(now, by_tier)
                g.load_wait_s += ready - now
            handed = g.remote_tokens > 0
            if handed:  # (with nothing to move, the prefill replica's copy is freed at once)
                g.decode_admit_s = now
                ready = max(ready, self.kv_transfer(now, g, remote))
                g.remote_tokens = 0  # a later preemption recomputes here
            g.ready_s = ready
            blocked = ready > now and (lim.tier_load == "blocking" or remote > 0)
            if blocked:  # its blocks are held, but hit by nobody until the KV is there
                kv.reserve(seq, cached)
            else:
                kv.allocate(seq, cached + chunk)
            # hit of the first admission (on the prefill replica, for P/D): later ones find its own KV
            if not g.preemptions and not handed and g.prefill_replica < 0:
                g.cached_tokens = hit.tokens
                g.hit_by_tier = hit.by_tier
            g.computed = cached
            g.state = RUNNING
            g.phase = PREFILL
            self.running[g] = None
            self.running_seqs += g.n
            self.prefilling[g] = None
            self.prefill_tokens_held += cached
            if g.first_scheduled_s != g.first_scheduled_s:
                g.first_scheduled_s = now
            if blocked:  # holds its blocks; the prefill loop starts it once the KV has arrived
                continue
            if ready - now > self._load_wait:
                self._load_wait = ready - now
            self._start_chunk(g, chunk)

    def complete(self, t_end: float) -> list[Group]:
        """Apply the iteration that just ran (ending at t_end); return the groups that finished."""
        it = self.it
        paused = self._paused  # (prefills only: decodes did not advance, nor does the decode clock)
        it_done = it - 1 if paused else it
        finished: list[Group] = []
        for g in self._scheduled_prefills:
            g.computed += g.chunk
            g.chunk = 0
            if g.computed < g.prompt:
                continue
            del self.prefilling[g]
            g.generated += 1
            if self.hand_off and g.output > 1:
                self._hand_off(g, t_end)
                finished.append(g)
                continue
            if g.first_token_s != g.first_token_s:
                g.first_token_s = t_end
            if g.generated >= g.output:
                self.prefill_tokens_held -= g.prompt
                self._finish(g, t_end)
                finished.append(g)
            else:
                self._join_decode(g, it_done)
        self._scheduled_prefills = []
        self.iterations += 1
        if paused:
            self._paused = False
            return finished
        heap = self._finish_heap
        while heap and heap[0][0] <= it:
            _, _, epoch, g = heapq.heappop(heap)
            if epoch != g.epoch or g.state != RUNNING:
                continue
            g.generated = g.gen_base + it
            self._leave_decode(g)
            self._finish(g, t_end)
            finished.append(g)
        self.it += 1
        return finished

    def _hand_off(self, g: Group, t_end: float) -> None:
        """Prefill replica: g's prefill is done; it leaves the batch, its KV held until `release`."""
        seq = g.seqs[0]
        self.prefill_tokens_held -= g.prompt
        blocks = self.kv.num_blocks_of(seq)
        self.held[seq] = (g.prompt, blocks)
        self.held_tokens += g.prompt
        self.held_blocks += blocks
        del self.running[g]
        self.running_seqs -= g.n
        g.state = FINISHED
        g.prefill_done_s = t_end
        g.last_chunk_s = self._now

    def _finish(self, g: Group, t_end: float) -> None:
        for s in g.seqs:
            if self.kv.has(s):
                self.kv.free(s)
        del self.running[g]
        self.running_seqs -= g.n
        g.state = FINISHED
        g.finish_s = t_end
