"""Block growth of decoding groups: each group's next block-boundary crossing (or copy of a shared last
block) sits in a table keyed by iteration, and the groups due get their blocks in push order."""

from __future__ import annotations

from heapq import heappop, heappush

from kvsim.engine.group import RUNNING, Group
from kvsim.engine.preemption import Preemption

_COMPILED = not __file__.endswith(".py")
"""Compiled by Cython (block_growth.pxd): the iterations heap is kept by _its_push / _its_pop's C loops."""


def _its_push(heap: list[int], item: int) -> None:
    """heapq.heappush(heap, item) for a heap of ints (the same sift: the same list), compared as C
    integers when compiled."""
    heap.append(item)
    _its_sift_up(heap, len(heap) - 1, item)


def _its_sift_up(heap: list[int], pos: int, item: int) -> None:
    """Put item at pos after moving the larger parents above it down (heapq's _siftdown from the root;
    `v`, `pv`: the C values of item and parent when compiled)."""
    v = item
    while pos > 0:
        parentpos = (pos - 1) >> 1
        parent = heap[parentpos]
        pv = parent
        if v < pv:
            heap[pos] = parent
            pos = parentpos
            continue
        break
    heap[pos] = item


def _its_pop(heap: list[int]) -> int:
    """heapq.heappop(heap) for a heap of ints (heapq's sift: down to a leaf by the smaller child, then up:
    the same list), compared as C integers when compiled."""
    last = heap.pop()
    if not heap:
        return last
    top = heap[0]
    end = len(heap)
    pos = 0
    child = 1
    while child < end:
        right = child + 1
        if right < end:
            a = heap[child]
            b = heap[right]
            if not a < b:
                child = right
        heap[pos] = heap[child]
        pos = child
        child = 2 * pos + 1
    _its_sift_up(heap, pos, last)
    return top


def _grow_each_due(kv, entries: list[tuple], offset: int) -> bool:
    """kv.grow_each over the due entries (a KV manager that is not a PagedKVManager): their sequences,
    and their bases + offset as the slots each then holds."""
    return kv.grow_each([e[2] for e in entries], [e[3] + offset for e in entries])


class BlockGrowth(Preemption):
    """The block-growth part of `Scheduler` (kvsim/engine/scheduler.py), in its chain Preemption <-
    BlockGrowth <- Admission <- Scheduler: its methods read and move the scheduler's state, set in
    `Scheduler.__init__`."""

    __slots__ = ("_paged",)

    def _push_alloc(self, it: int, g: Group) -> None:
        # (epoch, group, its one sequence or -1 when it has several, base): while the epoch holds, the
        # group decodes and its sequence and base stay as they are
        self._due_list(it).append((g.epoch, g, g.seqs[0] if g.n == 1 else -1, g.base))

    def _due_list(self, it: int) -> list[tuple[int, Group, int, int]]:
        """The (epoch, group, sequence, base) list of the groups that need a block at iteration it (made,
        and the iteration put on the heap, when it has none yet)."""
        due = self._alloc_due.get(it)  # (it: a Python int, the key and heap item)
        if due is None:
            due = self._alloc_due[it] = []
            if _COMPILED:
                _its_push(self._alloc_its, it)
            else:
                heappush(self._alloc_its, it)
        return due

    def _schedule_next_alloc(self, g: Group, next_decode: int | None = None) -> None:
        """Push the iteration at which g next needs a block (or a copy of its shared last block);
        next_decode: the iteration of g's next token (default the one after this: after a prefill-only
        iteration, which does not move the decode clock, it is this one)."""
        seq = g.seqs[0]
        if g.n > 1 and (g.req.beam_width > 1 or self.kv.last_block_shared(seq)):
            self._push_alloc(self.it + 1 if next_decode is None else next_decode, g)
            return
        paged = self._paged
        if paged is not None:  # (the paged manager's capacity: a C call and C integers when compiled)
            self._push_alloc(paged.capacity_tokens(seq) - g.base + 1, g)
        else:
            self._push_alloc(self.kv.capacity_tokens(seq) - g.base + 1, g)

    def _grow(self, it: int) -> None:
        """Give the decoding groups whose next token at iteration it crosses a block boundary (or must copy
        a shared last block) their blocks, preempting when the pool is short, in (iteration, push) order."""
        kv = self.kv
        paged = self._paged  # (the paged manager's methods: C calls when compiled)
        its = self._alloc_its
        due = self._alloc_due
        nxt = it + self.bs  # (compiled: a Python int made once, the due table's key and the heap's item)
        later = due.get(nxt)  # the groups due at nxt, which the fast path appends to
        grown = 0  # blocks the fast path added, not yet in dec_blocks
        running = RUNNING  # (a C integer when compiled)
        while its:
            top = its[0]  # (compiled: read as a C integer, compared with it in C)
            if top > it:
                break
            entries = due.pop(_its_pop(its) if _COMPILED else heappop(its))
            if len(entries) > 1:  # every live one a single sequence: their blocks in one call
                live = entries  # (the list itself while every entry is live)
                single = True
                k = 0
                for e in entries:
                    g = e[1]
                    epoch = e[0]  # (compiled: a C integer, compared with the group's C field)
                    if epoch != g.epoch or g.state != running:
                        if live is entries:
                            live = entries[:k]
                        continue
                    if e[2] < 0:
                        single = False
                        break
                    k += 1
                    if live is not entries:
                        live.append(e)
                if single and k and (paged.grow_due(live, it) if paged is not None
                                     else _grow_each_due(kv, live, it)):
                    for e in live:
                        g = e[1]
                        g.seq_blocks += 1
                    grown += len(live)
                    if later is None:  # (nothing is due at nxt yet: the live entries are its list)
                        later = due[nxt] = live
                        if _COMPILED:
                            _its_push(its, nxt)
                        else:
                            heappush(its, nxt)
                    else:
                        later += live
                    continue
            for entry in entries:
                epoch, g, seq, base = entry
                if epoch != g.epoch or g.state != running:
                    continue
                if seq >= 0 and (paged.grow_one_block(seq, base + it) if paged is not None
                                 else kv.grow_one_block(seq, base + it)):
                    # fast path: a single sequence crossing a block boundary took its block(s)
                    delta = 1 if paged is not None else kv.last_grow_delta  # (paged: one block)
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
                blocks = self._blocks_of(g.seqs)
                self.dec_blocks += blocks - g.seq_blocks
                g.seq_blocks = blocks
                self._schedule_next_alloc(g)
                if later is None:
                    later = due.get(nxt)
        self.dec_blocks += grown
