"""Physical KV block pool: refcounts and an O(1) free list."""

from __future__ import annotations


class NoFreeBlocks(RuntimeError):
    """Raised when a block is requested from an empty pool (the caller should have checked)."""


class BlockPool:
    """`num_blocks` physical blocks of `block_size` token slots.

    Free block ids live on a stack (list), so allocate and free are O(1); freeing pushes the id back, so the
    most recently freed block is reused first. `refcount[b]` counts block tables holding block b.
    """

    __slots__ = ("num_blocks", "block_size", "refcount", "_free")

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 0 or block_size < 1:
            raise ValueError("num_blocks must be >= 0 and block_size >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.refcount = [0] * num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self._free)

    def evict(self, k: int) -> None:
        """Make at least k more blocks free. The plain pool keeps no cache, so it has none to give;
        caching pools evict cached, unreferenced blocks here."""
        raise NoFreeBlocks("block pool exhausted")

    def allocate(self) -> int:
        """Take a free block (evicting a cached one if the free list is empty); its refcount becomes 1."""
        if not self._free:
            self.evict(1)
        bid = self._free.pop()
        self.refcount[bid] = 1
        return bid

    def allocate_many(self, k: int) -> list[int]:
        """Take k free blocks (the same ids, in the same order, as k calls of allocate)."""
        if k <= 0:
            return []
        short = k - len(self._free)
        if short > 0:
            self.evict(short)
        free = self._free
        ids = free[: -k - 1 : -1]
        del free[-k:]
        rc = self.refcount
        for b in ids:
            rc[b] = 1
        return ids

    def drop_refs(self, ids: list[int]) -> tuple[list[int], list[int]]:
        """Drop one reference from each block in ids; return (blocks still referenced, blocks now at
        refcount 0), each in order. Raises on a double free."""
        rc = self.refcount
        kept = []
        zeroed = []
        for b in ids:
            r = rc[b] - 1
            if r > 0:
                rc[b] = r
                kept.append(b)
            elif r == 0:
                rc[b] = 0
                zeroed.append(b)
            else:
                raise ValueError(f"double free of block {b}")
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
        return list(self._free)
