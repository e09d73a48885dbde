"""The decode fast path: a scheduler iteration that can only run the decodes, by a short path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvsim.cost.batch import Batch

if TYPE_CHECKING:
    from kvsim.engine.scheduler import Scheduler

_new = tuple.__new__
_COMPILED = not __file__.endswith(".py")
"""Compiled by Cython (decode_fast_path.pxd): the batch is made by `_decode_batch`'s C calls."""
_TAIL = tuple(Batch._field_defaults[f] for f in Batch._fields[10:])
"""Batch's fields after copy_blocks in a decode-only batch (their defaults): `_decode_batch` puts them in
place after the ten it is given; `schedule` appends them when not compiled."""


class DecodeFastPath:
    """`Scheduler.schedule_decodes` when the scheduler sizes KV by context and has no window caps (else it
    is `Scheduler.schedule` itself): the same batch as schedule(), by a short path when this iteration can
    only run the decodes: nothing prefilling or swapped out and nothing waiting that admission could take
    (the queue is empty, or its head is over the sequence or token budget, which nothing but a finish or a
    preemption changes). Block-boundary allocations run as in schedule(); one that preempts hands the rest
    of the iteration to the general path. A part of the scheduler: it reads and moves the scheduler's own
    state."""

    __slots__ = ("sched",)

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched

    def schedule(self, now: float) -> Batch | None:
        s = self.sched
        if s.prefilling or s.swapped or not s.dec_seqs:
            return s.schedule(now)
        waiting = s.waiting
        if waiting:
            head = waiting[0]  # (compiled: a Group, as _admit types it: its n read as a C field)
            if s.running_seqs + head.n <= s._max_seqs and (
                    s._prefill_first or s._max_tokens > s.dec_seqs * s._charge):
                return s.schedule(now)
        # s._begin(now), unrolled (its prefill list is the empty one complete() left)
        s.preempted_now = 0
        s._swap_out_blocks = 0
        if s._scheduled_prefills:
            s._scheduled_prefills = []
        s._budget = s._max_tokens
        s._load_wait = 0.0
        s._now = now
        s._paused = False
        it = s.it
        its = s._alloc_its
        copies = 0  # (only the grow step copies blocks: the KV manager's count is read around it alone)
        if its:
            top = its[0]  # (compiled: a C integer, compared with it in C)
            if top <= it:
                kv = s.kv
                paged = s._paged  # (the paged manager: its count read as a C field when compiled)
                # (the counts as C integers when compiled: if-statements, not one object-typed expression)
                if paged is not None:
                    copies_before = paged.cow_copies
                else:
                    copies_before = kv.cow_copies
                s._grow(it)
                if s.preempted_now:
                    return s._schedule_rest(now, copies_before)
                if paged is not None:
                    copies = paged.cow_copies - copies_before
                else:
                    copies = kv.cow_copies - copies_before
        dec_seqs = s.dec_seqs
        s._budget -= dec_seqs * s._charge
        # s._batch([], 0, copies_before, True) for a decode-only batch by context without window caps
        no_bytes = s._no_bytes  # (0 x bytes_per_block)
        off = s.dec_held_offset
        if type(off) is int:  # (integers: the counts summed first, as C integers when compiled; the same sum)
            held = off  # (compiled: a C integer: the whole sum in C, one Python int made)
            context = s.dec_base_sum + dec_seqs * it + held
        else:
            context = s.dec_base_sum + off + dec_seqs * it
        n = dec_seqs  # (compiled: one Python int for both fields)
        if _COMPILED:  # (the Batch made in place in C, without a tuple of its fields made and freed)
            return _decode_batch(Batch, n, context, s.dec_blocks, no_bytes, copies)  # noqa: F821 (the .pxd's)
        # (every field in Batch's order, the defaults after copy_blocks: tuple.__new__ runs no Python frame)
        fields = (n, 0, 0, 0.0, n, context, s.dec_blocks, no_bytes, no_bytes, copies) + _TAIL
        return _new(Batch, fields)
