"""Eviction policies inside one KV tier (`kv.tiers[].eviction`): the `TierPolicy` base and the registry
`TIER_POLICIES` keyed by the YAML name. A tier (kvsim/kvcache/tiers.py) holds block keys; its policy keeps
them and picks its victims. Adding a policy is one `TierPolicy` subclass and one entry in `TIER_POLICIES`.

- **lru**: least recently stored or hit first. **fifo**: oldest stored first, hits do not refresh.
  **lfu**: fewest hits first, ties by LRU (a lazy heap, O(log n)). The others are O(1) amortised per block;
  memory is O(capacity), ghost lists included.
- **arc** (Megiddo & Modha, FAST 2003): resident lists T1 (seen once) and T2 (seen again), ghost lists B1/B2
  of the keys REPLACE evicted from them (|T1|+|B1| <= c, all four <= 2c), and a target size p for T1. A store
  of a key not held is a miss: a ghost hit in B1 (B2) grows (shrinks) p by max(1, |B2|/|B1|) (max(1,
  |B1|/|B2|)) and enters T2, any other miss enters T1; a hit, or a store of a key held, moves it to T2's MRU
  end. When the tier is full, REPLACE evicts T1's LRU key into B1 if |T1| > p (or = p on a B2 hit), else
  T2's into B2. A key taken out (a hit promoted to the GPU, a removal) leaves T1/T2 for no ghost list: it
  was not evicted, and REPLACE runs only while the tier is full (the paper's cache never shrinks).
- **s3fifo** (Yang et al., SOSP 2023, Algorithm 1 of the paper): a small FIFO S (ceil(10% of c), at least
  1), a main FIFO M (the rest), a ghost FIFO G of keys evicted from S (at most |M|'s share of keys), and a
  hit counter per key held, capped at 3 (a hit moves nothing). A miss enters M if its key is in G, else S.
  While the tier is full: if |S| >= its share, S's oldest keys with freq > 1 move to M (evicting from M
  when that overfills it) until one with freq <= 1 leaves S for G; else M's oldest keys with freq > 0 are
  reinserted with freq - 1 until one with 0 leaves. One-hit wonders so leave through S without touching M.

arc and s3fifo keep their size (`resizable` False): swap preemption lends only an lru / lfu / fifo cpu
tier's memory (kvsim/kvcache/prefix_hash.py).
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict, deque
from collections.abc import Hashable
from typing import ClassVar


class TierPolicy:
    """A tier's eviction policy over at most `capacity` keys (> 0 whenever `insert` is called).

    `held` is the dict of the keys held: a tier reads it for membership and size (`key in held`,
    `len(held)`), so a lookup costs no call. A policy keeps it exact; ghosts are not in it."""

    __slots__ = ("capacity", "held")

    name: ClassVar[str]
    description: ClassVar[str]
    """One line for `kvsim policies` and the schema."""
    resizable: ClassVar[bool] = False
    """Whether `resize` may change the capacity of a tier holding keys."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held: dict[Hashable, object] = {}

    def insert(self, key: Hashable) -> list[Hashable]:
        """Store key (not held); returns the keys evicted to make room, in eviction order."""
        raise NotImplementedError

    def touch(self, key: Hashable) -> None:
        """A hit on key (held), or a store of it again."""
        raise NotImplementedError

    def remove(self, key: Hashable) -> None:
        """Take key (held) out, not as an eviction (a hit promoted to the GPU)."""
        raise NotImplementedError

    def victim(self) -> Hashable:
        """Evict and return the next victim (resizable policies; the tier holds a key)."""
        raise NotImplementedError

    def keys(self) -> list[Hashable]:
        """The keys held, in the policy's order (for checks and tests)."""
        return list(self.held)

    def resize(self, capacity: int) -> list[Hashable]:
        """Set the capacity; returns the victims evicted down to it (max(capacity, 0) keys)."""
        if not self.resizable:
            raise ValueError(f"{self.name} tiers are not resized")
        self.capacity = capacity
        held, out = self.held, []
        while len(held) > max(capacity, 0):
            out.append(self.victim())
        return out


class FifoPolicy(TierPolicy):
    """Oldest stored first; hits do not refresh. `held` is a plain dict of the keys held; their order is
    `order`, a deque oldest first in which a key taken out (or, lru, refreshed) leaves a stale copy behind:
    `stale` counts a key's stale copies, which all come before its live one (the last appended), so the
    oldest key held is the first copy of `order` not counted stale. `order` is compacted when stale copies
    outnumber the keys held, so memory stays O(capacity). (A dict and a deque touch about half the memory
    an OrderedDict does per store and eviction: at a tier of millions of blocks that is the cost.)"""

    __slots__ = ("order", "stale")
    name = "fifo"
    description = "oldest stored first; hits do not refresh"
    resizable = True

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.held: dict[Hashable, None] = {}
        self.order: deque[Hashable] = deque()
        self.stale: dict[Hashable, int] = {}

    def insert(self, key: Hashable) -> list[Hashable]:
        held, out = self.held, []
        while len(held) >= self.capacity:
            out.append(pop_oldest(self.order, self.stale, held))
        held[key] = None
        self.order.append(key)
        return out

    def touch(self, key: Hashable) -> None:
        pass

    def remove(self, key: Hashable) -> None:
        del self.held[key]
        stale = self.stale
        stale[key] = stale.get(key, 0) + 1
        self.compact()

    def victim(self) -> Hashable:
        return pop_oldest(self.order, self.stale, self.held)

    def keys(self) -> list[Hashable]:
        """The keys held, oldest first."""
        if not self.stale:
            return list(self.order)
        skip = dict(self.stale)
        out = []
        for k in self.order:
            c = skip.get(k)
            if c:
                skip[k] = c - 1
            else:
                out.append(k)
        return out

    def compact(self) -> None:
        """Drop the stale copies from `order` once they outnumber the keys held (the same objects stay:
        TierChain holds them)."""
        order = self.order
        if len(order) > 2 * len(self.held) + 64:
            live = self.keys()
            order.clear()
            order.extend(live)
            self.stale.clear()


class LruPolicy(FifoPolicy):
    """Least recently stored or hit first (`order` oldest first: a hit appends the key again)."""

    __slots__ = ()
    name = "lru"
    description = "least recently stored or hit first"

    def touch(self, key: Hashable) -> None:
        stale = self.stale
        stale[key] = stale.get(key, 0) + 1
        self.order.append(key)
        self.compact()


def pop_oldest(order: deque, stale: dict, held: dict) -> Hashable:
    """Take the oldest key held out of a FifoPolicy's `order` (skipping stale copies) and `held`."""
    key = order.popleft()
    if stale:
        c = stale.get(key)
        while c:
            if c == 1:
                del stale[key]
            else:
                stale[key] = c - 1
            key = order.popleft()
            c = stale.get(key)
    del held[key]
    return key


class LfuPolicy(TierPolicy):
    """Fewest hits first, ties least recently used: `held` maps key -> (hits, last use), a lazy heap of
    (hits, last, key) rows orders them (a row whose key changed since is stale and skipped)."""

    __slots__ = ("_heap", "_clock")
    name = "lfu"
    description = "fewest hits first, ties least recently used"
    resizable = True

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.held: dict[Hashable, tuple[int, int]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._clock = itertools.count()

    def insert(self, key: Hashable) -> list[Hashable]:
        held, out = self.held, []
        while len(held) >= self.capacity:
            out.append(self.victim())
        t = next(self._clock)
        held[key] = (0, t)
        heapq.heappush(self._heap, (0, t, key))
        return out

    def touch(self, key: Hashable) -> None:
        hits, _ = self.held[key]
        t = next(self._clock)
        self.held[key] = (hits + 1, t)
        heapq.heappush(self._heap, (hits + 1, t, key))

    def remove(self, key: Hashable) -> None:
        del self.held[key]  # its heap rows go stale

    def victim(self) -> Hashable:
        heap, held = self._heap, self.held
        while True:
            h, t, key = heapq.heappop(heap)
            if held.get(key) == (h, t):
                del held[key]
                return key


class ArcPolicy(TierPolicy):
    """ARC's four lists (OrderedDicts, LRU first) and target p for a tier of c blocks (module docstring)."""

    __slots__ = ("p", "t1", "t2", "b1", "b2")
    name = "arc"
    description = ("Adaptive Replacement Cache: recency and frequency lists sized by hits on ghosts of "
                   "evicted keys")

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.p = 0.0
        self.t1: OrderedDict[Hashable, None] = OrderedDict()
        self.t2: OrderedDict[Hashable, None] = OrderedDict()
        self.b1: OrderedDict[Hashable, None] = OrderedDict()
        self.b2: OrderedDict[Hashable, None] = OrderedDict()

    def keys(self) -> list[Hashable]:
        return [*self.t1, *self.t2]

    def touch(self, key: Hashable) -> None:
        """Case I, a hit: key to T2's MRU end."""
        if key in self.t1:
            del self.t1[key]
            self.t2[key] = None
        else:
            self.t2.move_to_end(key)

    def remove(self, key: Hashable) -> None:
        del self.held[key]
        if self.t1.pop(key, 0) is not None:  # (the value stored is None; 0 means absent)
            del self.t2[key]

    def insert(self, key: Hashable) -> list[Hashable]:
        """Cases II-IV: key (not held) enters; returns the keys evicted (at most one)."""
        c, t1, t2, b1, b2 = self.capacity, self.t1, self.t2, self.b1, self.b2
        out: list[Hashable] = []
        if key in b1:  # case II
            self.p = min(float(c), self.p + (1.0 if len(b1) >= len(b2) else len(b2) / len(b1)))
            self._replace(False, out)
            del b1[key]
            t2[key] = None
        elif key in b2:  # case III
            self.p = max(0.0, self.p - (1.0 if len(b2) >= len(b1) else len(b1) / len(b2)))
            self._replace(True, out)
            del b2[key]
            t2[key] = None
        else:  # case IV
            if len(t1) + len(b1) >= c:  # A: L1 holds c keys
                if len(t1) < c:
                    b1.popitem(last=False)
                    self._replace(False, out)
                else:
                    out.append(t1.popitem(last=False)[0])
            else:  # B
                total = len(t1) + len(b1) + len(t2) + len(b2)
                if total >= c:
                    if total >= 2 * c:
                        b2.popitem(last=False)
                    self._replace(False, out)
            t1[key] = None
        held = self.held
        for v in out:
            del held[v]
        held[key] = None
        return out

    def _replace(self, in_b2: bool, out: list[Hashable]) -> None:
        """REPLACE(x, p), only while the tier is full (takes can leave it short of c)."""
        t1, t2 = self.t1, self.t2
        if len(t1) + len(t2) < self.capacity:
            return
        n1 = len(t1)
        if n1 and ((in_b2 and n1 == self.p) or n1 > self.p or not t2):
            key = t1.popitem(last=False)[0]
            self.b1[key] = None
        else:
            key = t2.popitem(last=False)[0]
            self.b2[key] = None
        out.append(key)


class S3FifoPolicy(TierPolicy):
    """S3-FIFO's queues S, M (key -> freq, oldest first) and ghost G for a tier of c blocks (module
    docstring; the paper's Algorithm 1: S's keys with freq > 1 move to M)."""

    __slots__ = ("s_cap", "m_cap", "s", "m", "g")
    name = "s3fifo"
    description = "S3-FIFO: a small probation FIFO, a main FIFO with 2-bit hit counters, a ghost FIFO"

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.s_cap = max(1, -(-capacity // 10))  # |S| >= 0.1 c, for whole keys
        self.m_cap = capacity - self.s_cap  # M's share; G holds as many keys
        self.s: OrderedDict[Hashable, int] = OrderedDict()
        self.m: OrderedDict[Hashable, int] = OrderedDict()
        self.g: OrderedDict[Hashable, None] = OrderedDict()

    def keys(self) -> list[Hashable]:
        return [*self.s, *self.m]

    def touch(self, key: Hashable) -> None:
        """A hit: freq + 1, capped at 3; nothing moves."""
        q = self.s if key in self.s else self.m
        q[key] = min(q[key] + 1, 3)

    def remove(self, key: Hashable) -> None:
        del self.held[key]
        if self.s.pop(key, None) is None:
            del self.m[key]

    def insert(self, key: Hashable) -> list[Hashable]:
        """INSERT(x): evict while full, then x enters M (a ghost) or S with freq 0; returns the victims."""
        out: list[Hashable] = []
        while len(self.s) + len(self.m) >= self.capacity:
            if len(self.s) >= self.s_cap:
                self._evict_s(out)
            else:
                self._evict_m(out)
        if self.g.pop(key, 0) is None:
            self.m[key] = 0
        else:
            self.s[key] = 0
        held = self.held
        for v in out:
            del held[v]
        held[key] = None
        return out

    def _evict_s(self, out: list[Hashable]) -> None:
        s, m, g = self.s, self.m, self.g
        while s:
            key, freq = s.popitem(last=False)
            if freq > 1:
                m[key] = freq
                if len(m) > self.m_cap:  # M was full
                    self._evict_m(out)
            else:
                if self.m_cap > 0:
                    g[key] = None
                    if len(g) > self.m_cap:
                        g.popitem(last=False)
                out.append(key)
                return

    def _evict_m(self, out: list[Hashable]) -> None:
        m = self.m
        while m:
            key, freq = m.popitem(last=False)
            if freq <= 0:
                out.append(key)
                return
            m[key] = freq - 1


TIER_POLICIES: dict[str, type[TierPolicy]] = {
    cls.name: cls for cls in (LruPolicy, LfuPolicy, FifoPolicy, ArcPolicy, S3FifoPolicy)
}
"""Tier eviction policies by YAML name, in the order `kvsim policies` and the schema list them
(`TIER_EVICTION` in kvsim/kvcache/tiers.py)."""
