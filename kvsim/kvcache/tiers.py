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

Eviction inside a tier: a `TierPolicy` from `TIER_POLICIES` (kvsim/kvcache/tier_policies.py: lru, lfu,
fifo, arc, s3fifo), which holds the tier's keys and picks its victims.
"""

from __future__ import annotations

from collections.abc import Hashable

from kvsim.kvcache.tier_policies import TIER_POLICIES, FifoPolicy, LruPolicy, TierPolicy, pop_oldest
from kvsim.kvcache.tiers_stack import StackedKeys, StackedTiers

TIER_MEDIA: dict[str, str] = {
    "cpu": "host DRAM behind the GPU, over the host link (PCIe)",
    "ssd": "local NVMe, read and written through host memory",
    "remote": "a remote KV store over the network (Mooncake Store, LMCache remote backend)",
}
"""Tier media, in the only order a chain may have them (each at most once)."""
TIER_EVICTION: dict[str, str] = {name: cls.description for name, cls in TIER_POLICIES.items()}
"""Tier eviction policies: name -> one line (the classes: kvsim/kvcache/tier_policies.py)."""
TIER_STORE: dict[str, str] = {
    "write_back": "a block goes down when the GPU cache evicts it (vLLM's offloading connector)",
    "write_through": "every full prompt block computed is stored at once (LMCache)",
}
TIER_LOAD: dict[str, str] = {
    "blocking": "a request with blocks to load waits for them before its prefill; the batch goes on",
    "pipelined": "the load overlaps the request's prefill layer by layer; the iteration waits for it",
}


class Tier:
    """One cache tier: up to `capacity_blocks` block keys, evicted by the policy named `policy` (its
    `TierPolicy` is `strategy`). A `shared` tier (the fleet's remote store, Mooncake Store / LMCache
    remote) sits in the chain of every replica: what one replica stores, another's lookup finds, and a hit
    leaves it there (exclusive placement or not)."""

    __slots__ = ("name", "capacity_blocks", "policy", "shared", "strategy", "_held", "queue", "refresh",
                 "stores", "loads", "evictions", "peak")

    def __init__(self, name: str, capacity_blocks: int, policy: str = "lru", shared: bool = False) -> None:
        cls = TIER_POLICIES.get(policy)
        if cls is None:  # (the scenario schema names the key; this guards direct use)
            raise ValueError(f"unknown tier eviction {policy!r}")
        self.name = name
        self.capacity_blocks = capacity_blocks
        self.policy = policy
        self.shared = shared
        self.strategy: TierPolicy = cls(capacity_blocks)
        self._held = self.strategy.held  # the keys held, read without a call per lookup
        self.queue = isinstance(self.strategy, FifoPolicy)
        """lru or fifo: the policy state is `_held` and the strategy's `order` and `stale` (FifoPolicy;
        TierChain's inline paths work on them directly)."""
        self.refresh = isinstance(self.strategy, LruPolicy)
        """lru: a hit or a store again moves the key to the newest end."""
        self.stores = 0       # blocks written into the tier
        self.loads = 0        # blocks read from it on a hit
        self.evictions = 0    # blocks pushed out by capacity
        self.peak = 0         # most blocks held at once

    @property
    def resizable(self) -> bool:
        """Whether `resize` may change its capacity (lru, lfu, fifo)."""
        return self.strategy.resizable

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._held

    def put(self, key: Hashable) -> list[Hashable]:
        """Store key (refreshing it if held); returns the keys evicted to make room."""
        if key in self._held:
            self.strategy.touch(key)
            return []
        if self.capacity_blocks <= 0:
            return [key]
        out = self.strategy.insert(key)
        self.stores += 1
        self.evictions += len(out)
        n = len(self._held)
        if n > self.peak:
            self.peak = n
        return out

    def hit(self, key: Hashable, take: bool) -> None:
        """A lookup found key: count a load; remove it (take, exclusive) or refresh it."""
        self.loads += 1
        if take:
            self.strategy.remove(key)
        else:
            self.strategy.touch(key)

    def remove(self, key: Hashable) -> None:
        """Take key (held) out of the tier, not as an eviction."""
        self.strategy.remove(key)

    def resize(self, capacity: int) -> list[Hashable]:
        """Set the capacity (resizable tiers only); returns the victims over it, counted as evictions."""
        if not self.strategy.resizable:
            raise ValueError(f"tier {self.name}: {self.policy} tiers are not resized")
        self.capacity_blocks = capacity
        out = self.strategy.resize(capacity)
        self.evictions += len(out)
        return out

    def keys(self) -> list[Hashable]:
        """The keys held (for invariant checks)."""
        return self.strategy.keys()


class StackedPolicy(TierPolicy):
    """The policy of tier i of a chain held as one StackedTiers (kvsim/kvcache/tiers_stack.py): its keys
    read from there; only its TierChain changes them."""

    __slots__ = ("stack", "i")
    name = "stacked"
    description = "a tier of an exclusive lru / fifo chain (TierChain's state)"
    resizable = True

    def __init__(self, stack: StackedTiers, i: int, capacity: int) -> None:
        super().__init__(capacity)
        self.stack = stack
        self.i = i
        self.held = StackedKeys(stack, i)

    def keys(self) -> list[Hashable]:
        return self.stack.keys(self.i)


class TierChain:
    """The tiers below one GPU cache, in order (see the module docstring).

    An exclusive chain of lru / fifo tiers, none shared, is held as one StackedTiers (`stacked`; its Tier
    objects read their keys and counters from it). Another chain of lru / fifo tiers (`Tier.queue`) stores,
    matches and loads blocks inline, on the tiers' dicts and queues (FifoPolicy), with the results of the
    general per-tier calls (the others go through them)."""

    __slots__ = ("tiers", "exclusive", "chunk_blocks", "min_uses", "_seen", "dropped", "_helds", "_queues",
                 "_orders", "_stales", "_stack")

    def __init__(self, tiers: list[Tier], exclusive: bool = True, chunk_blocks: int = 1,
                 min_uses: int = 1, stacked: bool = True) -> None:
        self.tiers = tiers
        self.exclusive = exclusive
        self.chunk_blocks = max(1, chunk_blocks)
        self.min_uses = min_uses
        self._seen: dict[Hashable, int] = {}  # store filter: offers per key (only when min_uses > 1)
        self.dropped = 0  # blocks that left the chain from its last tier
        self._stack: StackedTiers | None = None
        if stacked and exclusive and tiers and all(t.queue and not t.shared and not len(t) for t in tiers):
            stack = self._stack = StackedTiers([t.capacity_blocks for t in tiers])
            for i, t in enumerate(tiers):
                t.strategy = StackedPolicy(stack, i, t.capacity_blocks)
                t._held = t.strategy.held
        self._helds = [t._held for t in tiers]  # (a policy keeps its `held` dict for life)
        self._queues = self._stack is None and all(t.queue for t in tiers)
        # (lru / fifo chains: each FifoPolicy's order and stale counts, kept for life as `held` is)
        self._orders = [t.strategy.order for t in tiers] if self._queues else []
        self._stales = [t.strategy.stale for t in tiers] if self._queues else []

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
        if self._stack is not None:
            stored = self._stack.offer(keys)
            self._sync()
            return stored
        if not self.exclusive:
            for k in keys:
                for t in self.tiers:
                    t.put(k)
            return len(keys)
        if self._queues:
            return self._offer_queues(keys)
        stored = 0
        helds = self._helds
        for k in keys:
            for h in helds:
                if k in h:
                    break
            else:
                self._put_down(0, k)
                stored += 1
        return stored

    def _offer_queues(self, keys: list[Hashable]) -> int:
        """offer, exclusive, every tier lru or fifo: Tier.put and _put_down inline. Such a tier holds at
        most its capacity, so a store evicts at most one key (the oldest), which goes down. The first
        tier's counters are kept in locals; a key just found in no tier is not looked up again there, nor
        a victim in a tier no other chain shares (exclusive: it is in one tier at most)."""
        tiers = self.tiers
        helds = self._helds
        orders = self._orders
        stales = self._stales
        n_tiers = len(tiers)
        t0 = tiers[0]
        h0 = helds[0]
        o0 = orders[0]
        s0 = stales[0]
        cap0 = t0.capacity_blocks
        stores0 = evictions0 = 0
        peak0 = t0.peak
        stored = 0
        for k in keys:
            for h in helds:
                if k in h:
                    break
            else:
                stored += 1
                key = k
                if cap0 > 0:
                    n = len(h0)
                    if n < cap0:
                        h0[k] = None
                        o0.append(k)
                        stores0 += 1
                        if n >= peak0:
                            peak0 = n + 1
                        continue
                    if n > cap0:  # (not reached: a resize evicts down to the capacity)
                        t0.stores += stores0
                        t0.evictions += evictions0
                        t0.peak = peak0
                        stores0 = evictions0 = 0
                        self._put_down(0, k)
                        peak0 = t0.peak
                        continue
                    key = o0.popleft()  # (pop_oldest inline: once per block stored)
                    if s0 and key in s0:
                        o0.appendleft(key)
                        key = pop_oldest(o0, s0, h0)
                    else:
                        del h0[key]
                    h0[k] = None
                    o0.append(k)
                    stores0 += 1
                    evictions0 += 1
                    if n > peak0:
                        peak0 = n
                for i in range(1, n_tiers):
                    t = tiers[i]
                    held = helds[i]
                    if t.shared and key in held:  # a shared tier holding what another replica stored
                        if t.refresh:
                            t.strategy.touch(key)
                        break
                    cap = t.capacity_blocks
                    if cap <= 0:  # holds nothing: the key goes on down
                        continue
                    n = len(held)
                    if n < cap:
                        held[key] = None
                        orders[i].append(key)
                        t.stores += 1
                        if n >= t.peak:
                            t.peak = n + 1
                        break
                    if n > cap:
                        self._put_down(i, key)
                        break
                    stale = stales[i]
                    victim = orders[i].popleft()
                    if stale and victim in stale:
                        orders[i].appendleft(victim)
                        victim = pop_oldest(orders[i], stale, held)
                    else:
                        del held[victim]
                    held[key] = None
                    orders[i].append(key)
                    t.stores += 1
                    t.evictions += 1
                    if n > t.peak:
                        t.peak = n
                    key = victim
                else:
                    self.dropped += 1
        t0.stores += stores0
        t0.evictions += evictions0
        t0.peak = peak0
        return stored

    def _sync(self) -> None:
        """Copy the StackedTiers' counters to the Tier objects (after each call that changes them)."""
        stack = self._stack
        tiers = self.tiers
        for i in range(len(tiers)):
            t = tiers[i]
            t.stores = stack.stores[i]
            t.loads = stack.loads[i]
            t.evictions = stack.evictions[i]
            t.peak = stack.peaks[i]
        self.dropped = stack.dropped

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
        lru / lfu / fifo policies: PrefixHashKVManager (kvsim/kvcache/prefix_hash.py) lends only a
        resizable cpu tier; with an arc or s3fifo one, swap keeps its own pool and this is never called."""
        if self._stack is not None:
            self.tiers[i].capacity_blocks = capacity
            self._stack.resize(i, capacity)
            self._sync()
            return
        victims = self.tiers[i].resize(capacity)
        if not self.exclusive:
            return
        for victim in victims:
            if i + 1 < len(self.tiers):
                self._put_down(i + 1, victim)
            else:
                self.dropped += 1

    def occupancy(self) -> tuple[int, ...]:
        """Blocks each tier holds, in tier order."""
        if self._stack is not None:
            return self._stack.occupancy()
        return tuple(map(len, self._helds))

    def find(self, key: Hashable) -> int:
        """Index of the first tier holding key, -1 if none."""
        if self._stack is not None:
            return self._stack.find(key)
        i = 0
        for h in self._helds:
            if key in h:
                return i
            i += 1
        return -1

    def match(self, keys: list[Hashable], start: int, limit: int) -> list[int]:
        """Tier index of each block keys[start:...] while the chain holds them, up to `limit` blocks in
        all and cut down to whole chunks (chunk_blocks): the tier part of a prefix hit. No side effect."""
        out: list[int] = []
        helds = self._helds
        end = min(limit, len(keys))
        j = start
        if self._stack is not None:
            out = self._stack.match(keys, start, end)
            j = end
        while j < end:
            k = keys[j]
            i = 0
            for h in helds:
                if k in h:
                    break
                i += 1
            else:
                break
            out.append(i)
            j += 1
        c = self.chunk_blocks
        if c > 1:
            end = ((start + len(out)) // c) * c
            out = out[: max(0, end - start)]
        return out

    def load(self, keys: list[Hashable], tiers: list[int]) -> None:
        """Account a hit on these keys from these tiers (exclusive: they leave the chain, except a shared
        tier's: other replicas read them too)."""
        chain = self.tiers
        if self._stack is not None:
            self._stack.load(keys, tiers)
            self._sync()
            return
        if not self._queues:
            for k, i in zip(keys, tiers, strict=True):
                t = chain[i]
                t.hit(k, take=self.exclusive and not t.shared)
            return
        if len(keys) != len(tiers):
            raise ValueError("load: one tier index per key")
        helds = self._helds
        stales = self._stales
        exclusive = self.exclusive
        for j in range(len(keys)):
            i = tiers[j]
            t = chain[i]
            t.loads += 1
            if exclusive and not t.shared:  # (FifoPolicy.remove, its compaction after the loop)
                k = keys[j]
                del helds[i][k]
                stale = stales[i]
                stale[k] = stale.get(k, 0) + 1
            elif t.refresh:
                t.strategy.touch(keys[j])
        for t in chain:
            t.strategy.compact()

    def check(self) -> int:
        """Raise AssertionError unless every tier is within capacity and (exclusive) no block is in two of
        the replica's own tiers (a shared tier may hold what another replica put there); return the keys
        read."""
        if self._stack is not None:
            self._stack.check()
        seen: set = set()
        read = 0
        for t in self.tiers:
            read += len(t)
            assert len(t) <= t.capacity_blocks or t.capacity_blocks <= 0, f"tier {t.name} over capacity"
            if self.exclusive and not t.shared:
                ks = set(t.keys())
                assert not (ks & seen), f"a block in two exclusive tiers ({t.name})"
                seen |= ks
        return read
