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

from kvsim.errors import KvsimError

PriorityKey = Callable[[int, int, int, int], int]

DEPTH_BITS = 24
"""Depths are clipped to 2^24 - 1 blocks; logical times (last, birth) stay below 2^40."""
_DMAX = (1 << DEPTH_BITS) - 1


def _deep_first(depth: int) -> int:
    """Smaller for deeper entries, so that they go first among equals."""
    return _DMAX - depth if depth < _DMAX else 0


def lru_key(last: int, uses: int, birth: int, depth: int) -> int:
    """Least recently used first: (last, -depth)."""
    return (last << DEPTH_BITS) | _deep_first(depth)


def lfu_key(last: int, uses: int, birth: int, depth: int) -> int:
    """Least frequently used first; equal counts by LRU: (uses, last, -depth)."""
    return (uses << (40 + DEPTH_BITS)) | (last << DEPTH_BITS) | _deep_first(depth)


def fifo_key(last: int, uses: int, birth: int, depth: int) -> int:
    """Oldest cached first, however recently used: (birth, -depth)."""
    return (birth << DEPTH_BITS) | _deep_first(depth)


def length_key(last: int, uses: int, birth: int, depth: int) -> int:
    """Length-aware: blocks late in prompts go first, so shared prompt starts stay: (-depth, last)."""
    return (_deep_first(depth) << 40) | last


EVICTION_POLICIES: dict[str, PriorityKey] = {
    "lru": lru_key,
    "lfu": lfu_key,
    "fifo": fifo_key,
    "length": length_key,
}


def get_policy(name: str) -> PriorityKey:
    try:
        return EVICTION_POLICIES[name]
    except KeyError:
        raise KvsimError(f"kv.eviction: unknown policy '{name}' (known: {', '.join(EVICTION_POLICIES)})") \
            from None


class EvictionQueue:
    """The evictable entries, smallest priority first: a heap with lazy invalidation.

    `add` pushes a row (priority computed now from the bookkeeping passed in, ticket, entry); `discard`
    drops an entry in O(1) by forgetting its live ticket, and rows whose ticket is no longer their
    entry's live one are skipped when popped. The heap is rebuilt
    from its live rows when stale rows outnumber live ones, so memory stays proportional to the live
    entries. add and pop are O(log n) amortised.
    """

    __slots__ = ("key", "_heap", "_live", "_ticket")

    def __init__(self, policy: str = "lru") -> None:
        self.key = get_policy(policy)
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, int] = {}
        self._ticket = 0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, item: Hashable) -> bool:
        return item in self._live

    def add(self, item: Hashable, last: int, uses: int, birth: int, depth: int) -> None:
        self._ticket += 1
        ticket = self._ticket
        self._live[item] = ticket
        heap = self._heap
        heapq.heappush(heap, (self.key(last, uses, birth, depth), ticket, item))
        if len(heap) > 2 * len(self._live) + 64:
            self._compact()

    def add_many(self, items: list[int], last: list[int], uses: list[int], birth: list[int],
                 depth: list[int]) -> None:
        """add() for several int items whose bookkeeping sits in lists indexed by item."""
        key = self.key
        live = self._live
        heap = self._heap
        push = heapq.heappush
        ticket = self._ticket
        for b in items:
            ticket += 1
            live[b] = ticket
            push(heap, (key(last[b], uses[b], birth[b], depth[b]), ticket, b))
        self._ticket = ticket
        if len(heap) > 2 * len(live) + 64:
            self._compact()

    def pop_many(self, k: int) -> list[Hashable]:
        """Remove and return the k entries with the smallest priorities, smallest first."""
        heap = self._heap
        live = self._live
        pop = heapq.heappop
        out: list[Hashable] = []
        while len(out) < k:
            _, ticket, item = pop(heap)
            if live.get(item) == ticket:
                del live[item]
                out.append(item)
        return out

    def _compact(self) -> None:
        live = self._live
        self._heap = [row for row in self._heap if live.get(row[2]) == row[1]]
        heapq.heapify(self._heap)

    def discard(self, item: Hashable) -> None:
        self._live.pop(item, None)

    def pop(self) -> Hashable:
        """Remove and return the entry with the smallest priority. IndexError when empty."""
        heap = self._heap
        live = self._live
        pop = heapq.heappop
        while heap:
            _, ticket, item = pop(heap)
            if live.get(item) == ticket:
                del live[item]
                return item
        raise IndexError("no evictable entry")

    def items(self) -> list[Hashable]:
        """The live entries (for invariant checks), in no particular order."""
        return list(self._live)
