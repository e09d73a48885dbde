"""One engine replica: the simpy process that runs scheduler iterations and advances time."""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush

from simpy.core import NORMAL, URGENT, Infinity
from simpy.events import PENDING, Event

from kvsim.cost.base import CostModel
from kvsim.engine.breakdown import breakdown_of, check_scheduler_breakdown
from kvsim.engine.check_pacing import CheckPacing
from kvsim.engine.clock import Clock, Tick
from kvsim.engine.decode_fast_path import DecodeFastPath
from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler
from kvsim.kvcache.block_pool import BlockPool
from kvsim.kvcache.block_queue import BlockQueue
from kvsim.kvcache.hash_pool import HashCachePool
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.kvcache.radix import RadixKVManager, RadixPool
from kvsim.metrics.recorder import IterationRow, Recorder, append_timeline, append_values

_COMPILED = not __file__.endswith(".py")
"""Compiled by Cython (replica.pxd): the tick goes into the clock's heap by `_push_tick`'s C loop."""


def _push_tick(heap: list, item: tuple) -> None:
    """heapq.heappush(heap, item) for the clock's ticks heap (entries (t, priority, eid, event)): the same
    sift, comparing the times as C doubles when they differ (the tuples' order then), else the tuples."""
    heap.append(item)
    pos = len(heap) - 1
    t = item[0]
    while pos > 0:
        parentpos = (pos - 1) >> 1
        parent = heap[parentpos]
        pt = parent[0]
        less = t < pt if t != pt else item < parent
        if less:
            heap[pos] = parent
            pos = parentpos
            continue
        break
    heap[pos] = item


class Replica:
    """Runs iterations while it has work; sleeps on an event until a request arrives otherwise (its loop is
    a chain of callbacks on the event loop, `_turn`).

    `extra_columns`, when given, returns the values of the recorder's registered extra timeline column
    groups (a tuple of tuples, in registration order)
    for the iteration just scheduled (idle rows take the group's default).

    Unless `exact`, iterations that nothing else observes run back to back without the event loop
    (`_fast_forward`); the results are those of stepping one by one."""

    __slots__ = ("index", "role", "env", "cost", "rec", "on_finish", "check", "pacing", "extra_columns",
                 "exact", "sched", "fast", "fast_iterations", "_wakeup", "_tick", "_on_tick_cb", "_queue",
                 "_ticks", "_step_time", "_timeline", "_context_sums", "_token_states", "_breakdown",
                 "_paged", "_block_size", "_slots", "_schedule", "_counts", "_fast_path", "_eid")

    def __init__(self, index: int, env: Clock, scheduler: Scheduler, cost: CostModel,
                 recorder: Recorder, on_finish: Callable[[Group], None], check: bool = False,
                 extra_columns: Callable[[], tuple] | None = None, role: str = "mixed",
                 exact: bool = False) -> None:
        self.index = index
        self.role = role
        """mixed, prefill or decode (kvsim/engine/fleet/cluster.py moves the KV between the last two)."""
        self.env = env
        self.sched = scheduler
        self.cost = cost
        self.rec = recorder
        self.on_finish = on_finish
        self.check = check
        self.pacing = CheckPacing() if check else None
        """Check mode: when the full KV check runs (kvsim/engine/check_pacing.py)."""
        self.extra_columns = extra_columns
        self.exact = exact
        """simulation.exact_stepping: every iteration through the event loop and the general schedule."""
        self.fast = False
        """Iterations may run back to back (set by the start event, _begin): not `exact`, and the scheduler
        has no callbacks into the cluster (tier loads, P/D transfers), which step one by one."""
        self.fast_iterations = 0
        """Iterations run back to back without the event loop so far."""
        self._wakeup: Event | None = None
        self._schedule = scheduler.schedule  # (the scheduling step the loop calls: set when it starts)
        self._fast_path: DecodeFastPath | None = None
        """The DecodeFastPath whose schedule is `_schedule` when it is (set when the loop starts): called as a
        C method when compiled."""
        # the methods _step calls every iteration, bound once
        self._step_time = cost.step_time
        self._timeline = recorder._timeline  # (recorder.iteration_values' table: rows appended directly)
        self._context_sums = scheduler.context_sums
        self._token_states = scheduler.kv.token_states
        self._breakdown = scheduler.kv.breakdown
        kind = type(scheduler.kv)
        self._paged = (getattr(kind, "token_states", None) is PagedKVManager.token_states
                       and getattr(kind, "breakdown", None) is PagedKVManager.breakdown)
        """The KV manager's token states and breakdown are PagedKVManager's (prefix caches included):
        _step works them out from the scheduler's token slots and the blocks in use, as those do."""
        self._block_size = scheduler.kv.block_size if self._paged else 0
        self._slots = scheduler.kv.num_blocks * self._block_size  # (the capacity in slots: fixed)
        self._counts = 0
        """How _step reads the KV manager's used and cached blocks: 0 by its properties; 1 PagedKVManager's
        (no cache: the pool's `num_used`, 0 cached), 2 PrefixHashKVManager's (the pool's `num_used` and its
        queue's length), 3 RadixKVManager's (the RadixPool's `num_used` and `num_cached_free`), read from the
        pool's fields while the pool (and queue) are of the types whose properties those are (the properties
        otherwise)."""
        if self._paged:
            used = getattr(kind, "used_blocks", None)
            cached = getattr(kind, "cached_blocks", None)
            if used is PagedKVManager.used_blocks and cached is PagedKVManager.cached_blocks:
                self._counts = 1
            elif (used is PagedKVManager.used_blocks or used is PrefixHashKVManager.used_blocks) \
                    and cached is PrefixHashKVManager.cached_blocks:
                self._counts = 2
            elif used is PagedKVManager.used_blocks and cached is RadixKVManager.cached_blocks:
                self._counts = 3
        # the loop: callbacks on events (no simpy process), the steps and the event order of a process that
        # yields a timeout per iteration and an event per wait: started as a process is (urgent, now)
        self._tick = Tick(env)  # (each iteration's end: env.timeout(dt), without a new event)
        self._queue = env._queue  # (the event loop's heaps: each one list for the environment's life)
        self._ticks = env._ticks
        self._eid = env._eid  # (the event ids' counter: one for the environment's life)
        self._on_tick_cb = self._on_tick
        start = Event(env)
        start._ok = True
        start._value = None
        start.callbacks = [self._begin]
        env.schedule(start, URGENT)

    def submit(self, g: Group) -> None:
        g.replica = self.index
        self.sched.add(g)
        self.wake()

    def wake(self) -> None:
        """Something changed that may let a sleeping replica schedule (an arrival, freed blocks)."""
        wakeup = self._wakeup
        if wakeup is not None and wakeup._value is PENDING:  # (not triggered: succeed() it)
            wakeup.succeed()

    def _begin(self, _event) -> None:
        """The replica's first turn (the start event, urgent, when the replica was built)."""
        sched = self.sched
        self.fast = not self.exact and not sched.calls_out()
        self._schedule = sched.schedule_decodes if self.fast else sched.schedule
        owner = getattr(self._schedule, "__self__", None)
        if type(owner) is DecodeFastPath and owner.sched is sched and self._schedule == owner.schedule:
            self._fast_path = owner
        self._turn(False)

    def _on_tick(self, _event) -> None:
        """The iteration stepped last ended now."""
        self._turn(True)

    def _turn(self, ended: bool) -> None:
        """One turn of the replica's loop at the event loop's now: complete the iteration that ended now
        (if `ended`), schedule and step the next ones (`_advance`) and come back when the last ends (the
        tick's callback); with nothing scheduled, wait: for work (idle), or for a KV load or a held
        block (`_on_wait`)."""
        env = self.env
        now = env._now
        end = self._advance(now, ended)
        if end is not None:
            # at now + dt, as env.timeout(dt) (now + one delay need not reach a sum of several: end): the
            # tick's `at(end)` and its callback, inline (once per turn)
            tick = self._tick
            if end < now:
                raise ValueError(f"Tick.at({end}) is before now ({now})")
            if tick.callbacks is not None:
                raise RuntimeError("Tick.at: the tick is already scheduled (in the ticks heap at most once)")
            tick.callbacks = [self._on_tick_cb]
            if _COMPILED:
                _push_tick(self._ticks, (end, NORMAL, next(self._eid), tick))
            else:
                heappush(self._ticks, (end, NORMAL, next(self._eid), tick))
            return
        sched = self.sched
        if not sched.has_work():
            if sched.iterations:
                self._record_idle(now)
            self._sleep()
            return
        # only requests waiting for KV (tiers, a prefill replica) or for held blocks
        ready = sched.next_load_s(now)
        if ready is None and not sched.handoff.held:
            raise RuntimeError(f"replica {self.index} ({self.role}) has work but scheduled nothing")
        wakeup = self._wakeup = env.event()
        if ready is None:  # a prefill replica whose blocks are held for transfers: wait for one
            wakeup.callbacks.append(self._on_wait)
        else:
            env.any_of([env.timeout(ready - now), wakeup]).callbacks.append(self._on_wait)

    def _sleep(self) -> None:
        """Idle: wait for an arrival or freed blocks (`wake`)."""
        wakeup = self._wakeup = self.env.event()
        wakeup.callbacks.append(self._on_wake)

    def _on_wake(self, _event) -> None:
        self._wakeup = None
        if self.sched.has_work():  # (a prefill replica also wakes when held KV is freed)
            self._turn(False)
        else:
            self._sleep()

    def _on_wait(self, _event) -> None:
        self._wakeup = None
        self._turn(False)

    def _advance(self, now: float, ended: bool):
        """One turn of the replica's loop at `now`: complete the iteration that ended now (if `ended`),
        then schedule and step the next (and those after it that run back to back); when the last of them
        ends. None when nothing was scheduled: no work, or only work that waits."""
        sched = self.sched
        if ended:
            finished = sched.complete(now)
            if finished:
                on_finish = self.on_finish
                for g in finished:
                    if sched.lora is not None and g.req.adapter >= 0:  # (it leaves the running adapters)
                        sched.lora.release(g.req.adapter, g.n)
                    on_finish(g)
        if not sched.has_work():
            return None
        fast_path = self._fast_path
        batch = self._schedule(now) if fast_path is None else fast_path.schedule(now)
        if batch is None:
            return None
        end = now + self._step(batch, now)
        if self.fast:
            queue = self._queue  # (env.peek(): the first of the clock's two heaps)
            ticks = self._ticks
            horizon = queue[0][0] if queue else Infinity
            if ticks and ticks[0][0] < horizon:
                horizon = ticks[0][0]
            if end < horizon:  # (in a fleet another replica's step usually comes first)
                end = self._fast_forward(end, horizon)
        return end

    def _step(self, batch, now: float) -> float:
        """Time the scheduled batch, record its timeline row (and check, in check mode); its duration."""
        sched = self.sched
        kv = sched.kv
        if sched.lora is not None:  # multi-LoRA: the batch's adapter tokens, adapters and loads
            batch = sched.lora.batch(batch, sched)
        if _COMPILED:  # (the Batch, a tuple subclass of 21 fields, read as a tuple by C indexing: pxd)
            fields = _batch_tuple(batch)  # noqa: F821 (roofline.pxd's, cimported by replica.pxd)
            num_seqs, prefill_seqs, prefill_tokens, decode_seqs = fields[0], fields[1], fields[2], fields[4]
            copy_blocks, load_wait, prefetch = fields[9], fields[15], fields[16]
        else:  # (the batch's fields unpacked at once: cheaper than reading each by name)
            (num_seqs, prefill_seqs, prefill_tokens, _, decode_seqs, _, _, _, _, copy_blocks, _, _, _, _, _,
             load_wait, prefetch, _, _, _, _) = batch
        dt = self._step_time(batch)
        if prefetch:
            sched.sizing.record_overlap(*self.cost.prefetch_overlap(batch))
        if load_wait > dt:  # pipelined tier loads: the forward pass waits for the KV
            dt = load_wait
        # (sched.token_states() and breakdown_of(sched, states), unrolled: once per iteration)
        unshared = sched.dec_blocks
        if sched._sends:  # (only a sending replica holds blocks for a hand-off: Scheduler._hand_off)
            unshared += sched.handoff.blocks
        if sched.prefilling:
            unshared += sched.prefill_blocks()
        waiting = sched.waiting
        if self._paged:  # (PagedKVManager.token_states and paged_breakdown, unrolled: no tuples)
            paged = kv
            if type(sched.dec_held_offset) is int:  # (token_slots() as a C integer when compiled)
                states = sched._int_slots() - paged.shared_dup_tokens
            else:
                states = sched.token_slots() - paged.shared_dup_tokens
            # (kv.used_blocks and kv.cached_blocks, unrolled where they are the pool's counts: _counts)
            counts = self._counts
            pool = paged.pool
            cached = -1
            if counts == 2 and type(pool) is HashCachePool:
                hash_pool = pool  # (its queue read as a C field when compiled)
                queue = hash_pool.queue
                if type(queue) is BlockQueue:
                    evictable = queue
                    cached = evictable.count
                    used = pool.num_blocks - pool.free_count - cached
            elif counts == 1 and type(pool) is BlockPool:
                cached = 0
                used = pool.num_blocks - pool.free_count
            elif counts == 3 and type(pool) is RadixPool:
                radix = pool
                cached = radix.num_cached_free
                used = radix.num_blocks - radix.free_count - cached
            if cached < 0:
                used = kv.used_blocks
                cached = kv.cached_blocks
            allocated = used * self._block_size
            reservation, internal, external, free = 0, allocated - states, 0, self._slots - allocated
        else:
            states = self._token_states(self._context_sums())
            if waiting:
                head = waiting[0]
                reservation, internal, external, free, unshared = self._breakdown(states, unshared,
                                                                                  head.req, head.output)
            else:
                reservation, internal, external, free, unshared = self._breakdown(states, unshared)
            used = kv.used_blocks
            cached = kv.cached_blocks
        preempted = sched.preempted_now + sched.preempted_unrecorded  # (sched.take_preempted())
        sched.preempted_unrecorded = 0
        # the row's values in TIMELINE_COLUMNS order (IterationRow's fields), no row object
        swapped = sched.swapped
        if self.extra_columns is None:  # (Recorder.iteration_values, one call less: C values when compiled)
            append_timeline(self._timeline, self.index, sched.iterations, now, dt, len(sched.running),
                            num_seqs, prefill_seqs, prefill_tokens, decode_seqs,
                            len(waiting), len(swapped), used, states,
                            cached, preempted, copy_blocks,
                            reservation, internal, external, free, unshared)
        else:
            values = (self.index, sched.iterations, now, dt, len(sched.running), num_seqs, prefill_seqs,
                      prefill_tokens, decode_seqs, len(waiting) if waiting else 0,
                      len(swapped) if swapped else 0, used, states, cached, preempted, copy_blocks,
                      reservation, internal, external, free, unshared)
            append_values(self._timeline, values, tuple(self.extra_columns()))
        if self.check:
            self.check_invariants()
        return dt

    def _fast_forward(self, end: float, horizon: float) -> float:
        """Run the iterations after the one scheduled (ending at `end`) without the event loop, as long
        as no other event comes first (`horizon`, env.peek(): an arrival, a follow-up, another replica's
        step, the end of the run) and completing one finishes nothing (finishing calls back into the
        simulation, which reads the event loop's clock). Returns when the last iteration scheduled ends:
        the event loop resumes this replica then, exactly as if it had stepped through each."""
        sched = self.sched
        schedule = sched.schedule_decodes
        fast_path = self._fast_path if schedule == self._schedule else None  # (its C method when compiled)
        n = 0
        while end < horizon and sched.completes_quietly():  # (C calls when compiled: sched is typed)
            sched.complete(end)
            batch = schedule(end) if fast_path is None else fast_path.schedule(end)
            if batch is None:
                self.fast_iterations += n
                raise RuntimeError(f"replica {self.index} ({self.role}) has work but scheduled nothing")
            end += self._step(batch, end)
            n += 1
        self.fast_iterations += n
        return end

    def _record_idle(self, now: float) -> None:
        """An idle row (iteration -1, no batch) marks when the replica ran out of work, so the last busy
        iteration's state does not hold through the idle gap."""
        kv = self.sched.kv
        states = self.sched.token_states()
        self.rec.iteration(IterationRow.idle(self.index, now, kv.used_blocks, states, kv.cached_blocks,
                                             breakdown_of(self.sched, states)))

    def check_invariants(self) -> None:
        """Runtime check mode, after scheduling: the KV manager's full check when the pacing says it is due
        (kvsim/engine/check_pacing.py), the O(1) accounting checks every time."""
        sched = self.sched
        kv = sched.kv
        pacing = self.pacing
        if pacing is None or pacing.due():
            self.full_check()
        states = sched.token_states()
        assert 0 <= states <= kv.used_blocks * kv.block_size, "token states exceed allocated slots"
        assert kv.used_blocks <= kv.num_blocks, "usage over capacity"
        assert sched.running_seqs <= sched.lim.max_num_seqs, "max_num_seqs exceeded"
        check_scheduler_breakdown(sched)

    def full_check(self) -> None:
        """The KV manager's full invariant check, now (check mode: when the pacing says so, and once the run
        has ended)."""
        cost = self.sched.kv.check_invariants()
        if self.pacing is not None:
            self.pacing.done(cost)
