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

The position map: as Python, a dict; compiled, an open-addressing table of C integers (`tab`: the key's hash
and its position per slot, linear probing, at most half full), whose slot matches a key when the hash is the
key's and the line holds the key at that position (so it answers as a dict would: the hash, then identity or
==), with no Python object per entry, no dict resize and no int made per position.

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
_C_TABLE = not __file__.endswith(".py")
"""Compiled: the positions in the C table (`tab`); as Python, in the dict `_pos` (faster there)."""
_FIB = 0x9E3779B97F4A7C15
"""2^64 / golden ratio: a hash times it (mod 2^64), its top bits, is the key's first slot (Fibonacci)."""
_MIN_BITS = 6


class StackedTiers:
    """The keys of an exclusive chain of n lru / fifo tiers, none shared (see the module docstring), and
    their per-tier counters (`stores`, `loads`, `evictions`, `peaks`, `counts`: arrays indexed by tier;
    TierChain copies them to its Tier objects after each call)."""

    __slots__ = ("n", "_pos", "line", "base", "end", "starts", "caps", "counts", "stores", "loads",
                 "evictions", "peaks", "dropped", "slack", "held", "tab", "shift", "mask", "_at", "occ")

    def __init__(self, capacities: list[int], slack: int = 1024) -> None:
        n = len(capacities)
        self.n = n
        self._pos: dict[Hashable, int] = {}
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
        self.held = 0  # keys held (in the position map)
        self._at = 0  # compiled: the slot _find stopped at (the key's, or the empty one it would take)
        self._table(_MIN_BITS)
        self.occ = None  # occupancy(), kept until the counts change (None: to build)

    def __reduce__(self):
        """Copies and pickles (an extension type when compiled): the same fields, the arrays copied; the
        position map is rebuilt from the line."""
        arrays = [array("q", self.starts), array("q", self.caps), array("q", self.counts),
                  array("q", self.stores), array("q", self.loads), array("q", self.evictions),
                  array("q", self.peaks)]
        return _restore, (self.n, self.line, self.base, self.end, self.dropped, self.slack, arrays)

    @property
    def pos(self) -> dict:
        """Key -> position of every key held (a new dict)."""
        line = self.line
        base = self.base
        out = {}
        for p in range(self.starts[self.n - 1], self.end):
            k = line[p - base]
            if k is not None:
                out[k] = p
        return out

    # The position map: a dict as Python, the C table compiled (_C_TABLE).

    def _table(self, bits: int) -> None:
        """An empty table of 2^bits slots (compiled; as Python a token one)."""
        self.shift = 64 - bits
        self.mask = (1 << bits) - 1
        self.tab = array("q", [-1]) * (2 << bits if _C_TABLE else 2)

    def _slot(self, h: int) -> int:
        """The first slot of hash h (compiled only: C unsigned arithmetic)."""
        u = h
        u = u * _FIB
        return u >> self.shift

    def _find(self, k: Hashable, h: int) -> int:
        """Compiled: k's position, -1 if not held; `_at` = its slot, or the empty slot that ends its run."""
        mask = self.mask
        i = self._slot(h)
        while True:
            p = self.tab[2 * i + 1]
            if p < 0:
                self._at = i
                return -1
            if self.tab[2 * i] == h:
                x = self.line[p - self.base]
                if x is k or x == k:
                    self._at = i
                    return p
            i = (i + 1) & mask

    def _insert(self, h: int, p: int) -> None:
        """Compiled: fill the empty slot `_at` (from _find) with (h, p); grow past half full."""
        i = self._at
        self.tab[2 * i] = h
        self.tab[2 * i + 1] = p
        self.held += 1
        if 2 * self.held > self.mask:
            self._grow()

    def _grow(self) -> None:
        """Compiled: twice the slots, every entry moved to its run in them."""
        old = self.tab
        size = self.mask + 1
        self._table(64 - self.shift + 1)
        tab = self.tab
        mask = self.mask
        for j in range(size):
            p = old[2 * j + 1]
            if p >= 0:
                h = old[2 * j]
                i = self._slot(h)
                while tab[2 * i + 1] >= 0:
                    i = (i + 1) & mask
                tab[2 * i] = h
                tab[2 * i + 1] = p

    def _delete(self, i: int) -> None:
        """Compiled: empty slot i, moving back the entries after it that would no longer be found (linear
        probing's deletion: no tombstones)."""
        tab = self.tab
        mask = self.mask
        j = i
        while True:
            j = (j + 1) & mask
            p = tab[2 * j + 1]
            if p < 0:
                break
            h = tab[2 * j]
            if ((j - self._slot(h)) & mask) >= ((j - i) & mask):  # its first slot is not in (i, j]
                tab[2 * i] = h
                tab[2 * i + 1] = p
                i = j
        tab[2 * i + 1] = -1
        self.held -= 1

    def _get(self, k: Hashable) -> int:
        """k's position, -1 if not held."""
        if _C_TABLE:
            return self._find(k, hash(k))
        return self._pos.get(k, -1)

    def _remove(self, k: Hashable) -> int:
        """Take k (held) out of the position map; returns its position (KeyError if not held)."""
        if _C_TABLE:
            p = self._find(k, hash(k))
            if p < 0:
                raise KeyError(k)
            self._delete(self._at)
            return p
        p = self._pos.pop(k)
        self.held -= 1
        return p

    def _rebuild(self) -> None:
        """The position map of the keys the line holds (after a restore)."""
        self.held = 0
        self._pos = {}
        self._table(_MIN_BITS)
        line = self.line
        base = self.base
        for p in range(self.starts[self.n - 1], self.end):
            k = line[p - base]
            if k is not None:
                if _C_TABLE:
                    if self._find(k, hash(k)) >= 0:
                        raise ValueError(f"key {k!r} held twice")
                    self._insert(hash(k), p)
                else:
                    self._pos[k] = p
                    self.held += 1

    def tier_of(self, p: int) -> int:
        """The tier whose range holds position p (a key's, held)."""
        i = 0
        while p < self.starts[i]:
            i += 1
        return i

    def find(self, key: Hashable) -> int:
        """Index of the tier holding key, -1 if none."""
        p = self._get(key)
        if p < 0:
            return -1
        return self.tier_of(p)

    def match(self, keys: list, start: int, end: int) -> list[int]:
        """Tier index of each of keys[start:end] while the chain holds them. A prompt's blocks are evicted
        from the GPU tail first, so its keys lie in the line one below the other: a key found in the line
        just below the key before it (a held key's one position) needs no lookup."""
        out: list[int] = []
        pos = self._pos
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
                if _C_TABLE:
                    p = self._find(k, hash(k))
                else:
                    p = pos.get(k, -1)
                if p < 0:
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
        (Tier 0 inline, its counters in locals: _enter's loop for i = 0; and tier 1 while it has room.)"""
        pos = self._pos
        line = self.line
        base = self.base
        nxt = self.end
        cap0 = self.caps[0]
        c0 = self.counts[0]
        s0 = self.starts[0]
        peak0 = self.peaks[0]
        stores0 = evictions0 = 0
        in1 = self.n > 1 and self.caps[1] > 0  # (tier 1 inline: its counters in locals)
        cap1 = self.caps[1] if in1 else 0
        c1 = self.counts[1] if in1 else 0
        peak1 = self.peaks[1] if in1 else 0
        stores1 = 0
        stored = 0
        for k in keys:
            if _C_TABLE:
                h = hash(k)
                if self._find(k, h) >= 0:  # held: skipped
                    continue
                self._insert(h, nxt)
            else:
                box = nxt  # (one int object: setdefault hands it back only if it stored it)
                if pos.setdefault(k, box) is not box:  # held: skipped
                    continue
                self.held += 1
            line.append(k)
            nxt += 1
            stored += 1
            if cap0 <= 0:  # holds nothing: the key goes on down
                s0 = nxt
                j = nxt - 1
            else:
                stores0 += 1
                if c0 < cap0:
                    c0 += 1
                    if c0 > peak0:
                        peak0 = c0
                    continue
                evictions0 += 1
                if cap0 > peak0:
                    peak0 = cap0
                j = s0
                while line[j - base] is None:
                    j += 1
                s0 = j + 1
            # the key at position j enters tier 1
            if in1 and c1 < cap1:  # (_enter(1, j) inline: tier 1 has room)
                c1 += 1
                stores1 += 1
                if c1 > peak1:
                    peak1 = c1
                continue
            if in1:
                self.counts[1] = c1
                self.peaks[1] = peak1
                self.stores[1] += stores1
                stores1 = 0
            self._enter(1, j)
            if in1:
                c1 = self.counts[1]
                peak1 = self.peaks[1]
        self.end = nxt
        self.occ = None
        self.counts[0] = c0
        self.starts[0] = s0
        self.peaks[0] = peak0
        self.stores[0] += stores0
        self.evictions[0] += evictions0
        if in1:
            self.counts[1] = c1
            self.peaks[1] = peak1
            self.stores[1] += stores1
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
        self._remove(line[j - base])
        self.dropped += 1

    def load(self, keys: list, tiers: list[int]) -> None:
        """Take these keys (held in these tiers) out of the chain: hits loaded into the GPU."""
        if len(keys) != len(tiers):
            raise ValueError("load: one tier index per key")
        line = self.line
        base = self.base
        self.occ = None
        for j in range(len(keys)):
            i = tiers[j]
            p = self._remove(keys[j])
            if p < self.starts[i] or (i > 0 and p >= self.starts[i - 1]):
                raise ValueError(f"load: key {keys[j]!r} is not in tier {i}")
            line[p - base] = None
            self.counts[i] -= 1
            self.loads[i] += 1
        if self.end - self.starts[self.n - 1] > 2 * self.held + self.slack:
            self._squeeze()

    def resize(self, i: int, capacity: int) -> None:
        """Set tier i's capacity; its oldest keys over it go down the chain as victims (counted)."""
        cap = min(capacity, _CAP)
        self.caps[i] = cap
        self.occ = None
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
        """Keys each tier holds, in tier order (one tuple until the counts change: a timeline row reads it
        every iteration)."""
        occ = self.occ
        if occ is None:
            occ = self.occ = tuple([self.counts[i] for i in range(self.n)])
        return occ

    def sync(self, tiers: list) -> None:
        """Copy the counters to a chain's Tier objects."""
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
        p = self._get(key)
        return p >= 0 and self.tier_of(p) == i

    def _trim(self) -> None:
        """Cut the positions that left the chain off the line."""
        cut = self.starts[self.n - 1] - self.base
        del self.line[:cut]
        self.base += cut

    def _squeeze(self) -> None:
        """Renumber the keys held without the holes between them (same order, same tiers). Compiled, each
        table entry's position is mapped to its new one in place (the hashes, so the slots, stay)."""
        old = self.line
        base = self.base
        starts = self.starts
        pos = self._pos
        lo = starts[self.n - 1]
        new = array("q", bytes(8 * (self.end - lo))) if _C_TABLE else None  # (old position - lo -> new)
        line: list = []
        for i in range(self.n - 1, -1, -1):  # (the oldest range first)
            lo_i = starts[i]
            hi = starts[i - 1] if i else self.end
            starts[i] = len(line)
            for p in range(lo_i, hi):
                k = old[p - base]
                if k is not None:
                    if _C_TABLE:
                        new[p - lo] = len(line)
                    else:
                        pos[k] = len(line)
                    line.append(k)
        if _C_TABLE:
            tab = self.tab
            for j in range(self.mask + 1):
                p = tab[2 * j + 1]
                if p >= 0:
                    tab[2 * j + 1] = new[p - lo]
        self.line = line
        self.base = 0
        self.end = len(line)

    def check(self) -> None:
        """Raise AssertionError unless the line, the cuts, the counts and the position map agree."""
        n = self.n
        starts = self.starts
        for i in range(1, n):
            assert starts[i] <= starts[i - 1], "tier ranges out of order"
        assert self.base <= starts[n - 1] <= self.end == self.base + len(self.line), "line out of range"
        pos = self.pos
        for i in range(n):
            ks = self.keys(i)
            assert len(ks) == self.counts[i] <= max(self.caps[i], 0), f"tier {i} count"
            assert all(self.tier_of(pos[k]) == i for k in ks), f"tier {i} positions"
        assert len(pos) == sum(self.counts) == self.held, "keys held"
        assert all(self._get(k) == p for k, p in pos.items()), "position map"
        if _C_TABLE:
            assert sum(1 for j in range(self.mask + 1) if self.tab[2 * j + 1] >= 0) == self.held, "table"
        else:
            assert self._pos == pos, "position dict"


def _restore(n: int, line: list, base: int, end: int, dropped: int, slack: int,
             arrays: list[array]) -> StackedTiers:
    s = StackedTiers([0] * n, slack)
    s.line, s.base, s.end, s.dropped = line, base, end, dropped
    s.starts, s.caps, s.counts, s.stores, s.loads, s.evictions, s.peaks = arrays
    s._rebuild()
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
