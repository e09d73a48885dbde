"""Eviction of cached, unreferenced prefix-cache entries: a registry of priority keys and a lazy heap.

A policy is a *key function*, not a branch: it maps an entry's bookkeeping to a priority (a tuple packed
into one int, so heap comparisons stay cheap), and the entry with the smallest priority is evicted first.
The bookkeeping, kept by the cache for every entry (a block for the hash cache, a leaf node for the radix
cache):

- last: logical time of the last use (the entry was last released by a sequence, or last matched),
- uses: sequences that used it (1 when it was cached, + 1 per cache hit),
- birth: logical time it entered the cache,
- depth: its position in the prompt, in blocks from the start (a radix node: its first block).

Ties between entries of equal `last` go to the deeper entry first (vLLM frees a sequence's blocks tail
first, so its later blocks are evicted before its earlier ones).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from itertools import repeat

from kvsim.errors import KvsimError

PriorityKey = Callable[[int, int, int, int], int]

DEPTH_BITS = 24
"""Depths stay below 2^24 blocks and logical times (last, birth) below 2^40."""
_DMAX = (1 << DEPTH_BITS) - 1


def lru_key(last: int, uses: int, birth: int, depth: int) -> int:
    """Least recently used first: (last, -depth)."""
    return (last << DEPTH_BITS) | (_DMAX - depth)


def lfu_key(last: int, uses: int, birth: int, depth: int) -> int:
    """Least frequently used first; equal counts by LRU: (uses, last, -depth)."""
    return (uses << (40 + DEPTH_BITS)) | (last << DEPTH_BITS) | (_DMAX - depth)


def fifo_key(last: int, uses: int, birth: int, depth: int) -> int:
    """Oldest cached first, however recently used: (birth, -depth)."""
    return (birth << DEPTH_BITS) | (_DMAX - depth)


def length_key(last: int, uses: int, birth: int, depth: int) -> int:
    """Length-aware: blocks late in prompts go first, so shared prompt starts stay: (-depth, last)."""
    return ((_DMAX - depth) << 40) | last


EVICTION_POLICIES: dict[str, PriorityKey] = {
    "lru": lru_key,
    "lfu": lfu_key,
    "fifo": fifo_key,
    "length": length_key,
}


Rows = Callable[[list[int], list[int], list[int], list[int], list[int]], list[tuple[int, int, int]]]


def _fifo_rows(items, last, uses, birth, depth):
    return [((birth[b] << DEPTH_BITS) | (_DMAX - depth[b]), b, b) for b in items]


BATCH_ROWS: dict[PriorityKey, Rows] = {
    fifo_key: _fifo_rows,
}
"""Per built-in key function, the (priority, entry, entry) rows of int entries whose bookkeeping is in
lists indexed by entry, the key inlined (add_many files a sequence's blocks at once): fifo's only, the one
policy whose hash cache files its blocks here (the others' go to block_queue.BlockQueue); any other key
function is called per entry, with the same rows."""


def get_policy(name: str) -> PriorityKey:
    try:
        return EVICTION_POLICIES[name]
    except KeyError:
        raise KvsimError(f"kv.eviction: unknown policy '{name}' (known: {', '.join(EVICTION_POLICIES)})") \
            from None


class EvictionQueue:
    """The evictable entries, smallest priority first: a heap of batches with lazy invalidation.

    `add_many` files the entries released together as one batch, sorted by priority (computed now from
    the bookkeeping passed in), under one ticket; the heap orders batches by their smallest live-or-stale
    priority. `pop_many` drains the front batch while its next entry is no later than the next batch's
    head, so entries released together (a sequence's blocks) cost no heap operation each. `discard`
    forgets an entry's ticket in O(1); stale rows are skipped when reached. Rows are compacted when stale
    ones outnumber live ones, so memory stays proportional to the live entries. O(log n) amortised per
    entry at worst.
    """

    __slots__ = ("key", "_rows_of", "_heap", "live", "_ticket", "_rows")

    def __init__(self, policy: str = "lru") -> None:
        self.key = get_policy(policy)
        self._rows_of = BATCH_ROWS.get(self.key)
        self._heap: list[tuple[int, int, list]] = []
        self.live: dict[Hashable, int] = {}
        """entry -> ticket of its live row (read-only outside this class)."""
        self._ticket = 0
        self._rows = 0

    def __len__(self) -> int:
        return len(self.live)

    def __contains__(self, item: Hashable) -> bool:
        return item in self.live

    def add(self, item: Hashable, last: int, uses: int, birth: int, depth: int) -> None:
        """File one entry (any hashable; a batch of its own)."""
        self._ticket += 1
        self.live[item] = self._ticket
        self._push([(self.key(last, uses, birth, depth), 0, item)])

    def add_many(self, items: list[int], last: list[int], uses: list[int], birth: list[int],
                 depth: list[int]) -> None:
        """File int entries released together, their bookkeeping in lists indexed by entry."""
        self._ticket += 1
        self.live.update(zip(items, repeat(self._ticket)))
        rows_of = self._rows_of
        if rows_of is not None:
            rows = rows_of(items, last, uses, birth, depth)
        else:
            key = self.key
            rows = [(key(last[b], uses[b], birth[b], depth[b]), b, b) for b in items]
        rows.sort(reverse=True)  # smallest at the end: pops are O(1)
        self._push(rows)

    def _push(self, rows: list) -> None:
        heapq.heappush(self._heap, (rows[-1][0], self._ticket, rows))
        self._rows += len(rows)
        if self._rows > 2 * len(self.live) + 64:
            self._compact()

    def _compact(self) -> None:
        live = self.live
        heap = []
        self._rows = 0
        for _, ticket, rows in self._heap:
            rows = [r for r in rows if live.get(r[2]) == ticket]
            if rows:
                heap.append((rows[-1][0], ticket, rows))
                self._rows += len(rows)
        heapq.heapify(heap)
        self._heap = heap

    def discard(self, item: Hashable) -> None:
        self.live.pop(item, None)

    def pop_many(self, k: int) -> list[Hashable]:
        """Remove and return the k entries with the smallest priorities, smallest first (IndexError if
        fewer are live)."""
        heap = self._heap
        live = self.live
        out: list[Hashable] = []
        need = k
        while need:
            if not heap:
                raise IndexError("no evictable entry")
            _, ticket, rows = heap[0]
            n = len(heap)  # the next batch's head is the smaller of the root's children
            bound = (heap[1][0] if n == 2 or heap[1][0] <= heap[2][0] else heap[2][0]) if n > 1 else None
            taken = len(rows)
            if bound is None or rows[0][0] <= bound:  # the whole batch sorts first: no bound to check
                while rows and need:
                    item = rows.pop()[2]
                    if live.get(item) == ticket:
                        del live[item]
                        out.append(item)
                        need -= 1
            else:
                while rows and need:
                    prio, _, item = rows[-1]
                    if prio > bound:
                        break
                    rows.pop()
                    if live.get(item) == ticket:
                        del live[item]
                        out.append(item)
                        need -= 1
            self._rows -= taken - len(rows)
            self._reseat(heap, ticket, rows)
        return out

    def pop_one(self) -> Hashable:
        """pop_many(1), faster: stale rows at the end of the root batch are dropped without re-sifting;
        a live row there is the global minimum once it sorts no later than the root's children."""
        heap = self._heap
        live = self.live
        while heap:
            _, ticket, rows = heap[0]
            while rows and live.get(rows[-1][2]) != ticket:
                rows.pop()
                self._rows -= 1
            if not rows:
                heapq.heappop(heap)
                continue
            head = rows[-1][0]
            n = len(heap)
            if (n > 1 and head > heap[1][0]) or (n > 2 and head > heap[2][0]):
                heapq.heapreplace(heap, (head, ticket, rows))
                continue
            item = rows.pop()[2]
            self._rows -= 1
            del live[item]
            self._reseat(heap, ticket, rows)
            return item
        raise IndexError("no evictable entry")

    @staticmethod
    def _reseat(heap: list, ticket: int, rows: list) -> None:
        """The root batch lost rows: drop it if empty, else give it its new head key (in place when it
        still sorts first, which is the usual case for entries released together)."""
        if not rows:
            heapq.heappop(heap)
            return
        head = rows[-1][0]
        n = len(heap)
        if (n < 2 or head <= heap[1][0]) and (n < 3 or head <= heap[2][0]):
            heap[0] = (head, ticket, rows)
        else:
            heapq.heapreplace(heap, (head, ticket, rows))

    def pop(self) -> Hashable:
        """Remove and return the entry with the smallest priority. IndexError when empty."""
        return self.pop_one()

    def items(self) -> list[Hashable]:
        """The live entries (for invariant checks), in no particular order."""
        return list(self.live)
