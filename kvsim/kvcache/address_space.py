"""A contiguous range of KV token slots with first-fit or best-fit placement of variable-size regions."""

from __future__ import annotations

from bisect import bisect_left, insort

PLACEMENTS: tuple[str, ...] = ("first_fit", "best_fit")


class AddressSpace:
    """`capacity` token slots, [0, capacity), carved into regions and holes (maximal free runs).

    `place(size)` puts a region at the start of a hole: first_fit takes the lowest-addressed hole that is
    large enough, best_fit the smallest such hole (the lowest-addressed among equals). `release` returns a
    region and merges it with the holes on either side, so two holes are never adjacent.

    Placement scans the holes (at most one more than the live regions); it runs only when a request is
    admitted. Queries that run every iteration (`max_hole`, `free_in_holes_below`) are cached until the
    hole set next changes.
    """

    __slots__ = ("capacity", "placement", "free_slots", "_starts", "_size", "_end", "_version",
                 "_max_cache", "_below_cache")

    def __init__(self, capacity: int, placement: str = "first_fit") -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
        self.capacity = capacity
        self.placement = placement
        self.free_slots = capacity
        self._starts: list[int] = []      # hole starts, ascending
        self._size: dict[int, int] = {}   # hole start -> size
        self._end: dict[int, int] = {}    # hole end (exclusive) -> start
        self._version = 0
        self._max_cache = (-1, 0)
        self._below_cache = (-1, 0, 0)
        if capacity:
            self._add_hole(0, capacity)

    # ----------------------------------------------------------------- holes
    def _add_hole(self, start: int, size: int) -> None:
        insort(self._starts, start)
        self._size[start] = size
        self._end[start + size] = start

    def _drop_hole(self, start: int) -> int:
        size = self._size.pop(start)
        del self._end[start + size]
        del self._starts[bisect_left(self._starts, start)]
        return size

    def holes(self) -> list[tuple[int, int]]:
        """(start, size) of every hole, by address."""
        return [(s, self._size[s]) for s in self._starts]

    # ----------------------------------------------------------------- placement
    def find(self, size: int) -> int:
        """Start of the hole `place(size)` would use, or -1 when no hole is large enough."""
        if size <= 0:
            raise ValueError("region size must be >= 1")
        sizes = self._size
        if self.placement == "first_fit":
            for s in self._starts:
                if sizes[s] >= size:
                    return s
            return -1
        best, best_size = -1, self.capacity + 1
        for s in self._starts:
            h = sizes[s]
            if size <= h < best_size:
                best, best_size = s, h
                if h == size:
                    break
        return best

    def place(self, size: int) -> int:
        """Reserve `size` slots at the start of the chosen hole; return the region's start, or -1 (nothing
        changes) when no hole is large enough."""
        start = self.find(size)
        if start < 0:
            return -1
        hole = self._drop_hole(start)
        if hole > size:
            self._add_hole(start + size, hole - size)
        self.free_slots -= size
        self._version += 1
        return start

    def release(self, start: int, size: int) -> None:
        """Return the region [start, start + size) to the free space, merging it with adjacent holes."""
        end = start + size
        if start < 0 or size <= 0 or end > self.capacity:
            raise ValueError(f"region [{start}, {end}) outside [0, {self.capacity})")
        prev = self._end.get(start)
        if prev is not None:
            self._drop_hole(prev)
            start = prev
        if end in self._size:
            end += self._drop_hole(end)
        self._add_hole(start, end - start)
        self.free_slots += size
        self._version += 1

    def fits_all(self, size: int, count: int) -> bool:
        """Whether `count` regions of `size` slots could all be placed now (simulated on the hole sizes,
        with this space's placement rule)."""
        if count == 1:
            return self.max_hole() >= size
        if size * count > self.free_slots:
            return False
        holes = [self._size[s] for s in self._starts]
        for _ in range(count):
            fitting = [i for i, h in enumerate(holes) if h >= size]
            if not fitting:
                return False
            i = fitting[0] if self.placement == "first_fit" else min(fitting, key=lambda j: (holes[j], j))
            holes[i] -= size
        return True

    # ----------------------------------------------------------------- cached queries
    def max_hole(self) -> int:
        """Size of the largest hole (0 when full)."""
        version, value = self._max_cache
        if version != self._version:
            value = max(self._size.values(), default=0)
            self._max_cache = (self._version, value)
        return value

    def free_in_holes_below(self, size: int) -> int:
        """Free slots in holes smaller than `size` (slots no region of that size can use)."""
        version, cached_size, value = self._below_cache
        if version != self._version or cached_size != size:
            value = sum(h for h in self._size.values() if h < size)
            self._below_cache = (self._version, size, value)
        return value

    def check(self, regions: list[tuple[int, int]]) -> None:
        """Raise AssertionError unless `regions` and the holes tile [0, capacity) without overlap and no two
        holes touch."""
        spans = sorted([(s, n, "region") for s, n in regions] + [(s, n, "hole") for s, n in self.holes()])
        pos = 0
        last_kind = ""
        for s, n, kind in spans:
            assert s == pos and n > 0, f"{kind} at {s} (size {n}) leaves a gap or overlaps at {pos}"
            assert not (kind == last_kind == "hole"), f"adjacent holes at {s}"
            pos, last_kind = s + n, kind
        assert pos == self.capacity, f"spans end at {pos}, capacity {self.capacity}"
        assert self.free_slots == sum(n for _, n in self.holes()), "free slot count drifted"
