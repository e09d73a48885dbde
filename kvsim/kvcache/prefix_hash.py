"""Hash-based automatic prefix caching (vLLM semantics) on top of the paged manager.

Full blocks carry a chained content key (kvsim/kvcache/hashing.py). A block's key is registered when the
block is allocated full of prompt tokens (the prompt's blocks become shareable as soon as their chunk is
scheduled, as in vLLM V1), and, when the sequence is freed, for the blocks its generated tokens filled. A
freed block with a key stays cached with refcount 0 until an allocation finds no truly free block and
evicts it (the eviction policy picks which). A new request maps the longest run of cached blocks that
matches its prompt's keys into its table and skips their prefill; the last prompt token is always
computed, so at most floor((prompt - 1) / block_size) blocks come from the cache. Two blocks with the same
key are never both registered: a block computed while an equal one is cached stays private.
"""

from __future__ import annotations

from kvsim.kvcache.checks import check_tables
from kvsim.kvcache.hash_pool import HashCachePool, match, match_hold, register
from kvsim.kvcache.hashing import BlockContent, ContentMemo, cached_upto
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.tiers import TierChain
from kvsim.kvcache.view import Hit

_GPU_HITS: dict = {}
"""Hit.gpu(tokens) by tokens: a hit is immutable, made once per size."""


def _gpu_hit(tokens: int) -> Hit:
    """Hit.gpu(tokens), made once per size."""
    hit = _GPU_HITS.get(tokens)
    if hit is None:
        hit = _GPU_HITS[tokens] = Hit.gpu(tokens)
    return hit


class _SeqCache:
    """A sequence's cache state: its content (keys), prompt, the leading table blocks looked up in or
    registered with the cache (`done`) and mapped from it at admission (`hits`), whether it is admitted but
    not yet allocated (`pending`: the scheduler may still undo it), its request, the tier index of each block
    after the GPU hit (`tier_hits`, loaded at allocation) and the tokens with KV when the scheduler said
    (`computed`, set_computed_tokens; -1: not said)."""

    __slots__ = ("content", "prompt", "done", "hits", "pending", "rid", "tier_hits", "computed")

    def __init__(self, content: BlockContent, prompt: int, done: int, hits: int, pending: bool, rid: int,
                 tier_hits: list[int] | None = None, computed: int = -1) -> None:
        self.content = content
        self.prompt = prompt
        self.done = done
        self.hits = hits
        self.pending = pending
        self.rid = rid
        self.tier_hits = tier_hits
        self.computed = computed

    def __reduce__(self):
        return _SeqCache, (self.content, self.prompt, self.done, self.hits, self.pending, self.rid,
                           self.tier_hits, self.computed)


class PrefixHashKVManager(PagedKVManager):
    """PagedKVManager plus vLLM-style automatic prefix caching (see the module docstring).

    Accounting: `used_blocks` counts referenced blocks; `cached_blocks` counts cached blocks with refcount
    0 (evictable); `num_free_blocks` = truly free + evictable; `evictions` counts blocks evicted.
    """

    __slots__ = ("seqcache", "namespace", "_memo", "_through", "_cpu_blocks")

    def __init__(self, num_blocks: int, block_size: int, swap_capacity_blocks: int = 0,
                 eviction: str = "lru", namespace: str | int = "", tiers: TierChain | None = None,
                 write_through: bool = False, memo: ContentMemo | None = None) -> None:
        PagedKVManager.__init__(self, num_blocks, block_size, swap_capacity_blocks=swap_capacity_blocks)
        self.pool = HashCachePool(num_blocks, block_size, eviction)
        self.seqcache = {}  # seq -> _SeqCache
        self.namespace = namespace
        self._memo = memo or ContentMemo(block_size, chained=True, namespace=namespace)
        self.tiers = tiers
        self._through = tiers is not None and write_through
        if tiers is not None and not write_through:
            self.pool.spill = []  # write-back: evicted blocks go down the chain
        self._cpu_blocks = 0
        if tiers is not None and tiers.tiers and tiers.tiers[0].name == "cpu" and tiers.tiers[0].resizable:
            # swap preemption uses the CPU tier's memory instead of a private pool: swapped blocks take
            # room from the tier's cached blocks (kvsim/kvcache/tiers.py TierChain.resize; an arc or
            # s3fifo tier keeps its size, and swap its own pool)
            self._cpu_blocks = tiers.tiers[0].capacity_blocks
            self.swap_capacity_blocks = self._cpu_blocks

    @property
    def cached_blocks(self) -> int:
        return self._cached()

    @property
    def used_blocks(self) -> int:
        """The pool's num_used, read here (the engine reads it every iteration)."""
        return self._used()

    def _cached(self) -> int:
        pool = self.pool
        return len(pool.queue)

    def _used(self) -> int:
        pool = self.pool
        return pool.num_blocks - pool.free_count - len(pool.queue)

    @property
    def evictions(self) -> int:
        return self.pool.evictions

    def peek_hit(self, req, prompt_tokens: int) -> Hit:
        """The longest cached run of prompt blocks (on the GPU, then in the tiers below), without changing
        anything."""
        keys, m, n = self._peek_gpu(req, prompt_tokens)
        if self.tiers is None:
            return _gpu_hit(n * self.block_size)
        return self._hit(n, self.tiers.match(keys, n, m))

    def peek_local(self, req, prompt_tokens: int) -> int | None:
        """peek_hit's tokens where this replica has no tiers below the GPU (all are its GPU's), else None."""
        if self.tiers is not None:
            return None
        return self._peek_gpu(req, prompt_tokens)[2] * self.block_size

    def _peek_gpu(self, req, prompt_tokens: int) -> tuple[list, int, int]:
        """The prompt's block keys, how many of them a hit may cover (m: not the last token's block) and
        how many lead the GPU's cache (n), without changing anything."""
        limit = (prompt_tokens - 1) // self.block_size
        content = self._memo.get(req)
        keys = content.upto(limit)
        m = min(limit, len(keys))
        pool = self.pool
        return keys, m, len(match(pool.by_key, pool.key_of, keys, m, content.hint))

    def _hit(self, gpu_blocks: int, below: list[int]) -> Hit:
        """The Hit of gpu_blocks cached blocks followed by blocks from tiers `below` (tier indices)."""
        bs = self.block_size
        if not below:
            return _gpu_hit(gpu_blocks * bs)
        by_tier = [("gpu", gpu_blocks * bs)] if gpu_blocks else []
        for i, t in enumerate(self.tiers.tiers):
            n = below.count(i)
            if n:
                by_tier.append((t.name, n * bs))
        return Hit((gpu_blocks + len(below)) * bs, tuple(by_tier))

    def admit(self, seq: int, req, prompt_tokens: int, output_tokens: int) -> Hit:
        """Map the longest cached run of prompt blocks into seq's (new) table; return its tokens."""
        assert seq not in self.tables, f"admit of seq {seq} that holds blocks"
        bs = self.block_size
        content = self._memo.get(req)
        limit = (prompt_tokens - 1) // bs
        keys = content.upto(limit)
        pool = self.pool
        m = min(limit, len(keys))
        if pool.runs:
            table, shared = match_hold(pool, keys, m, content.hint)
        else:
            table = match(pool.by_key, pool.key_of, keys, m, content.hint)
            shared = pool.hold(table)
        self.shared_dup_tokens += shared * bs
        self.tables[seq] = table
        self.ntok[seq] = len(table) * bs
        st = _SeqCache(content, prompt_tokens, len(table), len(table), True, req.rid)
        self.seqcache[seq] = st
        if self.tiers is None:
            return _gpu_hit(len(table) * bs)
        below = self.tiers.match(keys, len(table), min(limit, len(keys)))
        st.tier_hits = below
        return self._hit(len(table), below)

    def allocate(self, seq: int, num_tokens: int) -> bool:
        return self._allocate(seq, num_tokens, True)

    def reserve(self, seq: int, num_tokens: int) -> bool:
        """allocate() without registering the new full blocks' keys: their KV is still on its way."""
        return self._allocate(seq, num_tokens, False)

    def _allocate(self, seq: int, num_tokens: int, register: bool) -> bool:
        if not PagedKVManager.allocate(self, seq, num_tokens):
            return False
        st = self.seqcache.get(seq)
        if st is not None:
            if st.pending:
                st.pending = False
                pool = self.pool
                if pool.counts_uses:
                    uses = pool.uses
                    for b in self.tables[seq][: st.hits]:
                        uses[b] += 1
                if st.tier_hits:  # the blocks below the GPU are loaded into the blocks just allocated
                    end = st.hits + len(st.tier_hits)
                    keys = st.content.upto(end)[st.hits:end]
                    self.tiers.load(keys, st.tier_hits)
            upto = min(num_tokens, st.prompt) // self.block_size
            if register and upto > st.done:
                self._register(seq, st, upto)
        self._spill()
        return True

    def swap_out(self, seqs: list[int]) -> int:
        moved = PagedKVManager.swap_out(self, seqs)
        if self._cpu_blocks:
            self.tiers.resize(0, self._cpu_blocks - self.swap_used_blocks)
        return moved

    def swap_in(self, seqs: list[int]) -> int:
        moved = PagedKVManager.swap_in(self, seqs)
        if self._cpu_blocks:
            self.tiers.resize(0, self._cpu_blocks - self.swap_used_blocks)
        return moved

    def _spill(self) -> None:
        """Write-back: the blocks the GPU cache just evicted go down the chain."""
        pool = self.pool
        spill = pool.spill
        if spill:
            self.tiers.offer(spill)
            spill.clear()

    def _register(self, seq: int, st: _SeqCache, upto: int) -> None:
        keys = st.content.upto(upto)
        upto = min(upto, len(keys))
        register(self.pool, keys, self.tables[seq], st.done, upto)
        if self._through:  # write-through: whole chunks of computed prompt blocks go down at once
            c = self.tiers.chunk_blocks
            lo, hi = -(-st.done // c) * c, (upto // c) * c
            if hi > lo:
                self.tiers.offer(keys[lo:hi])
        st.done = max(st.done, upto)

    def _take_evicting(self) -> int:
        """The grow step's eviction (PagedKVManager hook); write-back: the evicted block goes down the chain
        at once."""
        pool = self.pool
        bid = pool.take_evicting()
        if bid >= 0 and pool.spill:
            self._spill()
        return bid

    def _take_each(self, k: int) -> list[int] | None:
        """The grow steps' evictions (PagedKVManager hook); write-back: the evicted blocks go down the
        chain in eviction order (TierChain.offer takes them one by one, as grow_one_block's would)."""
        pool = self.pool
        ids = pool.take_each(k)
        self._spill()
        return ids

    def set_computed_tokens(self, seq: int, num_tokens: int) -> None:
        """free(seq) registers only the blocks full of seq's num_tokens tokens with KV."""
        st = self.seqcache.get(seq)
        if st is not None:
            st.computed = num_tokens

    def free(self, seq: int) -> int:
        """Register the full blocks seq's generated tokens filled, then release its table (cached blocks
        stay, evictable). An admission not yet allocated is undone without touching the blocks' last use."""
        st = self.seqcache.pop(seq, None)
        touch = True
        if st is not None:
            if st.pending:
                touch = False
            else:
                upto = cached_upto(len(self.tables[seq]), st.computed, self.block_size)
                if upto > st.done:
                    self._register(seq, st, upto)
        table = self.tables.pop(seq)
        ntok = self.ntok.pop(seq)
        pool = self.pool
        kept = pool.release(table, touch)
        if st is not None:
            self._memo.keep(st.rid, st.content, table)
        if kept:
            bs = self.block_size
            self.shared_dup_tokens -= len(kept) * bs
            if kept[-1] == table[-1] and ntok % bs:
                self.shared_dup_tokens += bs - ntok % bs
        return len(table) - len(kept)

    def check_invariants(self) -> int:
        """Paged invariants plus the cache's: the key map and per-block keys agree, evictable blocks are
        exactly the cached ones with refcount 0, and free + evictable + referenced = all blocks (over the
        blocks with state: the others were never handed out); the tiers below within capacity, an exclusive
        chain holding each block once. Returns the entries read (KVManager.check_invariants)."""
        read = self.tiers.check() if self.tiers is not None else 0
        counts = check_tables(self)
        pool = self.pool
        key_of = pool.key_of
        free = pool.known_free_ids()
        key = key_of.__getitem__  # (map over it: the checks read every block, at C speed where they can)
        assert list(map(key, free)).count(None) == len(free), "cached block on the free list"
        by_key = pool.by_key
        assert list(map(key, by_key.values())) == list(by_key), "key map disagrees with blocks"
        assert len(key_of) - key_of.count(None) == len(by_key), "block with a key not in the map"
        # (the blocks with a key are exactly the map's, by the two checks above)
        evictable = {b for b in by_key.values() if counts[b] == 0}
        queued = pool.queue.items()
        assert len(queued) == len(pool.queue) and set(queued) == evictable, "evictable set drifted"
        referenced = len(counts) - counts.count(0)
        assert len(free) + len(evictable) + referenced == pool.known, "leaked block"
        return read + pool.known + sum(counts)
