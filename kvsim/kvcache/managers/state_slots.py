"""Fixed per-sequence state of a state cache group (Mamba / linear-attention layers, or a compressed
group's state cache): `pages` pages per sequence, taken at its first allocation, whatever its length.

A fork gives the child a copy of the parent's state (a recurrent state is updated in place, so sharing
it would be wrong): new pages, counted in `cow_copies`. Swapping moves the pages to host memory and back.
Prefix caching of states is not modelled (a state is not kept at block-aligned checkpoints), so a model
with state layers gets no prefix-cache hits (kvsim/kvcache/coordinator.py).
"""

from __future__ import annotations

from kvsim.kvcache.block_pool import BlockPool


class StateSlots:
    """One state slot of `pages` pages per sequence."""

    __slots__ = ("pool", "pages", "slots", "cow_copies", "swapped")

    def __init__(self, pool: BlockPool, pages: int) -> None:
        self.pool = pool
        self.pages = pages
        self.slots: dict[int, list[int]] = {}
        self.cow_copies = 0
        self.swapped: set[int] = set()

    @classmethod
    def for_group(cls, pool: BlockPool, block_size: int, group, cache_index: int | None) -> StateSlots:
        """The state slots of cache group `group` (its state_pages per sequence)."""
        return cls(pool, group.state_pages)

    def blocks_needed(self, seq: int, num_tokens: int) -> int:
        return 0 if seq in self.slots else self.pages

    def group_blocks_needed(self, seqs: list[int], num_tokens: int) -> int:
        return sum(self.pages for s in seqs if s not in self.slots)

    def allocate(self, seq: int, num_tokens: int) -> None:
        if seq not in self.slots:
            self.slots[seq] = self.pool.allocate_many(self.pages)

    def held(self, seq: int) -> int:
        return self.pages

    def private_pages(self, seq: int) -> int:
        """A state is never shared (a fork copies it): all its pages."""
        return self.pages

    def fork(self, parent: int, child: int) -> None:
        self.slots[child] = self.pool.allocate_many(self.pages)
        self.cow_copies += self.pages

    def free(self, seq: int) -> int:
        """Release seq's state pages (never shared: a fork copies); return how many."""
        self.pool.release(self.slots.pop(seq))
        return self.pages

    def swap_out(self, seqs: list[int]) -> int:
        for s in seqs:
            self.free(s)
            self.swapped.add(s)
        return self.pages * len(seqs)

    def swap_pages_needed(self, seqs: list[int]) -> int:
        return self.pages * len(seqs)

    def swap_in(self, seqs: list[int]) -> int:
        for s in seqs:
            self.swapped.discard(s)
            self.slots[s] = self.pool.allocate_many(self.pages)
        return self.pages * len(seqs)

    def host_pages(self) -> int:
        return self.pages * len(self.swapped)

    def check(self, counts: list[int]) -> None:
        for s, pages in self.slots.items():
            assert len(pages) == self.pages, f"state slot of seq {s} has {len(pages)} pages"
            for b in pages:
                counts[b] += 1
