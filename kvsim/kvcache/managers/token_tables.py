"""Per-sequence page tables of one cache group whose KV grows with the context, over a shared pool.

A sequence's table lists the pages of its logical blocks `first, first + 1, ...` (`first` is 0 here;
SlidingTables moves it as the window slides). Sharing, copy-on-write of a shared partially filled last
page, and swapping work as in the paged manager (kvsim/kvcache/paged.py): `dup` counts token slots
reachable from a second (third, ...) table, `cow_copies` the pages copied.
"""

from __future__ import annotations

from kvsim.kvcache.block_pool import BlockPool
from kvsim.kvcache.host_blocks import HostBlocks


class TokenTables:
    """Page tables of one token-paged cache group (full, MLA or compressed layers)."""

    __slots__ = ("pool", "bs", "tables", "first", "ntok", "dup", "cow_copies", "swapped", "host")

    def __init__(self, pool: BlockPool, block_size: int) -> None:
        self.pool = pool
        self.bs = block_size
        self.tables: dict[int, list[int]] = {}
        self.first: dict[int, int] = {}
        self.ntok: dict[int, int] = {}
        self.dup = 0
        self.cow_copies = 0
        self.swapped: dict[int, tuple[list[int], int, int]] = {}
        self.host = HostBlocks()

    @classmethod
    def for_group(cls, pool: BlockPool, block_size: int, group, cache_index: int | None) -> TokenTables:
        """The tables of cache group `group` (a kvsim.specs.pages.CacheGroup); cache_index: the group's
        index for the prefix cache's keys (the cached classes only)."""
        return cls(pool, block_size)

    # ---- sizing --------------------------------------------------------------------------
    def _needs_cow(self, seq: int) -> bool:
        table = self.tables[seq]
        return bool(table) and self.ntok[seq] % self.bs != 0 and self.pool.rc[table[-1]] > 1

    def _end(self, seq: int) -> int:
        """Logical index one past seq's last page."""
        return self.first[seq] + len(self.tables[seq])

    def freeable(self, seq: int, computed: int) -> int:
        """Pages `trim(seq, computed)` would give back to the pool (sliding windows); 0 here."""
        return 0

    def blocks_needed(self, seq: int, num_tokens: int) -> int:
        """Net new pages `allocate(seq, num_tokens)` takes (copy-on-write included, freed pages counted
        back)."""
        if seq not in self.tables:
            return -(-num_tokens // self.bs)
        if num_tokens <= self.ntok[seq]:
            return 0
        need = -(-num_tokens // self.bs) - self._end(seq) + (1 if self._needs_cow(seq) else 0)
        return need - self.freeable(seq, min(self.ntok[seq], num_tokens - 1))

    def group_blocks_needed(self, seqs: list[int], num_tokens: int) -> int:
        """As blocks_needed summed over seqs, less one copy per shared last page only these seqs hold."""
        need = 0
        sharers: dict[int, int] = {}
        for s in seqs:
            need += self.blocks_needed(s, num_tokens)
            if s in self.tables and num_tokens > self.ntok[s] and self._needs_cow(s):
                last = self.tables[s][-1]
                sharers[last] = sharers.get(last, 0) + 1
        rc = self.pool.rc
        return need - sum(1 for b, c in sharers.items() if c == rc[b])

    def capacity_tokens(self, seq: int) -> int:
        return self._end(seq) * self.bs

    def last_block_shared(self, seq: int) -> bool:
        return self._needs_cow(seq)

    def held(self, seq: int) -> int:
        return len(self.tables[seq])

    def private_pages(self, seq: int) -> int:
        """Pages of seq's table no other table (or cache entry) references: what free(seq) gives back."""
        rc = self.pool.rc
        return sum(1 for b in self.tables[seq] if rc[b] == 1)

    # ---- allocation ----------------------------------------------------------------------
    def allocate(self, seq: int, num_tokens: int) -> None:
        """Cover num_tokens slots (the caller checked the pool has blocks_needed pages): give back what the
        window left (sliding), copy a shared partially filled last page, then take the new pages."""
        table = self.tables.get(seq)
        if table is None:
            table = self.tables[seq] = []
            self.first[seq] = 0
            self.ntok[seq] = 0
        else:
            computed = self.ntok[seq]
            if num_tokens <= computed:
                return
            self.trim(seq, min(computed, num_tokens - 1))
            if self._needs_cow(seq):
                old = table[-1]
                table[-1] = self.pool.allocate()
                self.pool.release([old])
                self.dup -= computed % self.bs
                self.cow_copies += 1
        extra = -(-num_tokens // self.bs) - self._end(seq)
        if extra > 0:
            table.extend(self.pool.allocate_many(extra))
        self.ntok[seq] = num_tokens

    def grow_one(self, seq: int, num_tokens: int) -> None:
        """A single decode token starts a new logical block: one page (the caller checked the pool)."""
        self.tables[seq].append(self.pool.allocate())
        self.ntok[seq] = num_tokens

    def trim(self, seq: int, computed: int) -> None:
        """Give back pages the tokens after `computed` no longer attend to (sliding windows); none here."""

    # ---- sharing, freeing, swapping ------------------------------------------------------
    def fork(self, parent: int, child: int) -> None:
        table = self.tables[parent]
        for b in table:
            self.pool.incref(b)
        self.tables[child] = list(table)
        self.first[child] = self.first[parent]
        self.ntok[child] = self.ntok[parent]
        self.dup += self._slots(parent)

    def _slots(self, seq: int) -> int:
        """Token slots seq's pages cover (its live logical blocks, the last one up to ntok)."""
        return self.ntok[seq] - self.first[seq] * self.bs

    def set_computed_tokens(self, seq: int, num_tokens: int) -> None:
        """No prefix cache (CachedTables has one): nothing to register at free."""

    def free(self, seq: int) -> int:
        """Drop seq's table; return how many pages became free."""
        table = self.tables.pop(seq)
        first = self.first.pop(seq)
        ntok = self.ntok.pop(seq)
        kept = self.pool.release(table)
        if kept:
            self._undup(table, kept, first, ntok)
        return len(table) - len(kept)

    def _undup(self, table: list[int], kept: list[int], first: int, ntok: int) -> None:
        """dup after releasing `table`: its pages still held elsewhere no longer count twice."""
        bs = self.bs
        self.dup -= len(kept) * bs
        if kept[-1] == table[-1] and ntok % bs:
            self.dup += bs - ntok % bs

    def unique_pages(self, seqs: list[int]) -> int:
        return len({b for s in seqs for b in self.tables[s]})

    def swap_out(self, seqs: list[int]) -> int:
        """Move the sequences' pages to host memory, sharing kept; return pages moved."""
        remap: dict[int, int] = {}
        for s in seqs:
            host = self.host.store(self.tables[s], remap)
            first, ntok = self.first[s], self.ntok[s]
            self.free(s)
            self.swapped[s] = (host, ntok, first)
        return len(remap)

    def swap_pages_needed(self, seqs: list[int]) -> int:
        return len({h for s in seqs for h in self.swapped[s][0]})

    def swap_in(self, seqs: list[int]) -> int:
        """Bring swapped sequences back onto fresh pages, shared where their host pages were."""
        remap: dict[int, int] = {}
        for s in seqs:
            host, ntok, first = self.swapped.pop(s)
            table, _ = self.host.load(host, remap, self.pool)
            self.tables[s], self.ntok[s], self.first[s] = table, ntok, first
        seen: set[int] = set()
        for s in seqs:
            for i, b in enumerate(self.tables[s]):
                if b in seen:
                    self.dup += self._page_slots(s, i)
                else:
                    seen.add(b)
        return len(remap)

    def _page_slots(self, seq: int, i: int) -> int:
        """Filled slots of the i-th live page of seq."""
        return min(self.bs, self.ntok[seq] - (self.first[seq] + i) * self.bs)

    def host_pages(self) -> int:
        return len(self.host)

    # ---- checks --------------------------------------------------------------------------
    def check(self, counts: list[int]) -> None:
        """Add this group's references to counts; assert each table covers its tokens and dup is exact."""
        dup = 0
        seen: set[int] = set()
        for s, table in self.tables.items():
            assert len(table) == -(-self.ntok[s] // self.bs) - self.first[s], f"table of seq {s} mis-sized"
            for i, b in enumerate(table):
                counts[b] += 1
                if b in seen:
                    dup += self._page_slots(s, i)
                seen.add(b)
        assert dup == self.dup, "shared token count drifted"
        assert len({h for host, _, _ in self.swapped.values() for h in host}) == len(self.host), \
            "host page count drifted"
