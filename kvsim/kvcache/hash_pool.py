# cython: boundscheck=False, wraparound=False
"""The hash prefix cache's block pool: keyed blocks stay cached at refcount 0 until evicted.

The per-block work of the cache (hits, releases, registrations, evictions) is done by the module's
functions, one call per run of blocks, over the pool's per-block lists (hash_pool.pxd gives them C-typed
loops when compiled).
"""

from __future__ import annotations

from operator import itemgetter

from kvsim.kvcache.block_pool import BlockPool
from kvsim.kvcache.block_queue import BlockQueue
from kvsim.kvcache.eviction import EvictionQueue

_COMPILED = not __file__.endswith(".py")
"""Compiled by Cython (hash_pool.pxd): match checks a hint in its own C loop."""
_DEPTHS: list[int] = []
"""The ints 0, 1, 2, ... made once: register stores a block's depth from here (no int made per block, and
the old one the list slot held is not freed)."""
_COUNTS: list[int] = list(range(256))
"""The refcounts 0 .. 255 as ints (compiled: hash_pool.pxd's _put_count stores a refcount from here, no int
made per store)."""


def _depths(n: int) -> list[int]:
    """_DEPTHS, at least n long."""
    if n > 256 and len(_DEPTHS) < n:
        _DEPTHS.extend(range(len(_DEPTHS), 2 * n))
    return _DEPTHS


class HashCachePool(BlockPool):
    """A BlockPool whose released blocks with a content key stay cached (refcount 0, evictable) instead of
    returning to the free list. `num_free` counts truly free plus evictable blocks; an allocation evicts
    (`_evict`, in the policy's order) when none is truly free.

    Per-block bookkeeping feeds the eviction key: `last` (the release that last let the block go, or its
    registration), `depth` (its position in the prompt), and, only where the policy reads them, `uses`
    (lfu) and `birth` (fifo). The evictable blocks are a BlockQueue over the pool's lists (block_queue.py),
    fifo's an EvictionQueue (whose heap breaks fifo's ties); `filed` holds the ticket of the release that
    filed each cached block (the release's clock; BlockQueue: 0 once its row left the queue).
    """

    __slots__ = ("key_of", "by_key", "queue", "last", "uses", "birth", "depth", "filed", "clock",
                 "evictions", "spill", "runs", "revives", "counts_uses", "counts_birth")

    def __init__(self, num_blocks: int, block_size: int, policy: str = "lru") -> None:
        self.key_of: list[int | None] = []  # per-block fields, for the blocks with state (BlockPool)
        self.last: list[int] = []
        self.uses: list[int] = []
        self.birth: list[int] = []
        self.depth: list[int] = []
        self.filed: list[int] = []
        BlockPool.__init__(self, num_blocks, block_size)
        self.by_key: dict[int, int] = {}
        self.runs = policy in ("lru", "lfu", "length")
        """The queue is a BlockQueue (else an EvictionQueue)."""
        self.revives = policy in ("lru", "length")
        """An undone admission's blocks go back into their rows (BlockQueue.revive): the priority reads
        nothing an admission changes."""
        self.counts_uses = policy not in ("lru", "fifo", "length")
        self.counts_birth = policy not in ("lru", "lfu", "length")
        self.queue = BlockQueue(policy, self.rc, self.filed, self.last, self.uses, self.birth, self.depth) \
            if self.runs else EvictionQueue(policy)
        self.clock = 0
        self.evictions = 0
        self.spill: list | None = None
        """When a list (KV tiers with write-back), the keys of evicted blocks are appended to it."""

    def _extend(self, k: int) -> None:
        BlockPool._extend(self, k)
        self.key_of += [None] * k
        zeros = [0] * k
        self.last += zeros
        self.uses += zeros
        self.birth += zeros
        self.depth += zeros
        self.filed += zeros

    @property
    def num_free(self) -> int:
        return self.free_count + len(self.queue)

    def free_now(self) -> int:
        return self.free_count + len(self.queue)

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.free_count - len(self.queue)

    @property
    def num_cached_free(self) -> int:
        return len(self.queue)

    def _evict(self, k: int) -> list[int]:
        """k evictable blocks (policy order), their keys forgotten (and spilled, write-back); [] if fewer."""
        if k > len(self.queue):
            return []
        if self.runs:
            queue = self.queue  # (compiled: a BlockQueue, called in C)
            return self._forget(queue.pop_many(k))
        return self._forget(self.queue.pop_many(k) if k > 1 else [self.queue.pop_one()])

    def _forget(self, ids: list[int]) -> list[int]:
        """Evicted blocks ids lose their keys (spilled, write-back) and become free blocks (rc 1)."""
        forget(self.by_key, self.key_of, self.rc, ids, self.spill)
        self.evictions += len(ids)
        return ids

    def _evict_taken(self, m: int) -> list[int]:
        """m calls of take_evicting, each evicting one block (the policy's next: with an EvictionQueue by
        pop_one, as its pop_many may break ties between batches otherwise) and taking it, in eviction
        order."""
        if self.runs:  # (a BlockQueue's pop_many is its pop_many(1) repeated)
            queue = self.queue  # (compiled: a BlockQueue, called in C)
            return self._forget(queue.pop_many(m))
        pop = self.queue.pop_one
        return self._forget([pop() for _ in range(m)])

    def release(self, ids: list[int], touch: bool = True) -> list[int]:
        """As BlockPool.release; cached blocks reaching refcount 0 become evictable, their last use now
        (touch=False keeps the previous last use: an admission the scheduler undid)."""
        self.clock += 1
        now = self.clock
        if not touch or not self.revives:
            kept, zeroed = self.drop_refs(ids)
        if not touch and self.revives:  # their rows may still be in the queue: made live again there
            free, cached = settle(self.key_of, self.rc, None, None, zeroed, now)
            if free:
                self._put_free(free)
            if cached:
                queue = self.queue  # (compiled: a BlockQueue, called in C)
                queue.revive(cached, now)
            return kept
        if touch and self.revives:  # (lru, length: a run whose depths ascend is filed as it is)
            kept, free, cached, ascending = settle_drop(self, ids, now)
            if free:
                self._put_free(free)
            if cached:
                queue = self.queue
                if ascending:
                    queue.add_ascending(cached, now)
                else:
                    queue.add_many(cached, now)
            return kept
        free, cached = settle(self.key_of, self.rc, self.filed, self.last if touch else None, zeroed, now)
        if free:
            self._put_free(free)
        if cached:
            if not self.runs:
                self.queue.add_many(cached, self.last, self.uses, self.birth, self.depth)
            elif touch:
                self.queue.add_run(cached, now)
            else:
                self.queue.add_many(cached, now)
        return kept

    def hold(self, table: list[int]) -> int:
        """Add a reference to each block of table (cache hits: cached blocks, held or evictable); return
        how many were held already."""
        if self.runs:
            shared = hold(self.rc, table, None)
            self.queue.count -= len(table) - shared
        else:
            shared = hold(self.rc, table, self.queue.discard)
        self.shared += shared
        return shared

    def reuse(self, bid: int) -> int:
        """Add a reference to a cached block (a cache hit); return its refcount before."""
        r = self.rc[bid]
        if r == 0:
            self.queue.discard(bid)
        else:
            self.shared += 1
        self.rc[bid] = r + 1
        return r


def match(by_key: dict, key_of: list, keys: list, m: int, hint: list[int] | None) -> list[int]:
    """The blocks cached under keys[0], keys[1], ... up to the first that is not, at most m: while `hint`
    (blocks that may hold them: BlockContent.hint) is right, read from it (checked against key_of, which
    agrees with by_key), then looked up."""
    j = 0
    if hint is None:
        table = []
    elif _COMPILED:  # (one C loop over the hint)
        h = min(m, len(hint))
        n = len(key_of)
        while j < h:
            hb = hint[j]
            if hb >= n:  # (a memo shared by a fleet's replicas: a hint from another pool, more blocks)
                break
            kb = key_of[hb]
            k = keys[j]
            if kb is not k and kb != k:
                break
            j += 1
        table = hint[:j]
    else:  # (as Python: the hint's keys read and compared at C speed, by itemgetter and list equality)
        h = min(m, len(hint))
        if h and (hint[0] >= len(key_of) or key_of[hint[0]] != keys[0]):
            h = 0  # (a fleet shares the memo: a hint from another replica's table fails at its first block)
        table = hint[:h]
        if h:
            try:
                got = list(itemgetter(*table)(key_of)) if h > 1 else [key_of[table[0]]]
            except IndexError:
                n = len(key_of)
                got = [key_of[b] if b < n else None for b in table]
            if got == keys[:h]:
                j = h
            else:
                for kb, k in zip(got, keys, strict=False):
                    if kb is not k and kb != k:
                        break
                    j += 1
                del table[j:]
    while j < m:
        b = by_key.get(keys[j], -1)
        if b < 0:
            break
        table.append(b)
        j += 1
    return table


def match_hold(pool: HashCachePool, keys: list, m: int, hint: list[int] | None) -> tuple[list[int], int]:
    """match(pool.by_key, pool.key_of, keys, m, hint) and pool.hold of the blocks it finds (a pool whose
    queue is a BlockQueue: `runs`): (the blocks, how many were held already). Compiled, in one pass: each
    block is held as it is found (match changes nothing else, and hold takes them in the same order)."""
    if not _COMPILED:
        table = match(pool.by_key, pool.key_of, keys, m, hint)
        return table, pool.hold(table)
    key_of = pool.key_of
    rc = pool.rc
    shared = 0
    j = 0
    if hint is None:
        table = []
    else:
        h = min(m, len(hint))
        n = len(key_of)
        while j < h:  # (hash_pool.pxd's C inlines: _at(x, i) is x[i] as a C index, _differ the key check)
            hb = _at(hint, j)  # noqa: F821
            if hb >= n:  # (a memo shared by a fleet's replicas: a hint from another pool, more blocks)
                break
            if _differ(key_of, hb, keys, j):  # noqa: F821 (key_of[hb] != keys[j])
                break
            r = _at(rc, hb)  # noqa: F821
            if r:
                shared += 1
            _put_count(rc, hb, r + 1)  # noqa: F821 (hash_pool.pxd)
            j += 1
        table = hint[:j]
    by_key = pool.by_key
    while j < m:
        b = by_key.get(keys[j])
        if b is None:
            break
        table.append(b)
        i = _index(b)  # noqa: F821
        r = _at(rc, i)  # noqa: F821
        if r:
            shared += 1
        _put_count(rc, i, r + 1)  # noqa: F821
        j += 1
    queue = pool.queue  # (compiled: a BlockQueue, its count a C field)
    queue.count -= len(table) - shared
    pool.shared += shared
    return table, shared


def settle(key_of: list, rc: list[int], filed: list[int] | None, last: list[int] | None, zeroed: list[int],
           now: int) -> tuple[list[int], list[int]]:
    """Split blocks that reached refcount 0 into the unkeyed (truly free) and the keyed (cached: rc 0,
    filed by release `now` unless filed is None, and their last use now unless last is None), each in
    order."""
    free: list[int] = []
    cached: list[int] = []
    if filed is None:
        for b in zeroed:
            if key_of[b] is None:
                free.append(b)
            else:
                cached.append(b)
                rc[b] = 0
        return free, cached
    for b in zeroed:
        if key_of[b] is None:
            free.append(b)
        else:
            cached.append(b)
            rc[b] = 0
            filed[b] = now
            if last is not None:
                last[b] = now
    return free, cached


def settle_run(key_of: list, rc: list[int], filed: list[int], last: list[int], depth: list[int],
               zeroed: list[int], now: int) -> tuple[list[int], list[int], bool]:
    """settle(key_of, rc, filed, last, zeroed, now), and whether the cached blocks' depths ascend (as
    BlockQueue.add_run checks), in the same pass. The usual release, keyed blocks then unkeyed ones (a
    table's computed blocks, then those no key was given), is split by slicing."""
    prev = -1
    ascending = True
    cut = -1  # the position of the first unkeyed block
    mixed = False  # a keyed block after an unkeyed one
    for j, b in enumerate(zeroed):
        if key_of[b] is None:
            if cut < 0:
                cut = j
        else:
            if cut >= 0:
                mixed = True
            rc[b] = 0
            filed[b] = now
            last[b] = now
            d = depth[b]
            if d <= prev:
                ascending = False
            prev = d
    if cut < 0:
        return [], zeroed[:], ascending
    if not mixed:
        return zeroed[cut:], zeroed[:cut], ascending
    return [b for b in zeroed if key_of[b] is None], [b for b in zeroed if key_of[b] is not None], ascending


def settle_drop(pool: HashCachePool, ids: list[int], now: int) -> tuple[list, list, list, bool]:
    """pool.drop_refs(ids) and settle_run of the blocks it brings to refcount 0, in one pass over ids:
    (blocks still referenced, the unkeyed and the keyed of those at 0, whether the keyed ones' depths
    ascend). The usual release, the blocks held elsewhere too leading (a shared prefix), then the table's
    own blocks, keyed then unkeyed, is split by slicing; anything else is sorted block by block. A block
    at rc 0 (cached, no table holds it) raises, as drop_refs, where it reads the counts (pool.shared)."""
    rc = pool.rc
    key_of = pool.key_of
    filed = pool.filed
    last = pool.last
    depth = pool.depth
    shared = pool.shared
    n = len(ids)
    j = 0
    if shared and _COMPILED:  # (hash_pool.pxd's C inlines: _at(x, i) reads x[i] as a C index, _put_count
        while j < n:  # stores a refcount)
            b = _at(ids, j)  # noqa: F821
            r = _at(rc, b)  # noqa: F821
            if r <= 1:
                break
            _put_count(rc, b, r - 1)  # noqa: F821
            j += 1
    elif shared:
        while j < n:  # the leading run of blocks held elsewhere too
            b = ids[j]
            r = rc[b]
            if r <= 1:
                break
            rc[b] = r - 1
            j += 1
    lo = j  # ids[:lo] kept
    prev = -1
    ascending = True
    cut = -1  # the position of the first unkeyed block at 0
    mixed = False  # a keyed block after an unkeyed one
    if _COMPILED:  # (the loop below, by hash_pool.pxd's C inlines: _store stores unchecked)
        while j < n:
            b = _at(ids, j)  # noqa: F821
            if shared and _at(rc, b) != 1:  # noqa: F821
                break
            if key_of[b] is None:
                if cut < 0:
                    cut = j
            else:
                if cut >= 0:
                    mixed = True
                _store(rc, b, 0)  # noqa: F821
                _store(filed, b, now)  # noqa: F821
                _store(last, b, now)  # noqa: F821
                d = _at(depth, b)  # noqa: F821
                if d <= prev:
                    ascending = False
                prev = d
            j += 1
    else:
        while j < n:
            b = ids[j]
            if shared and rc[b] != 1:  # held elsewhere too, or a double free: block by block from here
                break
            if key_of[b] is None:
                if cut < 0:
                    cut = j
            else:
                if cut >= 0:
                    mixed = True
                rc[b] = 0
                filed[b] = now
                last[b] = now
                d = depth[b]
                if d <= prev:
                    ascending = False
                prev = d
            j += 1
    kept = ids[:lo]
    if cut < 0:
        free = []
        cached = ids[lo:j]
    elif not mixed:
        free = ids[cut:j]
        cached = ids[lo:cut]
    else:
        rest = ids[lo:j]
        free = [b for b in rest if key_of[b] is None]
        cached = [b for b in rest if key_of[b] is not None]
    while j < n:
        b = ids[j]
        r = rc[b]
        if r > 1:
            if _COMPILED:
                _put_count(rc, b, r - 1)  # noqa: F821
            else:
                rc[b] = r - 1
            kept.append(ids[j])
        elif r == 1:
            if key_of[b] is None:
                free.append(ids[j])
            else:
                rc[b] = 0
                filed[b] = now
                last[b] = now
                cached.append(ids[j])
                d = depth[b]
                if d <= prev:
                    ascending = False
                prev = d
        else:
            pool.shared = shared - len(kept)
            raise ValueError(f"double free of block {b}")
        j += 1
    pool.shared = shared - len(kept)
    return kept, free, cached, ascending


def hold(rc: list[int], table: list[int], discard) -> int:
    """Add a reference to each block of table; return how many were referenced already (the others were
    evictable: discard(b) each, unless discard is None)."""
    shared = 0
    for b in table:
        r = rc[b]
        if r:
            shared += 1
        elif discard is not None:
            discard(b)
        rc[b] = r + 1
    return shared


def forget(by_key: dict, key_of: list, rc: list[int], ids: list[int], spill: list | None) -> None:
    """Evicted blocks lose their keys (appended to spill unless None) and become free blocks (rc 1)."""
    if _COMPILED:  # (the loop below as hash_pool.pxd's C inline)
        _forget_run(by_key, key_of, rc, ids, spill)  # noqa: F821
        return
    for b in ids:
        k = key_of[b]
        if spill is not None:
            spill.append(k)
        del by_key[k]
        key_of[b] = None
        rc[b] = 1


def register(pool: HashCachePool, keys: list, table: list[int], lo: int, hi: int) -> None:
    """Give blocks table[lo:hi] the keys keys[lo:hi] (block j at depth j), last use and birth now, each
    unless its key is cached already (it stays private) or it has a key."""
    by_key = pool.by_key
    key_of = pool.key_of
    last = pool.last
    depth = pool.depth
    birth = pool.birth if pool.counts_birth else None
    uses = pool.uses if pool.counts_uses else None
    now = pool.clock
    depths = _depths(hi)
    if _COMPILED:  # (the loop below as hash_pool.pxd's C inline)
        _register_run(by_key, key_of, last, depth, birth, uses, keys, table, lo, hi, now, depths)  # noqa: F821
        return
    for j in range(lo, hi):
        k = keys[j]
        b = table[j]
        if key_of[b] is None and by_key.setdefault(k, b) is b:  # (b is in no entry: its key is None)
            key_of[b] = k
            last[b] = now
            depth[b] = j if j < 256 else depths[j]  # (ints below 256 are cached by Python itself)
            if birth is not None:
                birth[b] = now
            if uses is not None:
                uses[b] = 1
