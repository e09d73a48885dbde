"""Paged KV manager: per-sequence block tables over a BlockPool, with fork, copy-on-write and swap."""

from __future__ import annotations

from kvsim.kvcache.block_pool import BlockPool, restore, slot_state
from kvsim.kvcache.breakdown import paged_breakdown
from kvsim.kvcache.checks import check_refcounts
from kvsim.kvcache.host_blocks import HostBlocks
from kvsim.kvcache.view import NO_HIT, ContextSums, Hit


class PagedKVManager:
    """PagedAttention-style block tables (vLLM's block manager, without prefix caching).

    A sequence's slots are sized by `allocate(seq, num_tokens)`: afterwards its block table covers
    num_tokens slots. Writing into a last block that is shared (after `fork`) and partially filled copies
    it first (copy-on-write). Token counts are those of the last `allocate`/`fork` call: the engine calls
    `allocate` only when a sequence needs a new block or a copy, not for every token.

    `shared_dup_tokens` counts token slots reachable from more than one table beyond the first, so that
    token states = sum of sequence lengths - shared_dup_tokens.
    """

    __slots__ = ("pool", "block_size", "tables", "ntok", "shared_dup_tokens", "cow_copies",
                 "swapped", "swap_capacity_blocks", "swap_used_blocks", "host", "tiers")

    def __init__(self, num_blocks: int, block_size: int, swap_capacity_blocks: int = 0) -> None:
        self.pool = BlockPool(num_blocks, block_size)
        self.block_size = block_size
        self.tables: dict[int, list[int]] = {}
        self.ntok: dict[int, int] = {}
        self.shared_dup_tokens = 0
        self.cow_copies = 0
        self.swapped: dict[int, tuple[list[int], int]] = {}
        self.swap_capacity_blocks = swap_capacity_blocks
        self.swap_used_blocks = 0
        self.host = HostBlocks()
        self.tiers = None
        """KV tiers below the GPU cache (kvsim/kvcache/tiers.py TierChain): none without a prefix cache."""

    windows: tuple[int, ...] = ()
    """Window caps for ContextSums.windowed: none (every layer keeps every token)."""
    last_grow_delta: int = 1
    """Blocks the last successful grow_one_block added: always one here."""
    block_pages: int = 1

    @property
    def num_blocks(self) -> int:
        return self.pool.num_blocks

    @property
    def num_free_blocks(self) -> int:
        return self.free_blocks()

    def free_blocks(self) -> int:
        """num_free_blocks as a method (a C call when compiled): the pool's `num_free`."""
        pool = self.pool
        return pool.free_count if type(pool) is BlockPool else pool.free_now()

    @property
    def used_blocks(self) -> int:
        return self.pool.num_used

    @property
    def cached_blocks(self) -> int:
        """Blocks kept only for prefix reuse (refcount 0): none without a prefix cache."""
        return 0

    def _needs_cow(self, table: list[int], ntok: int) -> bool:
        return bool(table) and ntok % self.block_size != 0 and self.pool.rc[table[-1]] > 1

    def blocks_needed(self, seq: int, num_tokens: int) -> int:
        """New blocks `allocate(seq, num_tokens)` would take (copy-on-write included)."""
        table = self.tables.get(seq)
        if table is None:
            return -(-num_tokens // self.block_size)
        ntok = self.ntok[seq]
        if num_tokens <= ntok:
            return 0
        need = -(-num_tokens // self.block_size) - len(table)
        return need + (1 if self._needs_cow(table, ntok) else 0)

    def group_blocks_needed(self, seqs: list[int], num_tokens: int) -> int:
        """New blocks allocating num_tokens for each of seqs, in order, takes: as blocks_needed summed,
        less one copy per shared last block that only these seqs hold (its last writer needs no copy)."""
        need = 0
        sharers: dict[int, int] = {}
        for s in seqs:
            need += self.blocks_needed(s, num_tokens)
            table = self.tables.get(s)
            if table is not None and num_tokens > self.ntok[s] and self._needs_cow(table, self.ntok[s]):
                sharers[table[-1]] = sharers.get(table[-1], 0) + 1
        rc = self.pool.rc
        return need - sum(1 for b, c in sharers.items() if c == rc[b])

    def reserve(self, seq: int, num_tokens: int) -> bool:
        """allocate() of slots whose KV has not arrived (no prefix cache here: the same)."""
        return PagedKVManager.allocate(self, seq, num_tokens)

    def allocate(self, seq: int, num_tokens: int) -> bool:
        """Grow seq's table to cover num_tokens slots. All or nothing: False if blocks are short."""
        pool = self.pool
        free = pool.free_count if type(pool) is BlockPool else pool.free_now()
        table = self.tables.get(seq)
        if table is None:  # (blocks_needed, inline)
            extra = -(-num_tokens // self.block_size)
            if extra > free:
                return False
            table = self.tables[seq] = []
        else:
            ntok = self.ntok[seq]
            if num_tokens <= ntok:
                return True
            extra = -(-num_tokens // self.block_size) - len(table)
            cow = self._needs_cow(table, ntok)
            if extra + cow > free:
                return False
            if cow:
                old = table[-1]
                table[-1] = pool.allocate()
                pool.decref(old)
                self.shared_dup_tokens -= ntok % self.block_size
                self.cow_copies += 1
        if extra == 1:
            table.append(pool.allocate())
        elif extra > 1:
            table.extend(pool.allocate_many(extra))
        self.ntok[seq] = num_tokens
        return True

    def grow_one_block(self, seq: int, num_tokens: int) -> bool:
        """Fast path of allocate for an unshared sequence whose next token starts a new block: take one
        block (evicting a cached one if none is free) if the pool has one (True), else change nothing
        (False; the caller falls back)."""
        bid = self.pool.take()
        if bid < 0:
            bid = self._take_evicting()
            if bid < 0:
                return False
        self.tables[seq].append(bid)
        self.ntok[seq] = num_tokens
        return True

    def _take_evicting(self) -> int:
        """Hook of grow_one_block when no block is truly free: a block from evicting a cached one, or -1
        (nothing changed). A prefix cache overrides it to act on the eviction (hash: write-back)."""
        return self.pool.take_evicting()

    def grow_each(self, seqs: list[int], num_tokens: list[int]) -> bool:
        """grow_one_block for each of seqs in turn (seqs[i] then holds num_tokens[i] slots) when the pool
        has a block for each (truly free, or from evicting a cached one), the same blocks in the same order
        and the same evictions (True); else change nothing (False: the caller grows them one by one,
        preempting as need be)."""
        if not seqs:
            return True
        ids = self._take_each(len(seqs))
        if ids is None:
            return False
        tables = self.tables
        ntok = self.ntok
        for seq, bid, n in zip(seqs, ids, num_tokens, strict=True):
            tables[seq].append(bid)
            ntok[seq] = n
        return True

    def grow_due(self, entries: list[tuple], offset: int) -> bool:
        """grow_each over entries, tuples whose [2] is a sequence and [3] + offset the slots it then holds
        (the scheduler's due list, kvsim/engine/block_growth.py), without building the two lists."""
        ids = self._take_each(len(entries))
        if ids is None:
            return False
        _append_each(self.tables, self.ntok, entries, ids, offset)
        return True

    def _take_each(self, k: int) -> list[int] | None:
        """Hook of grow_each: k blocks as k grow steps take them (BlockPool.take_each), or None (nothing
        changed). A prefix cache overrides it to act on the evictions (hash: write-back)."""
        return self.pool.take_each(k)

    def admit(self, seq: int, req, prompt_tokens: int, output_tokens: int) -> Hit:
        """No prefix cache here: nothing is served from cache."""
        return NO_HIT

    def peek_hit(self, req, prompt_tokens: int) -> Hit:
        """Prompt tokens admit would find cached, without changing anything: none here."""
        return NO_HIT

    def token_states(self, sums: ContextSums) -> int:
        """Slots holding real KV: every sequence's tokens, a slot shared by several tables counted once."""
        return sums.tokens - self.shared_dup_tokens

    def has(self, seq: int) -> bool:
        return seq in self.tables

    # ---- capabilities every manager answers (kvsim/kvcache/interface.py) ----------------------
    @property
    def evictions(self) -> int:
        """Cached blocks evicted so far: none without a prefix cache."""
        return 0

    def refuse_reason(self, req, output_tokens: int) -> str | None:
        """Why a request could never be admitted beyond the pool-size check the engine makes: never here."""
        return None

    def reparent(self, seq: int, parent: int) -> None:
        """Beam search: seq (a pruned beam) continues from parent; its table becomes a share of parent's."""
        self.free(seq)
        self.fork(parent, seq)

    def breakdown(self, token_states: int, table_blocks: int, head_req=None,
                  head_output: int = 0) -> tuple[int, int, int, int, int]:
        """The kv_* breakdown columns (kvsim/kvcache/breakdown.py): paged, nothing reserved."""
        return paged_breakdown(self, token_states, table_blocks)

    def capacity_tokens(self, seq: int) -> int:
        """Token slots seq can fill before it needs another allocation."""
        return len(self.tables[seq]) * self.block_size

    def last_block_shared(self, seq: int) -> bool:
        """True when seq's last block is partially filled and shared (its next write copies it)."""
        return self._needs_cow(self.tables[seq], self.ntok[seq])

    def fork(self, parent: int, child: int) -> None:
        """Child shares every block of parent (refcounts + 1)."""
        if child in self.tables or child in self.swapped:
            raise ValueError(f"fork onto existing sequence {child}")
        table = self.tables[parent]
        for bid in table:
            self.pool.incref(bid)
        self.tables[child] = list(table)
        self.ntok[child] = self.ntok[parent]
        self.shared_dup_tokens += self.ntok[parent]

    def set_computed_tokens(self, seq: int, num_tokens: int) -> None:
        """No prefix cache: nothing to register at free."""

    def free(self, seq: int) -> int:
        """Drop seq's table; return how many blocks became free."""
        table = self.tables.pop(seq)
        ntok = self.ntok.pop(seq)
        kept = self.pool.release(table)
        if kept:
            bs = self.block_size
            last = table[-1]
            self.shared_dup_tokens -= len(kept) * bs
            if kept[-1] == last and ntok % bs:
                self.shared_dup_tokens += bs - ntok % bs
        return len(table) - len(kept)

    def num_blocks_of(self, seq: int) -> int:
        return len(self.tables[seq])

    def private_blocks(self, seq: int) -> int:
        """Blocks of seq's table no other table (or cache entry) references: what free(seq) gives back
        to the pool (the prefix managers' cached blocks stay counted free)."""
        rc = self.pool.rc
        return sum(1 for b in self.tables[seq] if rc[b] == 1)

    def unique_blocks(self, seqs: list[int]) -> int:
        return len({b for s in seqs for b in self.tables[s]})

    def can_swap_out(self, seqs: list[int]) -> bool:
        return self.swap_used_blocks + self.unique_blocks(seqs) <= self.swap_capacity_blocks

    def swap_out(self, seqs: list[int]) -> int:
        """Move the sequences' blocks to host memory, keeping their sharing; return blocks moved.

        Host blocks get fresh ids (GPU ids are reused once freed); a host block is released when the last
        swapped sequence holding it comes back."""
        remap: dict[int, int] = {}
        for s in seqs:
            host_table = self.host.store(self.tables[s], remap)
            ntok = self.ntok[s]
            self.free(s)
            self.swapped[s] = (host_table, ntok)
        self.swap_used_blocks += len(remap)
        return len(remap)

    def swap_blocks_needed(self, seqs: list[int]) -> int:
        return len({h for s in seqs for h in self.swapped[s][0]})

    def swap_in(self, seqs: list[int]) -> int:
        """Bring swapped sequences back onto fresh GPU blocks, shared where their host blocks were; return
        blocks moved (the caller checked there is room)."""
        remap: dict[int, int] = {}
        for s in seqs:
            host_table, ntok = self.swapped.pop(s)
            table, released = self.host.load(host_table, remap, self.pool)
            self.swap_used_blocks -= released
            self.tables[s] = table
            self.ntok[s] = ntok
        seen: set[int] = set()
        bs = self.block_size
        for s in seqs:
            ntok = self.ntok[s]
            for i, b in enumerate(self.tables[s]):
                if b in seen:
                    self.shared_dup_tokens += min(bs, ntok - i * bs)
                else:
                    seen.add(b)
        return len(remap)

    def __reduce__(self):
        """Copies and pickles (an extension type when compiled, whose subclasses add slots of their own): the
        class and every field's value."""
        return restore, (type(self),), slot_state(self, PagedKVManager.__slots__)

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def check_invariants(self) -> int:
        """Raise AssertionError if refcounts, tables and the free list disagree (over the blocks with
        state, BlockPool.known: the others were never handed out); return the entries read (the blocks
        with state, the table entries, the host blocks)."""
        pool = self.pool
        counts = [0] * pool.known
        for table in self.tables.values():
            for b in table:
                assert 0 <= b < pool.known, f"block {b} never handed out"
                counts[b] += 1
        check_refcounts(pool, counts)
        free = pool.known_free_ids()
        assert len(free) + sum(1 for c in counts if c > 0) == pool.known, "leaked block"
        for s, table in self.tables.items():
            assert len(table) == -(-self.ntok[s] // self.block_size), f"table of seq {s} mis-sized"
        dup = 0
        seen: set[int] = set()
        bs = self.block_size
        for s, table in self.tables.items():
            for i, b in enumerate(table):
                if b in seen:
                    dup += min(bs, self.ntok[s] - i * bs)
                seen.add(b)
        assert dup == self.shared_dup_tokens, "shared token count drifted"
        host = {h for table, _ in self.swapped.values() for h in table}
        assert len(host) == self.swap_used_blocks == len(self.host), "host block count drifted"
        assert self.swap_used_blocks <= self.swap_capacity_blocks, "swap space over capacity"
        return pool.known + sum(counts) + len(host)


def _append_each(tables: dict[int, list[int]], ntok: dict[int, int], entries: list[tuple], ids: list[int],
                 offset: int) -> None:
    """grow_due's table updates: entries[i]'s sequence takes block ids[i], holding its base + offset slots."""
    i = 0
    for e in entries:
        seq = e[2]
        table = tables[seq]
        table.append(ids[i])
        base = e[3]  # (compiled: a C integer, the sum made one Python int)
        ntok[seq] = base + offset
        i += 1
