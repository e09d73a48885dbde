"""A binary buddy allocator over a range of KV token slots (the Orca baselines of the PagedAttention
paper, §6.5, place their contiguous reservations with one).

Regions are powers of two in size, aligned to their size. The range [0, capacity) is first cut into
maximal aligned power-of-two chunks (capacity need not be a power of two); a free list per order holds the
free blocks by address. `place(size)` takes the lowest-addressed free block of the smallest order that
holds 2^ceil(log2 size) slots, splitting larger blocks in halves (the upper half goes back free); `release`
merges a block with its buddy (start xor size) while the buddy is free and inside the same chunk. Callers
round their region sizes up to a power of two (kvsim/kvcache/contiguous.py does, for `kv.placement:
buddy`), so the rounding shows as slots a region never fills (internal fragmentation).

Same interface as AddressSpace (kvsim/kvcache/address_space.py): capacity, free_slots, place, release,
fits_all, max_hole, free_in_holes_below, holes, check.
"""

from __future__ import annotations

from bisect import bisect_right, insort


def ceil_pow2(n: int) -> int:
    """The smallest power of two >= n (n >= 1)."""
    return 1 << (n - 1).bit_length()


class BuddySpace:
    """`capacity` token slots managed as binary buddies (module docstring)."""

    __slots__ = ("capacity", "placement", "free_slots", "_free", "_chunks", "_chunk_starts")

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self.capacity = capacity
        self.placement = "buddy"
        self.free_slots = capacity
        self._free: dict[int, list[int]] = {}  # order -> free block starts, ascending
        self._chunks: list[tuple[int, int]] = []  # (start, order) of the top-level chunks
        start, left = 0, capacity
        while left:
            order = left.bit_length() - 1
            self._chunks.append((start, order))
            self._free.setdefault(order, []).append(start)
            start += 1 << order
            left -= 1 << order
        self._chunk_starts = [s for s, _ in self._chunks]

    def _chunk_order(self, start: int) -> int:
        return self._chunks[bisect_right(self._chunk_starts, start) - 1][1]

    def place(self, size: int) -> int:
        """Reserve a block of 2^ceil(log2 size) slots; its start, or -1 (nothing changes) if none is free."""
        if size <= 0:
            raise ValueError("region size must be >= 1")
        k = (size - 1).bit_length()
        free = self._free
        j = min((o for o, starts in free.items() if o >= k and starts), default=-1)
        if j < 0:
            return -1
        start = free[j].pop(0)
        while j > k:  # split: keep the lower half, free the upper
            j -= 1
            insort(free.setdefault(j, []), start + (1 << j))
        self.free_slots -= 1 << k
        return start

    def release(self, start: int, size: int) -> None:
        """Return the block [start, start + size) (size a power of two, as placed), merging buddies."""
        if size <= 0 or size & (size - 1) or start % size or start < 0 or start + size > self.capacity:
            raise ValueError(f"block [{start}, {start + size}) is not a placed buddy block")
        k = size.bit_length() - 1
        self.free_slots += size
        top = self._chunk_order(start)
        free = self._free
        while k < top:
            buddy = start ^ (1 << k)
            starts = free.get(k)
            if not starts:
                break
            i = bisect_right(starts, buddy) - 1
            if i < 0 or starts[i] != buddy:
                break
            del starts[i]
            start = min(start, buddy)
            k += 1
        insort(free.setdefault(k, []), start)

    def fits_all(self, size: int, count: int) -> bool:
        """Whether `count` regions of `size` slots could all be placed now (simulated on the free lists)."""
        k = (size - 1).bit_length()
        counts = {o: len(s) for o, s in self._free.items() if s}
        for _ in range(count):
            j = min((o for o, c in counts.items() if o >= k and c), default=-1)
            if j < 0:
                return False
            counts[j] -= 1
            while j > k:
                j -= 1
                counts[j] = counts.get(j, 0) + 1
        return True

    def max_hole(self) -> int:
        """Size of the largest free block (0 when full)."""
        return max((1 << o for o, s in self._free.items() if s), default=0)

    def free_in_holes_below(self, size: int) -> int:
        """Free slots in blocks too small for a region of `size` slots (rounded up to a power of two)."""
        need = ceil_pow2(size)
        return sum((1 << o) * len(s) for o, s in self._free.items() if (1 << o) < need)

    def holes(self) -> list[tuple[int, int]]:
        """(start, size) of every free block, by address."""
        return sorted((s, 1 << o) for o, starts in self._free.items() for s in starts)

    def check(self, regions: list[tuple[int, int]]) -> None:
        """Raise AssertionError unless regions (power-of-two sized, aligned) and the free blocks tile
        [0, capacity), and no two free buddies of one order are left unmerged."""
        spans = sorted([(s, n, "region") for s, n in regions] + [(s, n, "free") for s, n in self.holes()])
        pos = 0
        for s, n, kind in spans:
            assert s == pos and n > 0, f"{kind} at {s} (size {n}) leaves a gap or overlaps at {pos}"
            assert n & (n - 1) == 0 and s % n == 0, f"{kind} [{s}, {s + n}) is not an aligned buddy block"
            pos = s + n
        assert pos == self.capacity, f"spans end at {pos}, capacity {self.capacity}"
        assert self.free_slots == sum(n for _, n in self.holes()), "free slot count drifted"
        for o, starts in self._free.items():
            held = set(starts)
            for s in starts:
                if o < self._chunk_order(s):
                    assert (s ^ (1 << o)) not in held, f"free buddies at {s} (order {o}) not merged"
