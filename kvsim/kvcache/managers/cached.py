"""Hash prefix caching for the coordinator's token-paged groups (vLLM's rules for hybrid models).

Every group keys its full blocks by the request content's chained block keys qualified by the group's
index, in one pool shared by all groups (kvsim/kvcache/prefix_hash.py's HashCachePool: released keyed pages
stay cached until evicted, one eviction queue for all groups). A prompt block's key is registered when
its page is allocated full of prompt tokens; the blocks generated tokens filled, when the sequence is
freed. A sliding group's pages that leave the window are released as usual and so stay cached.

A cache hit of L blocks needs, in a full / MLA / compressed group, blocks 0 .. L - 1 cached (scanned left
to right); in a sliding group only the blocks holding the last window - 1 tokens before token L*bs
(scanned right to left, as vLLM's SlidingWindowManager does). The coordinator intersects them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvsim.kvcache.hashing import BlockContent, cached_upto
from kvsim.kvcache.managers.sliding import SlidingTables
from kvsim.kvcache.managers.token_tables import TokenTables
from kvsim.kvcache.prefix_hash import HashCachePool


@dataclass(slots=True)
class SeqKeys:
    """A sequence's content keys and how far they are registered: `done` leading logical blocks are
    looked up in or registered with the cache; `pending`: mapped at admission, not yet allocated (the
    scheduler may still undo it, which must not count as a use)."""

    content: BlockContent
    prompt: int
    done: int
    pending: bool
    computed: int = -1
    """Tokens with KV, when the scheduler said (set_computed_tokens); -1: not said."""


class CachedTables(TokenTables):
    """TokenTables of group `gi` whose full blocks are cached by key in a shared HashCachePool."""

    def __init__(self, pool: HashCachePool, block_size: int, gi: int) -> None:
        super().__init__(pool, block_size)
        self.gi = gi
        self.keys: dict[int, SeqKeys] = {}

    @classmethod
    def for_group(cls, pool, block_size: int, group, cache_index: int | None) -> CachedTables:
        return cls(pool, block_size, cache_index)

    # ---- lookups (no side effects) -------------------------------------------------------
    def cached(self, key) -> int | None:
        return self.pool.by_key.get((key, self.gi))

    def hit_blocks(self, keys: list, limit: int) -> int:
        """Longest run of cached blocks from the first, at most limit."""
        n = 0
        while n < limit and self.cached(keys[n]) is not None:
            n += 1
        return n

    def needed_from(self, blocks: int) -> int:
        """First logical block a hit of `blocks` blocks must have cached: 0 (every block) here."""
        return 0

    # ---- mapping a hit ---------------------------------------------------------------------
    def map_hit(self, seq: int, content: BlockContent, prompt: int, blocks: int) -> None:
        """Put the cached pages of logical blocks needed_from(blocks) .. blocks - 1 into seq's new table."""
        first = self.needed_from(blocks)
        keys = content.upto(blocks)
        pool = self.pool
        table = [self.cached(keys[j]) for j in range(first, blocks)]
        rc = pool.rc
        shared = 0
        for b in table:
            if rc[b]:
                shared += 1
            else:
                pool.queue.discard(b)
            rc[b] += 1
        pool.shared += shared
        self.dup += shared * self.bs
        self.tables[seq] = table
        self.first[seq] = first
        self.ntok[seq] = blocks * self.bs
        self.keys[seq] = SeqKeys(content, prompt, blocks, True)

    # ---- registering, freeing --------------------------------------------------------------
    def allocate(self, seq: int, num_tokens: int) -> None:
        super().allocate(seq, num_tokens)
        st = self.keys.get(seq)
        if st is not None:
            if st.pending:
                st.pending = False
                uses = self.pool.uses
                for b in self.tables[seq]:
                    uses[b] += 1
            self.register(seq, st, min(num_tokens, st.prompt) // self.bs)

    def start(self, seq: int, content: BlockContent, prompt: int) -> None:
        """A sequence admitted with no hit: its prompt blocks will be registered as they are allocated."""
        self.keys[seq] = SeqKeys(content, prompt, 0, False)

    def register(self, seq: int, st: SeqKeys, upto: int) -> None:
        """Register the keys of seq's logical blocks st.done .. upto - 1 that it still holds."""
        if upto <= st.done:
            return
        keys = st.content.upto(upto)
        upto = min(upto, len(keys))
        pool = self.pool
        by_key, key_of = pool.by_key, pool.key_of
        table, first = self.tables[seq], self.first[seq]
        now = pool.clock
        for j in range(max(st.done, first), upto):
            k = (keys[j], self.gi)
            b = table[j - first]
            if k not in by_key and key_of[b] is None:
                by_key[k] = b
                key_of[b] = k
                pool.birth[b] = pool.last[b] = now
                pool.uses[b] = 1
                pool.depth[b] = j
        st.done = max(st.done, upto)

    def set_computed_tokens(self, seq: int, num_tokens: int) -> None:
        """free(seq) registers only the pages full of seq's num_tokens tokens with KV."""
        st = self.keys.get(seq)
        if st is not None:
            st.computed = num_tokens

    def free(self, seq: int) -> int:
        st = self.keys.pop(seq, None)
        touch = True
        if st is not None:
            if st.pending:
                touch = False
            else:
                upto = cached_upto(self.first[seq] + len(self.tables[seq]), st.computed, self.bs)
                self.register(seq, st, upto)
        table = self.tables.pop(seq)
        first = self.first.pop(seq)
        ntok = self.ntok.pop(seq)
        kept = self.pool.release(table, touch)
        if kept:
            self._undup(table, kept, first, ntok)
        return len(table) - len(kept)

    def fork(self, parent: int, child: int) -> None:
        super().fork(parent, child)  # the child's generated blocks are not registered (as with hash)

    def check_keys(self) -> None:
        key_of = self.pool.key_of
        for (key, gi), b in self.pool.by_key.items():
            if gi == self.gi:
                assert key_of[b] == (key, gi), "key map disagrees with pages"


class CachedSlidingTables(CachedTables, SlidingTables):
    """CachedTables for a sliding-window group: a hit needs only the window's blocks cached."""

    def __init__(self, pool: HashCachePool, block_size: int, gi: int, window: int) -> None:
        SlidingTables.__init__(self, pool, block_size, window)
        self.gi = gi
        self.keys = {}

    @classmethod
    def for_group(cls, pool, block_size: int, group, cache_index: int | None) -> CachedSlidingTables:
        return cls(pool, block_size, cache_index, group.window)

    def needed_from(self, blocks: int) -> int:
        """The block holding token blocks*bs - window + 1: the earliest the next token attends to."""
        return max(0, blocks * self.bs - self.window + 1) // self.bs

    def window_hit(self, keys: list, limit: int) -> int:
        """Largest L <= limit whose blocks needed_from(L) .. L - 1 are all cached (right to left)."""
        run = 0  # cached blocks ending at the block under the scan
        for j in range(limit - 1, -1, -1):
            if self.cached(keys[j]) is None:
                run = 0
                continue
            run += 1
            end = j + run
            if run >= end - self.needed_from(end):
                return end
        return 0
