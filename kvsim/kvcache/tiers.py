"""KV tiers below the GPU: a chain of caches (CPU DRAM -> local SSD -> remote store) keyed by block content.

A tier holds prefix-cache blocks by their chained block key (kvsim/kvcache/hashing.py), never block ids:
its memory is O(blocks it holds), whatever its capacity. Capacity is in GPU-block units (`capacity_blocks`
= capacity bytes // bytes per block); `chunk_blocks` > 1 stores and matches whole chunks only (LMCache's
256-token chunks), 1 offloads single blocks (vLLM's offloading connector).

Placement:
- **exclusive**: a block lives in at most one tier. A block stored enters the first tier; a tier's victim
  moves down to the next tier (or leaves the chain from the last). A hit is loaded into the GPU and leaves
  the tier (promotion), so the GPU and the tiers together hold each block once.
- **inclusive**: a stored block enters every tier; a victim just leaves its tier; a hit is copied up and
  stays. Lower tiers hold a superset of what the upper ones hold when their capacities grow down the chain.

Eviction inside a tier: `lru` (least recently stored or hit first), `fifo` (oldest stored first, hits do
not refresh), `lfu` (fewest hits first, ties by LRU), `arc` and `s3fifo` (below). Every operation is O(1)
amortised per block (`lfu`: O(log n)); memory is O(capacity), ghost lists included.

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
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Hashable

TIER_MEDIA: dict[str, str] = {
    "cpu": "host DRAM behind the GPU, over the host link (PCIe)",
    "ssd": "local NVMe, read and written through host memory",
    "remote": "a remote KV store over the network (Mooncake Store, LMCache remote backend)",
}
"""Tier media, in the only order a chain may have them (each at most once)."""
TIER_EVICTION: dict[str, str] = {
    "lru": "least recently stored or hit first",
    "lfu": "fewest hits first, ties least recently used",
    "fifo": "oldest stored first; hits do not refresh",
    "arc": "Adaptive Replacement Cache: recency and frequency lists sized by hits on ghosts of evicted keys",
    "s3fifo": "S3-FIFO: a small probation FIFO, a main FIFO with 2-bit hit counters, a ghost FIFO",
}
TIER_STORE: dict[str, str] = {
    "write_back": "a block goes down when the GPU cache evicts it (vLLM's offloading connector)",
    "write_through": "every full prompt block computed is stored at once (LMCache)",
}
TIER_LOAD: dict[str, str] = {
    "blocking": "a request with blocks to load waits for them before its prefill; the batch goes on",
    "pipelined": "the load overlaps the request's prefill layer by layer; the iteration waits for it",
}


class _Arc:
    """ARC's four lists (OrderedDicts, LRU first) and target p for a tier of c blocks (module docstring)."""

    __slots__ = ("c", "p", "t1", "t2", "b1", "b2")

    def __init__(self, c: int) -> None:
        self.c = c
        self.p = 0.0
        self.t1: OrderedDict[Hashable, None] = OrderedDict()
        self.t2: OrderedDict[Hashable, None] = OrderedDict()
        self.b1: OrderedDict[Hashable, None] = OrderedDict()
        self.b2: OrderedDict[Hashable, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self.t1) + len(self.t2)

    def __contains__(self, key: Hashable) -> bool:
        return key in self.t1 or key in self.t2

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
        if self.t1.pop(key, 0) is not None:  # (the value stored is None; 0 means absent)
            del self.t2[key]

    def miss(self, key: Hashable) -> list[Hashable]:
        """Cases II-IV: key (not held) enters; returns the keys evicted (at most one)."""
        c, t1, t2, b1, b2 = self.c, self.t1, self.t2, self.b1, self.b2
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
        return out

    def _replace(self, in_b2: bool, out: list[Hashable]) -> None:
        """REPLACE(x, p), only while the tier is full (takes can leave it short of c)."""
        t1, t2 = self.t1, self.t2
        if len(t1) + len(t2) < self.c:
            return
        n1 = len(t1)
        if n1 and ((in_b2 and n1 == self.p) or n1 > self.p or not t2):
            key = t1.popitem(last=False)[0]
            self.b1[key] = None
        else:
            key = t2.popitem(last=False)[0]
            self.b2[key] = None
        out.append(key)


class _S3Fifo:
    """S3-FIFO's queues S, M (key -> freq, oldest first) and ghost G for a tier of c blocks (module
    docstring; the paper's Algorithm 1: S's keys with freq > 1 move to M)."""

    __slots__ = ("c", "s_cap", "m_cap", "s", "m", "g")

    def __init__(self, c: int) -> None:
        self.c = c
        self.s_cap = max(1, -(-c // 10))  # |S| >= 0.1 c, for whole keys
        self.m_cap = c - self.s_cap  # M's share; G holds as many keys
        self.s: OrderedDict[Hashable, int] = OrderedDict()
        self.m: OrderedDict[Hashable, int] = OrderedDict()
        self.g: OrderedDict[Hashable, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self.s) + len(self.m)

    def __contains__(self, key: Hashable) -> bool:
        return key in self.s or key in self.m

    def keys(self) -> list[Hashable]:
        return [*self.s, *self.m]

    def touch(self, key: Hashable) -> None:
        """A hit: freq + 1, capped at 3; nothing moves."""
        q = self.s if key in self.s else self.m
        q[key] = min(q[key] + 1, 3)

    def remove(self, key: Hashable) -> None:
        if self.s.pop(key, None) is None:
            del self.m[key]

    def miss(self, key: Hashable) -> list[Hashable]:
        """INSERT(x): evict while full, then x enters M (a ghost) or S with freq 0; returns the victims."""
        out: list[Hashable] = []
        while len(self.s) + len(self.m) >= self.c:
            if len(self.s) >= self.s_cap:
                self._evict_s(out)
            else:
                self._evict_m(out)
        if self.g.pop(key, 0) is None:
            self.m[key] = 0
        else:
            self.s[key] = 0
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


class Tier:
    """One cache tier: up to `capacity_blocks` block keys, evicted by `policy`. A `shared` tier (the
    fleet's remote store, Mooncake Store / LMCache remote) sits in the chain of every replica: what one
    replica stores, another's lookup finds, and a hit leaves it there (exclusive placement or not)."""

    __slots__ = ("name", "capacity_blocks", "policy", "shared", "_keys", "_hits", "_heap", "_clock", "_q",
                 "stores", "loads", "evictions", "peak")

    def __init__(self, name: str, capacity_blocks: int, policy: str = "lru", shared: bool = False) -> None:
        if policy not in TIER_EVICTION:  # (the scenario schema names the key; this guards direct use)
            raise ValueError(f"unknown tier eviction {policy!r}")
        self.name = name
        self.capacity_blocks = capacity_blocks
        self.policy = policy
        self.shared = shared
        self._keys: OrderedDict[Hashable, None] = OrderedDict()  # lru / fifo order, oldest first
        self._hits: dict[Hashable, tuple[int, int]] = {}  # lfu: key -> (hits, last)
        self._heap: list[tuple[int, int, Hashable]] = []  # lfu: lazy (hits, last, key)
        self._clock = itertools.count()
        # arc / s3fifo keep their keys here instead of _keys
        self._q: _Arc | _S3Fifo | None = (_Arc(capacity_blocks) if policy == "arc" else
                                          _S3Fifo(capacity_blocks) if policy == "s3fifo" else None)
        self.stores = 0       # blocks written into the tier
        self.loads = 0        # blocks read from it on a hit
        self.evictions = 0    # blocks pushed out by capacity
        self.peak = 0         # most blocks held at once

    @property
    def resizable(self) -> bool:
        """Whether TierChain.resize may change its capacity (lru, lfu, fifo)."""
        return self._q is None

    def __len__(self) -> int:
        return len(self._keys) if self._q is None else len(self._q)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._keys if self._q is None else key in self._q

    def put(self, key: Hashable) -> list[Hashable]:
        """Store key (refreshing it if held); returns the keys evicted to make room."""
        if key in self:
            self._touch(key)
            return []
        if self.capacity_blocks <= 0:
            return [key]
        q = self._q
        if q is not None:
            out = q.miss(key)
            n = len(q)
        else:
            keys = self._keys
            out = []
            while len(keys) >= self.capacity_blocks:
                out.append(self._victim())
            keys[key] = None
            if self.policy == "lfu":
                t = next(self._clock)
                self._hits[key] = (0, t)
                heapq.heappush(self._heap, (0, t, key))
            n = len(keys)
        self.stores += 1
        self.evictions += len(out)
        if n > self.peak:
            self.peak = n
        return out

    def hit(self, key: Hashable, take: bool) -> None:
        """A lookup found key: count a load; remove it (take, exclusive) or refresh it."""
        self.loads += 1
        if take:
            self.remove(key)
        else:
            self._touch(key)

    def remove(self, key: Hashable) -> None:
        if self._q is not None:
            self._q.remove(key)
            return
        del self._keys[key]
        self._hits.pop(key, None)  # lfu's heap row goes stale

    def _touch(self, key: Hashable) -> None:
        if self._q is not None:
            self._q.touch(key)
        elif self.policy == "lru":
            self._keys.move_to_end(key)
        elif self.policy == "lfu":
            hits, _ = self._hits[key]
            t = next(self._clock)
            self._hits[key] = (hits + 1, t)
            heapq.heappush(self._heap, (hits + 1, t, key))

    def _victim(self) -> Hashable:
        if self.policy != "lfu":
            key, _ = self._keys.popitem(last=False)
            return key
        heap, hits = self._heap, self._hits
        while True:
            h, t, key = heapq.heappop(heap)
            if hits.get(key) == (h, t):
                self.remove(key)
                return key

    def keys(self) -> list[Hashable]:
        """The keys held (for invariant checks)."""
        return list(self._keys) if self._q is None else self._q.keys()


class TierChain:
    """The tiers below one GPU cache, in order (see the module docstring)."""

    __slots__ = ("tiers", "exclusive", "chunk_blocks", "min_uses", "_seen", "dropped")

    def __init__(self, tiers: list[Tier], exclusive: bool = True, chunk_blocks: int = 1,
                 min_uses: int = 1) -> None:
        self.tiers = tiers
        self.exclusive = exclusive
        self.chunk_blocks = max(1, chunk_blocks)
        self.min_uses = min_uses
        self._seen: dict[Hashable, int] = {}  # store filter: offers per key (only when min_uses > 1)
        self.dropped = 0  # blocks that left the chain from its last tier

    def offer(self, keys: list[Hashable]) -> int:
        """Store these blocks (in prompt order) unless the filter holds them back; returns blocks stored
        into the first tier (exclusive) or into every tier (inclusive)."""
        if self.min_uses > 1:
            seen = self._seen
            kept = []
            for k in keys:
                n = seen.get(k, 0) + 1
                seen[k] = n
                if n >= self.min_uses:
                    kept.append(k)
            keys = kept
        stored = 0
        for k in keys:
            if self.exclusive:
                if any(k in t for t in self.tiers):
                    continue
                self._put_down(0, k)
            else:
                for t in self.tiers:
                    t.put(k)
            stored += 1
        return stored

    def _put_down(self, i: int, key: Hashable) -> None:
        victims = self.tiers[i].put(key)
        for v in victims:
            if i + 1 < len(self.tiers):
                self._put_down(i + 1, v)
            else:
                self.dropped += 1

    def resize(self, i: int, capacity: int) -> None:
        """Set tier i's capacity (swap preemption lends the CPU tier's memory to swapped sequences and
        gives it back); victims over the new capacity go down the chain as any tier victim does. For the
        lru / lfu / fifo policies (the scenario refuses swap on an arc or s3fifo CPU tier)."""
        t = self.tiers[i]
        if t._q is not None:
            raise ValueError(f"tier {t.name}: {t.policy} tiers are not resized")
        t.capacity_blocks = capacity
        while len(t) > max(capacity, 0):
            victim = t._victim()
            t.evictions += 1
            if not self.exclusive:
                continue
            if i + 1 < len(self.tiers):
                self._put_down(i + 1, victim)
            else:
                self.dropped += 1

    def find(self, key: Hashable) -> int:
        """Index of the first tier holding key, -1 if none."""
        for i, t in enumerate(self.tiers):
            if key in t:
                return i
        return -1

    def match(self, keys: list[Hashable], start: int, limit: int) -> list[int]:
        """Tier index of each block keys[start:...] while the chain holds them, up to `limit` blocks in
        all and cut down to whole chunks (chunk_blocks): the tier part of a prefix hit. No side effect."""
        out: list[int] = []
        for j in range(start, min(limit, len(keys))):
            i = self.find(keys[j])
            if i < 0:
                break
            out.append(i)
        c = self.chunk_blocks
        if c > 1:
            end = ((start + len(out)) // c) * c
            out = out[: max(0, end - start)]
        return out

    def load(self, keys: list[Hashable], tiers: list[int]) -> None:
        """Account a hit on these keys from these tiers (exclusive: they leave the chain, except a shared
        tier's: other replicas read them too)."""
        for k, i in zip(keys, tiers, strict=True):
            t = self.tiers[i]
            t.hit(k, take=self.exclusive and not t.shared)

    def check(self) -> None:
        """Raise AssertionError unless every tier is within capacity and (exclusive) no block is in two of
        the replica's own tiers (a shared tier may hold what another replica put there)."""
        seen: set = set()
        for t in self.tiers:
            assert len(t) <= t.capacity_blocks or t.capacity_blocks <= 0, f"tier {t.name} over capacity"
            if self.exclusive and not t.shared:
                ks = set(t.keys())
                assert not (ks & seen), f"a block in two exclusive tiers ({t.name})"
                seen |= ks
