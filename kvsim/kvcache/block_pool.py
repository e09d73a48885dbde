"""Physical KV block pool: refcounts and an O(1) free list, state only for blocks handed out."""

from __future__ import annotations

from operator import length_hint

CHUNK = 4096
"""Never-used block ids put on the free stack at a time (and per-block state made for them)."""


class NoFreeBlocks(RuntimeError):
    """Raised when a block is requested from an empty pool (the caller should have checked)."""


class BlockPool:
    """`num_blocks` physical blocks of `block_size` token slots.

    Free block ids live on a stack (list), so allocate and free are O(1); freeing pushes the id back, so the
    most recently freed block is reused first, and never-used blocks come out in ascending order, 0 first.
    `refcount[b]` counts block tables holding block b.

    Memory follows the blocks handed out, not num_blocks: only blocks 0 .. known - 1 have state (a
    refcount, a place on the stack, a subclass's per-block fields); the ids from `known` on are free and
    implicit, below the bottom of the stack, and come onto it CHUNK at a time as the stack runs empty.
    The stack is never empty while a free block exists, so `if not pool._free` still means "no truly free
    block", and the ids come out in exactly the order a stack holding all of them would give.
    """

    __slots__ = ("num_blocks", "block_size", "refcount", "_free", "known")

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 0 or block_size < 1:
            raise ValueError("num_blocks must be >= 0 and block_size >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.refcount: list[int] = []
        self._free: list[int] = []
        self.known = 0
        """Blocks with state: ids below it (len(refcount)); the rest were never handed out."""
        self._more(CHUNK)

    def _more(self, k: int) -> None:
        """Give the next min(k, never-known) ids state and put them at the bottom of the stack (below every
        id there: they come out after all of them, ascending)."""
        lo = self.known
        hi = min(self.num_blocks, lo + k)
        if hi > lo:
            self._free[:0] = range(hi - 1, lo - 1, -1)
            self._extend(hi - lo)
            self.known = hi

    def _extend(self, k: int) -> None:
        """Per-block state for k more blocks (subclasses add theirs)."""
        self.refcount += [0] * k

    @property
    def num_free(self) -> int:
        return len(self._free) + self.num_blocks - self.known

    @property
    def num_used(self) -> int:
        return self.known - len(self._free)

    def evict(self, k: int) -> None:
        """Make at least k more blocks free. The plain pool keeps no cache, so it has none to give;
        caching pools evict cached, unreferenced blocks here."""
        raise NoFreeBlocks("block pool exhausted")

    def allocate(self) -> int:
        """Take a free block (evicting a cached one if there is none); its refcount becomes 1."""
        free = self._free
        if not free:
            self.evict(1)
        bid = free.pop()
        if not free and self.known < self.num_blocks:
            self._more(CHUNK)
        self.refcount[bid] = 1
        return bid

    def allocate_many(self, k: int) -> list[int]:
        """Take k free blocks (the same ids, in the same order, as k calls of allocate)."""
        if k <= 0:
            return []
        free = self._free
        short = k - len(free)
        if short > 0:
            if self.known < self.num_blocks:
                self._more(short)
                short = k - len(free)
            if short > 0:
                self.evict(short)
        ids = free[: -k - 1 : -1]
        del free[-k:]
        if not free and self.known < self.num_blocks:
            self._more(CHUNK)
        rc = self.refcount
        for b in ids:
            rc[b] = 1
        return ids

    def drop_refs(self, ids: list[int]) -> tuple[list[int], list[int]]:
        """Drop one reference from each block in ids; return (blocks still referenced, blocks now at
        refcount 0), each in order. Raises on a double free."""
        rc = self.refcount
        n = len(ids)
        kept: list[int] = []
        zeroed: list[int] = []
        start = 0  # ids[start:] up to the block under the loop were held once: they reached 0
        it = iter(ids)
        for b in it:
            if rc[b] == 1:  # the usual case: no append per block, each run is sliced off at its end
                rc[b] = 0
                continue
            i = n - length_hint(it) - 1  # b's index
            if i > start:
                zeroed += ids[start:i]
            if rc[b] < 2:
                raise ValueError(f"double free of block {b}")
            rc[b] -= 1
            kept.append(b)
            for b in it:  # the run of blocks held elsewhere too that b starts
                r = rc[b] - 1
                if r > 0:
                    rc[b] = r
                    kept.append(b)
                elif r == 0:
                    rc[b] = 0
                    start = n - length_hint(it) - 1
                    break
                else:
                    raise ValueError(f"double free of block {b}")
            else:
                return kept, zeroed
        if start < n:
            zeroed += ids[start:]
        return kept, zeroed

    def release(self, ids: list[int]) -> list[int]:
        """Drop one reference from each block in ids (as decref would); blocks reaching zero go back to
        the free list. Return the blocks that stayed referenced, in order."""
        kept, zeroed = self.drop_refs(ids)
        self._free.extend(zeroed)
        return kept

    def incref(self, bid: int) -> None:
        if self.refcount[bid] <= 0:
            raise ValueError(f"incref of free block {bid}")
        self.refcount[bid] += 1

    def decref(self, bid: int) -> bool:
        """Drop one reference; return True when the block reached refcount 0."""
        return not self.release([bid])

    def free_ids(self) -> list[int]:
        """Every free block id, bottom of the stack first (the next allocate takes the last). O(free
        blocks): for tests of small pools; invariant checks use known_free_ids."""
        return [*range(self.num_blocks - 1, self.known - 1, -1), *self._free]

    def known_free_ids(self) -> list[int]:
        """The free blocks among those with state (ids below `known`): the stack, bottom first."""
        return list(self._free)

