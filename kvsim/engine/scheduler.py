"""Continuous-batching scheduler with vLLM semantics, advancing decode in O(changes) per iteration.

The batching core is here; its other concerns have a file each: admission of waiting and swapped groups
(kvsim/engine/admission.py, a base class), the context sums at window caps (kvsim/engine/window_sums.py),
tier-load waits (kvsim/engine/tier_waits.py), the P/D hand-off (kvsim/engine/fleet/handoff.py, the hooks
object `HandOff`) and the decode-only fast path (kvsim/engine/decode_fast_path.py, a strategy). How a
decoding sequence's KV is sized is a DecodeSizing the scheduler is given (kvsim/engine/decode_sizing.py):
by default its context (grown at block boundaries from a heap), or what a token-level sparsity policy
keeps (kvsim/engine/sparse_sizing.py, resized every iteration). The scheduler keeps its sums either way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappop

import numpy as np

from kvsim.cost.batch import Batch
from kvsim.engine.admission import Admission
from kvsim.engine.beam import BeamSearch
from kvsim.engine.decode_fast_path import DecodeFastPath
from kvsim.engine.decode_sizing import NO_EXTRAS, ContextSizing, DecodeSizing
from kvsim.engine.fleet.handoff import HandOff
from kvsim.engine.group import DECODE, FINISHED, RUNNING, WAITING, Group
from kvsim.engine.scheduler_policy import VLLM_V1, SchedulerRules
from kvsim.engine.tier_waits import TierWaits, next_load_s
from kvsim.engine.window_sums import WindowSums
from kvsim.errors import KvsimError
from kvsim.kvcache.interface import KVManager
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.view import ContextSums

_new = tuple.__new__
"""A NamedTuple from all its values (Batch, ContextSums): no Python frame, as their generated __new__ runs."""


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


class Scheduler(Admission):
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

    __slots__ = ()

    def __init__(self, limits: SchedulerLimits, kv: KVManager, sizing: DecodeSizing | None = None,
                 loader: Callable[[float, tuple], float] | None = None,
                 handoff: HandOff | None = None, lora=None) -> None:
        self.lim = limits
        """Fixed for the scheduler's life: the hot paths read copies of its figures (_max_seqs, _max_tokens,
        _no_bytes, below); a scheduler for other limits is a new one."""
        self.kv = kv
        self.tier_waits = None if loader is None else TierWaits(loader)
        """KV tiers: when a hit's KV loaded from below the GPU arrives (kvsim/engine/tier_waits.py); None
        without tiers."""
        self.handoff = HandOff() if handoff is None else handoff
        """P/D (kvsim/engine/fleet/handoff.py): on a prefill replica (`sends`) a finished prefill leaves the
        batch with its KV held until `release`, and complete() returns it like a finished group; on a
        decode replica `receive` times the KV a handed-off group brings."""
        self._sends = self.handoff.sends
        self.lora = lora  # multi-LoRA: kvsim/lora/slots.py AdapterSlots (admission's adapter limit), or None
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
        self._paged = kv if isinstance(kv, PagedKVManager) else None
        """kv when it is a PagedKVManager (prefix caches included), else None: the hot paths call its
        methods through this typed reference (C calls when compiled)."""
        self._max_seqs = limits.max_num_seqs
        self._max_tokens = limits.max_num_batched_tokens
        self._no_bytes = 0 * limits.bytes_per_block
        """The swap bytes of an iteration that swaps nothing (the limits' figures read once: hot paths)."""
        self._chunked = limits.chunked_prefill
        self._watermark = limits.watermark_blocks
        self._figures_fn = self._iteration_figures
        self._budget = 0
        """Tokens this iteration may still schedule."""
        self._swap_out_blocks = 0
        """Blocks swapped out this iteration."""
        self.waiting: deque[Group] = deque()
        self.swapped: deque[Group] = deque()
        self.running: dict[Group, None] = {}
        self.prefilling: dict[Group, None] = {}
        self.it = 0
        """The decode clock: a decoding group's context at it is base + it."""
        self.iterations = 0
        """Iterations run (the timeline's iteration number)."""
        rules = limits.rules
        self._charge = self.sizing.decode_tokens if rules.decodes_use_budget else 0
        self._prefill_first = not rules.mix
        self._admit_after_preemption = rules.admit_after_preemption
        self._admit_while_swapped = rules.admit_while_swapped
        self._paused = False
        """This iteration runs prefills only (vLLM V0): decodes do not advance."""
        self._alloc_due: dict[int, list[tuple[int, Group, int, int]]] = {}
        """Iteration -> (epoch, group, sequence, base) of the groups that need a block then, in push order."""
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
        self.preempted_unrecorded = 0  # preempted by schedule() calls that ran no iteration (in no row yet)
        self._scheduled_prefills: list[Group] = []
        self.total_preemptions = 0
        self.beam = BeamSearch(kv, np.random.default_rng([limits.beam_seed, 0xBEA]))
        self.windows: tuple[int, ...] = limits.windows
        self.win = WindowSums(self.windows, self.running) if self.windows else None
        """The decoding sequences' context sums at each window cap (sliding / compressed layers)."""
        self.schedule_decodes: Callable[[float], Batch | None] = (
            DecodeFastPath(self).schedule if self._by_context and not self.windows else self.schedule)
        """schedule(), by a short path when this iteration can only run the decodes (the strategy of
        kvsim/engine/decode_fast_path.py where it applies); the same result as schedule()."""

    # ----------------------------------------------------------------- queries
    def has_work(self) -> bool:
        return bool(self.running or self.waiting or self.swapped)

    def token_slots(self) -> int:
        """Sum over sequences of KV tokens held (shared slots counted once per sequence), those held for a
        transfer included; a prefill-only iteration (vLLM V0) decodes no token, so holds none for it."""
        if type(off := self.dec_held_offset) is int:  # (integers: C integers when compiled, preemption.py)
            return self._int_slots()
        paused = self.dec_seqs if self._paused else 0
        return (self.dec_base_sum + off + self.dec_seqs * self.it - paused
                + self.prefill_tokens_held + self.handoff.tokens)

    def prefill_blocks(self) -> int:
        """Blocks in the tables of the prefilling requests' sequences (one each)."""
        kv = self.kv
        paged = self._paged  # (the paged manager's methods: C calls when compiled)
        total = 0
        for g in self.prefilling:
            seq = g.seqs[0]
            if kv.has(seq) if paged is None else paged.has(seq):
                total += kv.num_blocks_of(seq) if paged is None else paged.num_blocks_of(seq)
        return total

    def unshared_blocks(self) -> int:
        """Sum of block-table lengths over the sequences on the GPU (what they would hold without sharing):
        the decoding sequences' running sum plus each prefilling request's one sequence (and those held for
        a transfer)."""
        return self.dec_blocks + self.prefill_blocks() + self.handoff.blocks

    def _iteration_figures(self) -> tuple[int, int, int]:
        """(KV tokens the sequences' contexts hold, blocks of the decoding sequences, blocks of the
        prefilling ones) for the decode sizing's accounting (decode_sizing.Figures)."""
        handoff = self.handoff
        return (self.dec_base_sum + self.dec_seqs * self.it + self.prefill_tokens_held + handoff.tokens,
                self.dec_blocks, self.prefill_blocks() + handoff.blocks)

    def context_sums(self) -> ContextSums:
        """What the KV of the sequences on the GPU adds up to, for the KV manager's token states."""
        held_tokens = held = 0  # (only a sending replica holds KV for a hand-off: _hand_off)
        if self._sends:
            held_tokens = self.handoff.tokens
            held = len(self.handoff.held)
        tokens = (self.dec_base_sum + self.dec_held_offset + self.dec_seqs * self.it  # (token_slots())
                  - (self.dec_seqs if self._paused else 0) + self.prefill_tokens_held + held_tokens)
        windowed = () if self.win is None else self.win.context(self.it, self.prefilling, self._paused)
        return _new(ContextSums, (tokens, windowed, self.running_seqs + held))

    def next_load_s(self, now: float) -> float | None:
        """When the first blocking load (or P/D transfer) still in flight arrives (None if none): a replica
        with nothing else to run waits until then."""
        return next_load_s(self.prefilling, now)

    def calls_out(self) -> bool:
        """Whether scheduling calls back into the cluster (tier loads, P/D transfers and hand-offs): such a
        replica steps its iterations one by one."""
        return self.tier_waits is not None or self.handoff.active

    def token_states(self) -> int:
        return self.kv.token_states(self.context_sums())

    def add(self, g: Group) -> None:
        g.state = WAITING
        self.waiting.append(g)

    def release(self, seq: int) -> None:
        """Prefill replica: the KV held for seq's transfer has gone; free its blocks."""
        self.handoff.release(seq)
        self.kv.free(seq)

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
        seqs = g.seqs
        if len(seqs) == 1:
            blocks = self.kv.num_blocks_of(seqs[0])
        else:
            blocks = self._blocks_of(seqs)
        g.seq_blocks = blocks
        self.dec_blocks += blocks
        if self._by_context:  # (ContextSizing: decode_steps is the tokens left, on_join_decode a no-op)
            self._push(self._finish_heap, it_done + g.output - g.generated, g)
            self._schedule_next_alloc(g, it_done + 1)
            if self.win is not None:
                self.win.join(g, it_done + 1)
            return
        self._push(self._finish_heap, it_done + self.sizing.decode_steps(g, g.output - g.generated), g)
        if self.win is not None:
            self.win.join(g, it_done + 1)
        delta = self.sizing.on_join_decode(g, self._resize_fn)  # (resizes first: preemptions move the sum)
        self.dec_held_offset += delta

    # ----------------------------------------------------------------- one iteration
    def _begin(self, now: float) -> int:
        """Reset the per-iteration figures; the KV manager's copy count before this iteration."""
        self.preempted_now = 0
        self._swap_out_blocks = 0
        self._scheduled_prefills = []
        self._budget = self._max_tokens
        self._load_wait = 0.0
        self._now = now
        self._paused = False
        return self.kv.cow_copies if self._paged is None else self._paged.cow_copies  # (a C field)

    def completes_quietly(self) -> bool:
        """True when complete() after this iteration finishes no group (and hands none off): it only
        moves prefill chunks and the decode clock on."""
        heap = self._finish_heap
        if heap and (top := heap[0][0]) <= self.it:  # noqa: F841 (C integers when compiled)
            return False
        for g in self._scheduled_prefills:
            if g.computed + g.chunk >= g.prompt and (self._sends or g.generated + 1 >= g.output):
                return False
        return True

    def schedule(self, now: float) -> Batch | None:
        """Pick this iteration's work; None when there is nothing to run (what it preempted then goes
        into the next recorded iteration: take_preempted)."""
        batch = self._schedule(now)
        if batch is None:
            self.preempted_unrecorded += self.preempted_now
        return batch

    def _schedule(self, now: float) -> Batch | None:
        copies_before = self._begin(now)
        if self.win is not None:
            self.win.cross(self.it)
        if self._prefill_first:
            batch = self._prefill_only(now, copies_before)
            if batch is not None:
                return batch
        its = self._alloc_its
        if its and (first := its[0]) <= self.it:  # noqa: F841 (C integers when compiled)
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

        for g in (list(self.prefilling) if self.prefilling and not self._prefill_first else ()):
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
            if self.has_work() and not self.running and not self.handoff.held:
                raise KvsimError("internal error: the scheduler stalled with waiting work it cannot "
                                 "schedule (please report the scenario)")
            return None
        return self._batch(prefills, swap_in_blocks, copies_before, True)

    def _batch(self, prefills: list[Group], swap_in_blocks: int, copies_before: int, decodes: bool) -> Batch:
        """The iteration's Batch: the scheduled prefill chunks and, with `decodes`, every decoding group."""
        it = self.it
        kv = self.kv
        lim = self.lim
        p_tokens = 0
        pairs = 0.0
        for g in prefills:  # (C integers and a C double when compiled: exact below 2**53, as Python's)
            c = g.chunk
            p_tokens += c
            pairs += c * g.computed + c * (c + 1) / 2
        win = self.win
        windows = win.batch_figures(it, prefills) if win is not None else ((), ())
        extras = NO_EXTRAS if self._by_context else self.sizing.batch_extras(self._figures_fn)
        recall, offload, kv_copy, prefetch, read_extra = extras
        if decodes:
            dec_seqs = self.dec_seqs
            off = self.dec_held_offset
            if type(off) is int and type(read_extra) is int:  # (a sum of C integers when compiled)
                ioff, iextra = off, read_extra
                context = self.dec_base_sum + ioff + dec_seqs * it + iextra
            else:
                context = self.dec_base_sum + off + dec_seqs * it + read_extra
            dec_blocks = self.dec_blocks
        else:
            dec_seqs = context = dec_blocks = 0
            windows = ((0,) * len(self.windows), windows[1])
        swap_in_bytes = swap_in_blocks * lim.bytes_per_block if swap_in_blocks else self._no_bytes  # (0 x it)
        out = self._swap_out_blocks
        swap_out_bytes = out * lim.bytes_per_block if out else self._no_bytes
        copies = (kv.cow_copies if self._paged is None else self._paged.cow_copies) - copies_before
        # every field in Batch's order (num_seqs .. decode_blocks, swap in / out, copies, recall, offload,
        # kv copy, the window sums, load wait, prefetch) and the last four's defaults: no Python frame
        return _new(Batch, (len(prefills) + dec_seqs, len(prefills), p_tokens, pairs, dec_seqs, context,
                            dec_blocks, swap_in_bytes, swap_out_bytes,
                            copies, recall, offload, kv_copy, windows[0], windows[1],
                            self._load_wait, prefetch, 0, 0, 0, 0.0))

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
            if self._sends and g.output > 1:
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
        if self._scheduled_prefills:
            self._scheduled_prefills = []
        self.iterations += 1
        if paused:
            self._paused = False
            return finished
        heap = self._finish_heap
        running = RUNNING  # (a C integer when compiled)
        while heap and (top := heap[0][0]) <= it:  # noqa: F841 (C integers when compiled, as the epoch)
            _, _, epoch, g = heappop(heap)
            if epoch != g.epoch or g.state != running:
                continue
            g.generated = g.gen_base + it if self._by_context else g.output
            self._leave_decode(g)
            self._finish(g, t_end)
            finished.append(g)
        self.it += 1
        return finished

    def _finish(self, g: Group, t_end: float) -> None:
        kv = self.kv
        tokens = g.req.prompt_len + g.output - 1  # (all but the last sampled token)
        for s in g.seqs:
            if kv.has(s) if self._paged is None else self._paged.has(s):  # (a C call when compiled)
                self._free_decoded(s, tokens)
        del self.running[g]
        self.running_seqs -= g.n
        g.state = FINISHED
        g.finish_s = t_end
