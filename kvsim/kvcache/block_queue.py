# cython: boundscheck=False
"""The hash cache's eviction queue: evictable block ids, smallest priority first, without a row per block.

`BlockQueue` is eviction.EvictionQueue's lazy heap of batches, shaped for the blocks of a hash cache
(prefix_hash.HashCachePool), whose state sits in the pool's per-block lists: a batch is the list of its
block ids in pop order (the smallest priority last), a block's priority is computed from the pool's
bookkeeping only when it is compared, and a row is live while its block is at refcount 0 and was last filed
by the row's batch (`rc[b] == 0 and filed[b] == ticket`), so a cache hit (refcount 0 -> 1) writes nothing
here. A block's bookkeeping does not change while it is evictable (it changes when the block is registered,
released or hit, none of which happens at refcount 0), so a live row's priority is the one it was filed
with. A sequence's blocks released together under one `last` are filed with no per-block work beyond the
check that their depths ascend (lru, length: their order is then the table's).

The order is the policy's whenever no two live entries have the same priority, which holds for lru, lfu
and length in a hash cache: blocks released together have distinct depths (their table positions) and
different releases distinct `last` times. fifo's (birth, depth) ties between releases, which the heap of
EvictionQueue breaks by its own shape: HashCachePool keeps EvictionQueue for it.

That rests on how the scheduler drives the cache: an `admit` is followed by its allocation or its undo
before any other release. A caller that keeps an admission pending across another sequence's release can
make a tie (a block registered at clock c, its registering sequence released while the pending one holds
it, the pending admission then undone: its `last` stays c, as another block's of the release at c at the
same depth); the queue then still evicts a block of smallest priority, but which of the tied ones may differ
from EvictionQueue's choice.
"""

from __future__ import annotations

import heapq

from kvsim.kvcache.eviction import _DMAX, DEPTH_BITS, get_policy

_COMPILED = not __file__.endswith(".py")
_BITS = DEPTH_BITS
_MAXD = _DMAX


class BlockQueue:
    """The evictable blocks of a hash cache pool, smallest priority first; its per-block lists (`rc`,
    `filed`: the ticket of the batch that filed each block last, and the bookkeeping `last`, `uses`,
    `birth`, `depth`) are the pool's, shared. The pool files the blocks a release brought to refcount 0,
    having set their rc to 0 and their `filed` to the batch's ticket (`add_run`, `add_many`); tells
    `discard` when an evictable block is hit (its rc set above 0); and takes victims with `pop_many`
    (setting their rc back to 1 when it forgets them).

    A block's `filed` is 0 while no batch holds a row of it under that ticket (its row was popped or
    compacted away, or it was never filed), so an undone admission's blocks can be made live in their rows
    again (`revive`).

    Heap entries are (key, ticket, rows, top): rows the batch's block ids, smallest priority at the end;
    key a lower bound of its live rows' priorities (exact when it was set), top an upper bound (the first
    row's priority when filed). Stale rows are skipped when reached and compacted away when they outnumber
    the live ones.
    """

    __slots__ = ("key", "rc", "filed", "last", "uses", "birth", "depth", "_lru", "_runs", "_heap", "count",
                 "_rows")

    def __init__(self, policy: str, rc: list[int], filed: list[int], last: list[int], uses: list[int],
                 birth: list[int], depth: list[int]) -> None:
        self.key = get_policy(policy)
        self.rc = rc
        self.filed = filed
        self.last = last
        self.uses = uses
        self.birth = birth
        self.depth = depth
        self._lru = policy == "lru"
        self._runs = policy in ("lru", "length")
        """Blocks of one `last` pop deepest first (the priority falls with depth and nothing else)."""
        self._heap: list[tuple[int, int, list[int], int]] = []
        self.count = 0
        """Live (evictable) blocks. Read-only outside this class."""
        self._rows = 0

    def __len__(self) -> int:
        return self.count

    def __contains__(self, b: int) -> bool:
        return 0 <= b < len(self.rc) and self.rc[b] == 0

    def prio(self, b: int) -> int:
        """Block b's priority, from its bookkeeping now."""
        if _COMPILED and self._runs:  # (lru, length: in C integers where they fit, the same int)
            p = _prio_c(self.last, self.depth, b, self._lru)  # noqa: F821 (block_queue.pxd)
            if p is not None:
                return p
        if self._lru:
            return (self.last[b] << DEPTH_BITS) | (_DMAX - self.depth[b])
        return self.key(self.last[b], self.uses[b], self.birth[b], self.depth[b])

    def add_run(self, rows: list[int], ticket: int) -> None:
        """File blocks released together whose `last` is the same, in table order (the list is kept: the
        caller must not change it): with lru or length and their depths ascending, as they are, in one
        step; else as add_many."""
        if self._runs:
            depth = self.depth
            prev = -1
            for b in rows:
                d = depth[b]
                if d <= prev:
                    break
                prev = d
            else:
                self._file(rows, ticket, self.prio(rows[-1]), self.prio(rows[0]))
                return
        self.add_many(rows, ticket)

    def add_ascending(self, rows: list[int], ticket: int) -> None:
        """add_run of rows whose depths the caller checked ascend, with lru or length
        (hash_pool.settle_run)."""
        self._file(rows, ticket, self.prio(rows[-1]), self.prio(rows[0]))

    def add_many(self, rows: list[int], ticket: int) -> None:
        """File blocks released together (sorted here by priority, ties by block id)."""
        by = sorted(zip(map(self.prio, rows), rows, strict=True), reverse=True)
        self._file([b for _, b in by], ticket, by[-1][0], by[0][0])

    def _file(self, rows: list[int], ticket: int, head: int, top: int) -> None:
        if _COMPILED:  # (block_queue.pxd: heapq's push in C)
            _push(self._heap, (head, ticket, rows, top))  # noqa: F821
        else:
            heapq.heappush(self._heap, (head, ticket, rows, top))
        self.count += len(rows)
        self._rows += len(rows)
        if self._rows > 2 * self.count + 64:
            self._compact()

    def _compact(self) -> None:
        rc = self.rc
        filed = self.filed
        prio = self.prio
        heap = []
        self._rows = 0
        for _, ticket, rows, top in self._heap:
            t = ticket  # (compiled: C integers, the ticket and each row's block and its filed ticket)
            if _COMPILED:  # (block_queue.pxd: the loop below in C, rows kept in place)
                if _keep(rows, filed, rc, t, 0):  # noqa: F821
                    heap.append((self.prio(rows[-1]), ticket, rows, top))
                    self._rows += len(rows)
                continue
            kept = []
            for b in rows:
                i = b
                f = filed[i]
                if f == t:
                    if rc[i] == 0:
                        kept.append(b)
                    else:  # a held block's row goes
                        filed[i] = 0
            rows = kept
            if rows:
                heap.append((prio(rows[-1]), ticket, rows, top))
                self._rows += len(rows)
        if _COMPILED:  # (block_queue.pxd: heapq's heapify in C)
            _heapify(heap)  # noqa: F821
        else:
            heapq.heapify(heap)
        self._heap = heap

    def revive(self, rows: list[int], ticket: int) -> None:
        """File blocks an undone admission let go (their rc set back to 0 by the caller, `filed` left as it
        was), whose bookkeeping is what it was when they were last filed (lru, length: the priority reads
        `last` and `depth` only, which change only when a block is filed or registered anew): a block whose
        row is still in its batch (`filed` not 0) is live there again, the others are filed under ticket,
        as add_many. Whatever takes a block's current row out of its batch sets its `filed` to 0."""
        filed = self.filed
        lost: list[int] = []
        for b in rows:
            if not filed[b]:
                filed[b] = ticket
                lost.append(b)
        self.count += len(rows) - len(lost)
        if lost:
            self.add_many(lost, ticket)

    def discard(self, b: int) -> None:
        """Evictable block b was hit: the caller sets its rc above 0 (its row is stale from then on)."""
        self.count -= 1

    def pop_many(self, k: int) -> list[int]:
        """Remove and return the k blocks with the smallest priorities, smallest first (IndexError if fewer
        are live). Their rc stays 0: the caller forgets them."""
        if k > self.count:
            raise IndexError("no evictable entry")
        heap = self._heap
        rc = self.rc
        filed = self.filed
        out: list[int] = _reserve(k) if _COMPILED else []  # noqa: F821 (block_queue.pxd: room for k)
        need = k
        while need:
            _, ticket, rows, top = heap[0]
            t = ticket  # (compiled: a C integer, as each row's filed ticket read)
            if _COMPILED:  # (block_queue.pxd: the same, heads compared as C integers)
                bound = _bound(heap, top)  # noqa: F821
                first = _le(top, bound)  # noqa: F821
            else:
                n = len(heap)
                if n == 1:
                    bound = top
                elif n == 2 or heap[1][0] <= heap[2][0]:
                    bound = heap[1][0]
                else:
                    bound = heap[2][0]
                first = top <= bound
            was = len(rows)
            if first:  # every live row of the root batch sorts before every other batch's
                if _COMPILED:  # (block_queue.pxd: the loop below in C)
                    need = _take(rows, filed, rc, t, need, out, 0)  # noqa: F821
                    self._rows -= was - len(rows)
                    if not rows:
                        _pop(heap)  # noqa: F821
                    continue
                while rows and need:
                    b = rows.pop()
                    i = b  # (compiled: a C index, b stays the Python int that is stored)
                    if filed[i] == t:  # b's row (live, or its block held): gone now
                        filed[i] = 0
                        if rc[i] == 0:
                            out.append(b)
                            need -= 1
                self._rows -= was - len(rows)
                if not rows:
                    heapq.heappop(heap)
                continue
            head = 0
            late = False
            while rows and need:
                b = rows[-1]
                i = b
                f = filed[i]
                if f != t or rc[i]:
                    if _COMPILED:  # (block_queue.pxd: rows.pop() without the checks)
                        _drop_last(rows)  # noqa: F821
                    else:
                        rows.pop()
                    if f == t:  # (a held block's row)
                        filed[i] = 0
                    continue
                head = self.prio(b)
                late = not _le(head, bound) if _COMPILED else head > bound  # noqa: F821
                if late:
                    break
                if _COMPILED:
                    _drop_last(rows)  # noqa: F821
                else:
                    rows.pop()
                filed[i] = 0
                out.append(b)
                need -= 1
            self._rows -= was - len(rows)
            if _COMPILED:  # (block_queue.pxd: heapq's pop and replace in C)
                if not rows:
                    _pop(heap)  # noqa: F821
                elif late:
                    _replace(heap, (head, ticket, rows, top))  # noqa: F821
            elif not rows:
                heapq.heappop(heap)
            elif late:  # its live head sorts after another batch's key: sift it down
                heapq.heapreplace(heap, (head, ticket, rows, top))
        self.count -= k
        return out

    def items(self) -> list[int]:
        """The live blocks (for invariant checks), in no particular order."""
        rc = self.rc
        filed = self.filed
        return [b for _, ticket, rows, _ in self._heap for b in rows if rc[b] == 0 and filed[b] == ticket]

    @property
    def live(self) -> dict[int, int]:
        """Live block -> its batch's ticket (for tests and checks: O(rows))."""
        filed = self.filed
        return {b: filed[b] for b in self.items()}
