"""An exclusive chain of lru / fifo tiers held as one line of keys (TierChain's fast state).

In an exclusive chain whose tiers are all lru or fifo and none shared, nothing ever refreshes a key (a hit
leaves the chain, a key offered while held is skipped), so every tier is a FIFO and each tier's victim is
the newest key of the tier below it: the chain is one sequence of keys in store order, oldest first, cut
into consecutive ranges, the last tier's the oldest and the first tier's the newest. A store appends a key
and moves the cuts; a hit leaves a hole (None) where its key was. So one dict, key -> position in the
line, answers "which tier holds this key" with one lookup, and a key moving down a tier costs no dict
operation at all: a store is one lookup-and-insert (`dict.setdefault`), plus one delete when the last tier
is full and its oldest key leaves the chain. The stores, victims and counters are those of the per-tier
policies (tests/kvcache/test_tiers_stack.py runs both side by side).

Positions are absolute (line[0] is position `base`); `starts[i]` is the first position of tier i's range,
tier i holding the live keys in [starts[i], starts[i-1]) (tier 0 up to the end). Everything below
starts[-1] has left the chain; it is cut off the line once it is half of it, and the holes are squeezed out
(keys renumbered) once they outnumber the keys held, so memory stays O(keys held). When compiled,
tiers_stack.pxd makes this an extension type with C-integer counts, cuts and positions (keys stay Python
objects: block keys are unbounded ints).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable

_CAP = 1 << 62
"""Capacities above this are stored as it: a tier never holds that many keys, so no result changes."""


class StackedTiers:
    """The keys of an exclusive chain of n lru / fifo tiers, none shared (see the module docstring), and
    their per-tier counters (`stores`, `loads`, `evictions`, `peaks`, `counts`: arrays indexed by tier;
    TierChain copies them to its Tier objects after each call)."""

    __slots__ = ("n", "pos", "line", "base", "end", "starts", "caps", "counts", "stores", "loads",
                 "evictions", "peaks", "dropped", "slack")

    def __init__(self, capacities: list[int], slack: int = 1024) -> None:
        n = len(capacities)
        self.n = n
        self.pos: dict[Hashable, int] = {}
        self.line: list = []
        self.base = 0
        self.end = 0  # position of the next key stored (base + len(line))
        self.starts = array("q", bytes(8 * n))
        self.caps = array("q", [min(c, _CAP) for c in capacities])
        self.counts = array("q", bytes(8 * n))
        self.stores = array("q", bytes(8 * n))
        self.loads = array("q", bytes(8 * n))
        self.evictions = array("q", bytes(8 * n))
        self.peaks = array("q", bytes(8 * n))
        self.dropped = 0
        self.slack = slack
        """Positions beyond the keys held the line may keep (its trim and squeeze thresholds)."""

    def __reduce__(self):
        """Copies and pickles (an extension type when compiled): the same fields, the arrays copied."""
        arrays = [array("q", self.starts), array("q", self.caps), array("q", self.counts),
                  array("q", self.stores), array("q", self.loads), array("q", self.evictions),
                  array("q", self.peaks)]
        return _restore, (self.n, self.pos, self.line, self.base, self.end, self.dropped, self.slack, arrays)

    def tier_of(self, p: int) -> int:
        """The tier whose range holds position p (a key's, held)."""
        i = 0
        while p < self.starts[i]:
            i += 1
        return i

    def find(self, key: Hashable) -> int:
        """Index of the tier holding key, -1 if none."""
        p = self.pos.get(key)
        if p is None:
            return -1
        return self.tier_of(p)

    def match(self, keys: list, start: int, end: int) -> list[int]:
        """Tier index of each of keys[start:end] while the chain holds them. A prompt's blocks are evicted
        from the GPU tail first, so its keys lie in the line one below the other: a key found in the line
        just below the key before it (a held key's one position) needs no dict lookup."""
        out: list[int] = []
        pos = self.pos
        line = self.line
        base = self.base
        low = self.starts[self.n - 1]  # (the live positions: [low, end))
        q = low  # position of the key before (low: none below it to look at)
        j = start
        while j < end:
            k = keys[j]
            x = line[q - 1 - base] if q > low else None
            if x is not None and x == k:
                q -= 1
            else:
                p = pos.get(k)
                if p is None:
                    break
                q = p
            i = 0  # (tier_of inline)
            while q < self.starts[i]:
                i += 1
            out.append(i)
            j += 1
        return out

    def offer(self, keys: list) -> int:
        """Store each key not held (in order) into tier 0, victims going down; returns the keys stored.
        (Tier 0 inline, its counters in locals: _enter's loop for i = 0.)"""
        pos = self.pos
        line = self.line
        base = self.base
        nxt = self.end
        cap0 = self.caps[0]
        c0 = self.counts[0]
        s0 = self.starts[0]
        peak0 = self.peaks[0]
        stores0 = evictions0 = 0
        stored = 0
        for k in keys:
            box = nxt  # (one int object: setdefault hands it back only if it stored it)
            if pos.setdefault(k, box) is not box:  # held: skipped
                continue
            line.append(k)
            nxt += 1
            stored += 1
            if cap0 <= 0:  # holds nothing: the key goes on down
                s0 = nxt
                self._enter(1, nxt - 1)
                continue
            stores0 += 1
            if c0 < cap0:
                c0 += 1
                if c0 > peak0:
                    peak0 = c0
                continue
            evictions0 += 1
            if cap0 > peak0:
                peak0 = cap0
            s = s0
            while line[s - base] is None:
                s += 1
            s0 = s + 1
            self._enter(1, s)
        self.end = nxt
        self.counts[0] = c0
        self.starts[0] = s0
        self.peaks[0] = peak0
        self.stores[0] += stores0
        self.evictions[0] += evictions0
        if self.starts[self.n - 1] - base > self.slack + (len(line) >> 1):
            self._trim()
        return stored

    def _enter(self, i: int, j: int) -> None:
        """The key at position j (just below tier i's range top) enters tier i; each tier full pushes its
        oldest key down, and the last one's leaves the chain."""
        n = self.n
        line = self.line
        base = self.base
        while i < n:
            cap = self.caps[i]
            if cap <= 0:  # holds nothing: its range stays empty, the key goes on down
                self.starts[i] = j + 1
                i += 1
                continue
            self.stores[i] += 1
            c = self.counts[i] + 1
            if c <= cap:
                self.counts[i] = c
                if c > self.peaks[i]:
                    self.peaks[i] = c
                return
            self.evictions[i] += 1
            if cap > self.peaks[i]:
                self.peaks[i] = cap
            s = self.starts[i]
            while line[s - base] is None:
                s += 1
            self.starts[i] = s + 1
            j = s
            i += 1
        del self.pos[line[j - base]]
        self.dropped += 1

    def load(self, keys: list, tiers: list[int]) -> None:
        """Take these keys (held in these tiers) out of the chain: hits loaded into the GPU."""
        if len(keys) != len(tiers):
            raise ValueError("load: one tier index per key")
        pos = self.pos
        line = self.line
        base = self.base
        for j in range(len(keys)):
            i = tiers[j]
            p = pos.pop(keys[j])
            if p < self.starts[i] or (i > 0 and p >= self.starts[i - 1]):
                raise ValueError(f"load: key {keys[j]!r} is not in tier {i}")
            line[p - base] = None
            self.counts[i] -= 1
            self.loads[i] += 1
        held = len(pos)
        if self.end - self.starts[self.n - 1] > 2 * held + self.slack:
            self._squeeze()

    def resize(self, i: int, capacity: int) -> None:
        """Set tier i's capacity; its oldest keys over it go down the chain as victims (counted)."""
        cap = min(capacity, _CAP)
        self.caps[i] = cap
        line = self.line
        while self.counts[i] > max(cap, 0):
            self.counts[i] -= 1
            self.evictions[i] += 1
            s = self.starts[i]
            while line[s - self.base] is None:
                s += 1
            self.starts[i] = s + 1
            self._enter(i + 1, s)

    def occupancy(self) -> tuple[int, ...]:
        """Keys each tier holds, in tier order."""
        return tuple([self.counts[i] for i in range(self.n)])

    def sync(self, tiers: list) -> None:
        """Copy the counters to the chain's Tier objects (after each call that changes them)."""
        for i in range(self.n):
            t = tiers[i]
            t.stores = self.stores[i]
            t.loads = self.loads[i]
            t.evictions = self.evictions[i]
            t.peak = self.peaks[i]

    def keys(self, i: int) -> list:
        """The keys tier i holds, oldest first."""
        hi = self.starts[i - 1] if i > 0 else self.end
        return [k for k in self.line[self.starts[i] - self.base: hi - self.base] if k is not None]

    def holds(self, i: int, key: Hashable) -> bool:
        p = self.pos.get(key)
        return p is not None and self.tier_of(p) == i

    def _trim(self) -> None:
        """Cut the positions that left the chain off the line."""
        cut = self.starts[self.n - 1] - self.base
        del self.line[:cut]
        self.base += cut

    def _squeeze(self) -> None:
        """Renumber the keys held without the holes between them (same order, same tiers)."""
        old = self.line
        base = self.base
        starts = self.starts
        pos = self.pos
        line: list = []
        for i in range(self.n - 1, -1, -1):  # (the oldest range first)
            lo = starts[i]
            hi = starts[i - 1] if i else self.end
            starts[i] = len(line)
            for k in old[lo - base: hi - base]:
                if k is not None:
                    pos[k] = len(line)
                    line.append(k)
        self.line = line
        self.base = 0
        self.end = len(line)

    def check(self) -> None:
        """Raise AssertionError unless the line, the cuts, the counts and the dict agree."""
        n = self.n
        starts = self.starts
        for i in range(1, n):
            assert starts[i] <= starts[i - 1], "tier ranges out of order"
        assert self.base <= starts[n - 1] <= self.end == self.base + len(self.line), "line out of range"
        for i in range(n):
            ks = self.keys(i)
            assert len(ks) == self.counts[i] <= max(self.caps[i], 0), f"tier {i} count"
            assert all(self.tier_of(self.pos[k]) == i for k in ks), f"tier {i} positions"
        assert len(self.pos) == sum(self.counts), "keys held"


def _restore(n: int, pos: dict, line: list, base: int, end: int, dropped: int, slack: int,
             arrays: list[array]) -> StackedTiers:
    s = StackedTiers([0] * n, slack)
    s.pos, s.line, s.base, s.end, s.dropped = pos, line, base, end, dropped
    s.starts, s.caps, s.counts, s.stores, s.loads, s.evictions, s.peaks = arrays
    return s


class StackedKeys:
    """Tier i's keys in a StackedTiers, as a Tier reads its policy's `held`: len() and `in`."""

    __slots__ = ("stack", "i")

    def __init__(self, stack: StackedTiers, i: int) -> None:
        self.stack = stack
        self.i = i

    def __len__(self) -> int:
        return self.stack.counts[self.i]

    def __contains__(self, key: Hashable) -> bool:
        return self.stack.holds(self.i, key)

    def __iter__(self):
        return iter(self.stack.keys(self.i))
