# cython: boundscheck=False
"""Physical KV block pool: refcounts and an O(1) free list, state only for blocks handed out."""

from __future__ import annotations

from operator import length_hint

_COMPILED = not __file__.endswith(".py")
"""Compiled by Cython (block_pool.pxd): drop runs its own C loop over the ids."""

CHUNK = 4096
"""Never-used block ids put on the free stack at a time (and per-block state made for them)."""


class NoFreeBlocks(RuntimeError):
    """Raised when a block is requested from an empty pool (the caller should have checked)."""


class BlockPool:
    """`num_blocks` physical blocks of `block_size` token slots: the one owner of the free list, the base of
    the caching pools (prefix_hash.HashCachePool, radix.RadixPool).

    Free block ids live on a stack (list), so allocate and free are O(1); freeing pushes the id back, so the
    most recently freed block is reused first, and never-used blocks come out in ascending order, 0 first.
    `free_count` counts the truly free blocks.

    Refcounts: `rc[b]` counts the block tables holding a referenced block b (and is 0 for a caching pool's
    cached, unreferenced block), but a truly free block keeps 1 there, the value it had when its last
    table let it go: so taking a block from the stack and giving back blocks no other table holds write
    nothing per block (a plain pool's whole table goes back in one list operation). `shared` counts the
    references beyond the first (the sum of rc[b] - 1 over blocks held twice or more): while it is 0 every
    referenced block has rc 1 and `drop_refs` reads nothing. `refcount` is the exact list (free blocks 0),
    built on demand for checks and tests. A block released twice is caught by the checks (on the free
    list twice), not by `drop_refs`, unless it was cached (rc 0).

    Memory follows the blocks handed out, not num_blocks: only blocks 0 .. known - 1 have state (a
    refcount, a place on the stack, a subclass's per-block fields); the ids from `known` on are free and
    implicit, below the bottom of the stack, and come onto it CHUNK at a time as the stack runs empty.
    The stack is never empty while a free block exists, and the ids come out in exactly the order a stack
    holding all of them would give.

    Managers take blocks with one call per allocation (`take`, `take_evicting`, `take_free`, `allocate`,
    `allocate_many`), never per block. A caching pool overrides the hooks only: `_extend` (its per-block
    state), `_evict` (which cached blocks to give up), `release` (where blocks reaching refcount 0 go:
    `_put_free` for the truly free ones) and `num_free` / `num_used` (its cached blocks counted free).
    """

    __slots__ = ("num_blocks", "block_size", "rc", "shared", "_free", "known", "free_count")

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 0 or block_size < 1:
            raise ValueError("num_blocks must be >= 0 and block_size >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.rc: list[int] = []
        """Per block with state: the tables holding it (cached: 0; truly free: 1, see the class docstring)."""
        self.shared = 0
        """References beyond the first, over all blocks (0: no block is held by two tables)."""
        self._free: list[int] = []
        self.known = 0
        """Blocks with state: ids below it (len(rc)); the rest were never handed out."""
        self.free_count = num_blocks
        """Truly free blocks (not referenced, not cached): the stack plus the never-used ids. Read-only
        outside this class."""
        self._more(CHUNK)

    def _more(self, k: int) -> None:
        """Give the next min(k, never-known) ids state and put them at the bottom of the stack (below every
        id there: they come out after all of them, ascending)."""
        lo = self.known
        hi = min(self.num_blocks, lo + k)
        if hi > lo:
            self._free[:0] = range(hi - 1, lo - 1, -1)
            self._extend(hi - lo)
            self.known = hi

    # ---- hooks of the caching pools ------------------------------------------------------------
    def _extend(self, k: int) -> None:
        """Per-block state for k more blocks, free (subclasses add theirs)."""
        self.rc += [1] * k

    def _evict(self, k: int) -> list[int]:
        """Give up at least k cached, unreferenced blocks (forgetting what they cached, their rc set to 1 as
        every free block's) and return them, in the order they go onto the free list; [] (changing nothing)
        when fewer than k are cached. The plain pool caches nothing."""
        return []

    def _put_free(self, ids: list[int]) -> None:
        """Push ids (unreferenced, uncached blocks with state, rc 1) onto the free list, in order."""
        self._free += ids
        self.free_count += len(ids)

    # ---- counts --------------------------------------------------------------------------------
    @property
    def refcount(self) -> list[int]:
        """The tables holding each block with state, truly free blocks 0: a new list, O(blocks with
        state), for checks and tests (the hot paths read `rc` of blocks they know are held or cached)."""
        out = list(self.rc)
        for b in self._free:
            out[b] -= 1
        return out

    @property
    def num_free(self) -> int:
        """Blocks an allocation can have: truly free (caching pools: plus evictable)."""
        return self.free_count

    def free_now(self) -> int:
        """num_free as a method (a C call when compiled; the caching pools override both)."""
        return self.free_count

    @property
    def num_used(self) -> int:
        """Blocks referenced by block tables."""
        return self.num_blocks - self.free_count

    # ---- taking blocks ---------------------------------------------------------------------------
    def evict(self, k: int) -> None:
        """Make at least k more blocks truly free (caching pools evict cached, unreferenced blocks)."""
        got = self._evict(k)
        if not got:
            raise NoFreeBlocks("block pool exhausted")
        self._put_free(got)

    def take(self) -> int:
        """A truly free block, its refcount now 1; -1 (nothing changed) when none is: the caller may then
        `take_evicting`. A grow step's one call."""
        free = self._free
        if not free:
            return -1
        bid = free.pop()
        if not free and self.known < self.num_blocks:
            self._more(CHUNK)
        self.free_count -= 1
        return bid

    def take_evicting(self) -> int:
        """take() when no block is truly free (it returned -1): evict cached blocks (the policy's first
        victim comes out) and take one; -1 (nothing changed) when none is cached."""
        got = self._evict(1)
        if not got:
            return -1
        free = self._free
        free += got
        bid = free.pop()  # the stack was empty: every id is known, no chunk to add
        self.free_count += len(got) - 1
        return bid

    def take_free(self, k: int) -> list[int] | None:
        """k truly free blocks (the same ids, in the same order, as k calls of take), or None (nothing
        changed) when fewer than k are: never evicts."""
        if k > self.free_count:
            return None
        free = self._free
        n = len(free)
        if k > n:
            self._more(k - n)
            n = len(free)
        if _COMPILED and k <= 32:  # (a grow step's few blocks: popped in a C loop, no slice objects)
            ids = []
            for _j in range(k):
                ids.append(free.pop())
        else:
            ids = free[: -k - 1 : -1]
            del free[n - k:]
        if not free and self.known < self.num_blocks:
            self._more(CHUNK)
        self.free_count -= k
        return ids

    def take_each(self, k: int) -> list[int] | None:
        """k blocks, the same ids in the same order (and the pool left as) k grow steps' calls of take,
        each followed by take_evicting when it returns -1, would give; None (nothing changed) when fewer
        than k can be had (`num_free`): the grow step of a batch of sequences."""
        n = self.free_count
        if k <= n:
            return self.take_free(k)
        if k > self.free_now():
            return None
        ids = self.take_free(n) if n else []
        ids += self._evict_taken(k - n)
        return ids

    def _evict_taken(self, m: int) -> list[int]:
        """m blocks as m calls of take_evicting, the stack empty and every id known, take them (evicting
        as they go); the caller checked that m can be had. Hook: a pool whose `_evict(1)` gives up one block
        at a time may evict the m at once."""
        free = self._free
        out: list[int] = []
        while len(out) < m:
            if not free:
                got = self._evict(1)
                free += got
                self.free_count += len(got)
            out.append(free.pop())
            self.free_count -= 1
        return out

    def allocate(self) -> int:
        """Take a free block (evicting a cached one if there is none); its refcount becomes 1. Raises
        NoFreeBlocks when there is none to evict either."""
        free = self._free
        if not free:
            bid = self.take_evicting()
            if bid < 0:
                raise NoFreeBlocks("block pool exhausted")
            return bid
        bid = free.pop()
        if not free and self.known < self.num_blocks:
            self._more(CHUNK)
        self.free_count -= 1
        return bid

    def allocate_many(self, k: int) -> list[int]:
        """Take k free blocks, evicting what is short (the same ids, in the same order, as k calls of
        allocate)."""
        if k <= 0:
            return []
        free = self._free
        short = k - len(free)
        if short > 0:
            if self.known < self.num_blocks:
                self._more(short)
                short = k - len(free)
            if short > 0:
                got = self._evict(short)
                if not got:
                    raise NoFreeBlocks("block pool exhausted")
                free += got
                self.free_count += len(got)
        ids = free[: -k - 1 : -1]
        del free[-k:]
        if not free and self.known < self.num_blocks:
            self._more(CHUNK)
        self.free_count -= k
        return ids

    def drop_refs(self, ids: list[int]) -> tuple[list[int], list[int]]:
        """Drop one reference from each block in ids; return (blocks still referenced, blocks now at
        refcount 0, their rc left at 1), each in order. Raises on a block at rc 0 (a cached block no table
        holds). With no block held twice (`shared` 0) every block reaches 0 and nothing is read."""
        if not self.shared:
            return [], ids
        kept: list[int] = []
        try:
            zeroed = drop(self.rc, ids, kept)
        finally:
            self.shared -= len(kept)  # (a reference beyond the first went per block kept)
        return kept, zeroed

    def release(self, ids: list[int]) -> list[int]:
        """Drop one reference from each block in ids (as decref would); blocks reaching zero go back to
        the free list. Return the blocks that stayed referenced, in order."""
        kept, zeroed = self.drop_refs(ids)
        self._free += zeroed
        self.free_count += len(zeroed)
        return kept

    def incref(self, bid: int) -> None:
        r = self.rc[bid]
        if r <= 0:
            raise ValueError(f"incref of free block {bid}")
        self.rc[bid] = r + 1
        self.shared += 1

    def decref(self, bid: int) -> bool:
        """Drop one reference; return True when the block reached refcount 0."""
        return not self.release([bid])

    def free_ids(self) -> list[int]:
        """Every free block id, bottom of the stack first (the next allocate takes the last). O(free
        blocks): for tests of small pools; invariant checks use known_free_ids."""
        return [*range(self.num_blocks - 1, self.known - 1, -1), *self._free]

    def __reduce__(self):
        """Copies and pickles (an extension type when compiled, whose subclasses add slots of their own): the
        class and every field's value."""
        return restore, (type(self),), slot_state(self, BlockPool.__slots__)

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def known_free_ids(self) -> list[int]:
        """The free blocks among those with state (ids below `known`): the stack, bottom first. For
        invariant checks: asserts free_count agrees with the stack."""
        assert self.free_count == len(self._free) + self.num_blocks - self.known, "free block count drifted"
        return list(self._free)


def restore(cls: type) -> object:
    """An empty instance of cls (its __init__ not run), for __reduce__: the state comes by __setstate__."""
    return cls.__new__(cls)


def slot_state(obj: object, base: tuple[str, ...]) -> dict:
    """obj's fields for __reduce__: the base class's (base, declared there) and every slot along its class's
    hierarchy (and its __dict__, if it has one), unset ones left out."""
    state = {}
    names = list(base)
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names += (slots,) if isinstance(slots, str) else slots
    for name in names:
        if name not in state and name not in ("__dict__", "__weakref__"):
            try:
                state[name] = getattr(obj, name)
            except AttributeError:
                pass
    state.update(getattr(obj, "__dict__", ()))
    return state


def drop(rc: list[int], ids: list[int], kept: list[int]) -> list[int]:
    """BlockPool.drop_refs's loop: drop one reference from each block in ids, append the blocks still
    referenced to kept (so far, when it raises) and return those now at refcount 0 (their rc left at 1)."""
    n = len(ids)
    zeroed: list[int] = []
    start = 0  # ids[start:] up to the block under the loop were held once: they reached 0
    if _COMPILED:  # (the same, indexed: C integers, no iterator)
        i = 0
        while i < n:
            b = ids[i]
            r = rc[b]
            if r == 1:
                i += 1
                continue
            if i > start:
                zeroed += ids[start:i]
            if r < 1:
                raise ValueError(f"double free of block {b}")
            rc[b] = r - 1
            kept.append(ids[i])
            i += 1
            while i < n:  # the run of blocks held elsewhere too that b starts
                b = ids[i]
                r = rc[b]
                if r > 1:
                    rc[b] = r - 1
                    kept.append(ids[i])
                    i += 1
                elif r == 1:
                    start = i
                    i += 1
                    break
                else:
                    raise ValueError(f"double free of block {b}")
            else:
                return zeroed
        if not kept:
            return ids
        if start < n:
            zeroed += ids[start:]
        return zeroed
    it = iter(ids)
    for b in it:
        if rc[b] == 1:  # the usual case: nothing written, each run of them sliced off at its end
            continue
        i = n - length_hint(it) - 1  # b's index
        if i > start:
            zeroed += ids[start:i]
        r = rc[b]
        if r < 1:
            raise ValueError(f"double free of block {b}")
        rc[b] = r - 1
        kept.append(b)
        for b in it:  # the run of blocks held elsewhere too that b starts
            r = rc[b]
            if r > 1:
                rc[b] = r - 1
                kept.append(b)
            elif r == 1:
                start = n - length_hint(it) - 1
                break
            else:
                raise ValueError(f"double free of block {b}")
        else:
            return zeroed
    if not kept:
        return ids
    if start < n:
        zeroed += ids[start:]
    return zeroed
