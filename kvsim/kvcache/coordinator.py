"""The KV coordinator: one manager per cache group of a model's page plan, one pool of equal-size pages.

Following vLLM's hybrid KV cache manager (docs/design/hybrid_kv_cache_manager.md there): the layers are
split into cache groups of equal layer counts (kvsim/specs/pages.py), every group draws pages of one
size from one pool, and a request holds, per group, the pages its rule needs: every block of the context
for full / MLA / compressed layers, the window's blocks for sliding-window layers (pages that leave the
window go back), a fixed state for state layers. The scheduler sees one manager (the interface of
kvsim/kvcache/interface.py): a "block" is a page, and growing a sequence by a block takes one page per
token-paged group, less what its sliding groups give back.

Token states (`token_states`) are counted in page slots, so that utilization stays the share of the pool
holding real KV: a page of a token-paged group holds `block_size` slots, each one token of the group's
layers, weighted by the share of the page its real (not padding) layers fill; a state takes all its
pages' slots, weighted the same way.

Prefix caching (`prefix_cache="hash"`, kvsim/kvcache/managers/cached.py) keys every group's full blocks
in one pool with one eviction queue; a hit is the longest prefix whose blocks every full / MLA / compressed
group has cached and whose last window - 1 tokens every sliding group has (vLLM's intersection, repeated
until no group lowers it). States are not cached, so a model with state layers takes no prefix cache
(the scenario check says so). A model with a single full-attention or MLA group keeps the classic
managers (kvsim/kvcache/factory.py).
"""

from __future__ import annotations

from kvsim.kvcache.block_pool import BlockPool
from kvsim.kvcache.breakdown import paged_breakdown
from kvsim.kvcache.checks import check_refcounts
from kvsim.kvcache.hashing import ContentMemo
from kvsim.kvcache.managers.kinds import KIND_MANAGERS
from kvsim.kvcache.managers.sliding import SlidingTables
from kvsim.kvcache.managers.state_slots import StateSlots
from kvsim.kvcache.managers.token_tables import TokenTables
from kvsim.kvcache.prefix_hash import HashCachePool
from kvsim.kvcache.view import NO_HIT, ContextSums, Hit
from kvsim.specs.layers import window_caps
from kvsim.specs.pages import PagePlan

NEVER = 2**62
"""capacity_tokens of a sequence that never needs another page (a model of state layers only)."""


class KVCoordinator:
    """The scheduler-facing KV manager over a PagePlan's cache groups (see the module docstring)."""

    def __init__(self, plan: PagePlan, num_pages: int, swap_capacity_pages: int = 0,
                 prefix_cache: str = "none", eviction: str = "lru") -> None:
        self.plan = plan
        self.block_size = plan.block_size
        cache = prefix_cache == "hash"
        self.pool = HashCachePool(num_pages, plan.block_size, eviction) if cache else BlockPool(
            num_pages, plan.block_size)
        self.memo = ContentMemo(plan.block_size, chained=True) if cache else None
        self.swap_capacity_blocks = swap_capacity_pages
        self.windows: tuple[int, ...] = window_caps(tuple(g.source for g in plan.groups))
        """Window caps (window - 1: the tokens kept for the next one) for ContextSums.windowed."""
        self.tokens: list[TokenTables] = []
        self.states: list[StateSlots] = []
        self._weights: list[tuple[object, float, int]] = []  # (manager, real fraction, windowed index)
        for gi, g in enumerate(plan.groups):
            managers = KIND_MANAGERS[g.kind]
            if g.grows:
                tables = managers.cached if cache else managers.tables
                m = tables.for_group(self.pool, plan.block_size, g, gi if cache else None)
                self.tokens.append(m)
                cap = g.source.kind_spec.held_cap(g)
                self._weights.append((m, g.real_fraction, -1 if cap is None else self.windows.index(cap)))
            if g.state_pages:
                s = managers.state.for_group(self.pool, plan.block_size, g, None)
                self.states.append(s)
                self._weights.append((s, g.real_fraction, -2))
        self.groups: list[TokenTables | StateSlots] = [*self.tokens, *self.states]
        self.block_pages = len(self.tokens)  # a sequence's next block: a page per token-paged group
        self.shared_dup_tokens = 0  # unused: token_states counts sharing per group
        self.tiers = None  # KV tiers are modelled below one group's cache only (deployment.py)
        self.last_grow_delta = 0
        """Pages the sequence of the last successful grow_one_block gained, net of what its sliding groups
        gave back (what the scheduler adds to the blocks it counts for the sequence)."""

    # ---- pool ----------------------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        return self.pool.num_blocks

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free

    @property
    def used_blocks(self) -> int:
        return self.pool.num_used

    @property
    def cached_blocks(self) -> int:
        return len(self.pool.queue) if self.memo is not None else 0

    @property
    def evictions(self) -> int:
        return self.pool.evictions if self.memo is not None else 0

    @property
    def cow_copies(self) -> int:
        return sum(m.cow_copies for m in self.groups)

    def refuse_reason(self, req, output_tokens: int) -> str | None:
        """Beyond the engine's pool-size check (the page plan's count): nothing."""
        return None

    def reparent(self, seq: int, parent: int) -> None:
        """Beam search: seq continues from parent (every group's table becomes a share of parent's)."""
        self.free(seq)
        self.fork(parent, seq)

    def breakdown(self, token_states: int, table_blocks: int, head_req=None,
                  head_output: int = 0) -> tuple[int, int, int, int, int]:
        """The kv_* breakdown columns over the shared pool of pages (paged: nothing reserved)."""
        return paged_breakdown(self, token_states, table_blocks)

    # ---- admission and sizing ------------------------------------------------------------
    def admit(self, seq: int, req, prompt_tokens: int, output_tokens: int) -> Hit:
        """Map the longest prefix every group has cached into seq's tables (see the module docstring)."""
        if self.memo is None:
            return NO_HIT
        content = self.memo.get(req)
        blocks = self._hit_blocks(content, prompt_tokens)
        for m in self.tokens:
            if blocks:
                m.map_hit(seq, content, prompt_tokens, blocks)
            else:
                m.start(seq, content, prompt_tokens)
        return Hit.gpu(blocks * self.block_size)

    def peek_hit(self, req, prompt_tokens: int) -> Hit:
        """Prompt tokens admit would serve from the cache, without changing anything."""
        if self.memo is None:
            return NO_HIT
        return Hit.gpu(self._hit_blocks(self.memo.get(req), prompt_tokens) * self.block_size)

    def _hit_blocks(self, content, prompt_tokens: int) -> int:
        """Blocks of the longest prefix hit: the full groups' common run, then lowered until every sliding
        group has its window's blocks cached (the last prompt token is always computed)."""
        limit = (prompt_tokens - 1) // self.block_size
        keys = content.upto(limit)
        blocks = min(limit, len(keys))
        for m in self.tokens:
            if not isinstance(m, SlidingTables):
                blocks = m.hit_blocks(keys, blocks)
        lowered = True
        while lowered and blocks:
            lowered = False
            for m in self.tokens:
                if isinstance(m, SlidingTables):
                    end = m.window_hit(keys, blocks)
                    if end < blocks:
                        blocks, lowered = end, True
        return blocks

    def has(self, seq: int) -> bool:
        g = self.groups[0]
        return seq in (g.tables if isinstance(g, TokenTables) else g.slots)

    def blocks_needed(self, seq: int, num_tokens: int) -> int:
        return sum(m.blocks_needed(seq, num_tokens) for m in self.groups)

    def group_blocks_needed(self, seqs: list[int], num_tokens: int) -> int:
        return sum(m.group_blocks_needed(seqs, num_tokens) for m in self.groups)

    def reserve(self, seq: int, num_tokens: int) -> bool:
        """allocate() of slots whose KV has not arrived. Neither tiers nor P/D hand-offs are modelled with
        several layer groups, so nothing reserves here in a run; the same as allocate()."""
        return self.allocate(seq, num_tokens)

    def allocate(self, seq: int, num_tokens: int) -> bool:
        """Grow seq to num_tokens in every group; all or nothing (False if pages are short). Sliding groups
        give back what left their window before any group takes new pages."""
        if self.blocks_needed(seq, num_tokens) > self.pool.num_free:
            return False
        for m in self.tokens:
            if seq in m.tables and num_tokens > m.ntok[seq]:
                m.trim(seq, min(m.ntok[seq], num_tokens - 1))
        for m in self.groups:
            m.allocate(seq, num_tokens)
        return True

    def grow_each(self, seqs: list[int], num_tokens: list[int]) -> bool:
        """Declines: each sequence grows by its own groups' pages (grow_one_block, one by one)."""
        return False

    def grow_one_block(self, seq: int, num_tokens: int) -> bool:
        """One page per token-paged group for a single sequence's next block, if the pool has them."""
        computed = num_tokens - 1
        back = sum(m.freeable(seq, computed) for m in self.tokens)
        if len(self.tokens) - back > self.pool.num_free:
            return False
        before = sum(len(m.tables[seq]) for m in self.tokens)
        for m in self.tokens:
            m.trim(seq, computed)
        for m in self.tokens:
            m.grow_one(seq, num_tokens)
        self.last_grow_delta = sum(len(m.tables[seq]) for m in self.tokens) - before
        return True

    def capacity_tokens(self, seq: int) -> int:
        return self.tokens[0].capacity_tokens(seq) if self.tokens else NEVER

    def last_block_shared(self, seq: int) -> bool:
        return any(m.last_block_shared(seq) for m in self.tokens)

    def num_blocks_of(self, seq: int) -> int:
        return sum(m.held(seq) for m in self.groups)

    def private_blocks(self, seq: int) -> int:
        """Pages of seq, over its groups, that nothing else references: what free(seq) gives back."""
        return sum(m.private_pages(seq) for m in self.groups)

    # ---- sharing, freeing, swapping ------------------------------------------------------
    def fork(self, parent: int, child: int) -> None:
        for m in self.groups:
            m.fork(parent, child)

    def set_computed_tokens(self, seq: int, num_tokens: int) -> None:
        for m in self.tokens:
            m.set_computed_tokens(seq, num_tokens)

    def free(self, seq: int) -> int:
        return sum(m.free(seq) for m in self.groups)

    def _host_pages(self) -> int:
        return sum(m.host_pages() for m in self.groups)

    def can_swap_out(self, seqs: list[int]) -> bool:
        need = sum(m.unique_pages(seqs) for m in self.tokens) + sum(s.pages * len(seqs) for s in self.states)
        return self._host_pages() + need <= self.swap_capacity_blocks

    def swap_out(self, seqs: list[int]) -> int:
        return sum(m.swap_out(seqs) for m in self.groups)

    def swap_blocks_needed(self, seqs: list[int]) -> int:
        return sum(m.swap_pages_needed(seqs) for m in self.groups)

    def swap_in(self, seqs: list[int]) -> int:
        return sum(m.swap_in(seqs) for m in self.groups)

    # ---- accounting and checks -----------------------------------------------------------
    def token_states(self, sums: ContextSums) -> int:
        """Page slots holding real KV (see the module docstring)."""
        bs = self.block_size
        total = 0.0
        for m, weight, index in self._weights:
            if index == -2:
                total += weight * sums.seqs * m.pages * bs
            else:
                held = sums.tokens if index < 0 else sums.windowed[index]
                total += weight * (held - m.dup)
        return int(total)

    def check_invariants(self) -> int:
        """Refcounts equal the references of every group's tables, no page is leaked or free twice, each
        group's own rules hold (table sizes, the sliding bound, one state slot per sequence), and the host
        holds no more than the swap space. Pages are checked over those with state (BlockPool.known: the
        others were never handed out)."""
        pool = self.pool
        counts = [0] * pool.known
        for m in self.groups:
            m.check(counts)
        check_refcounts(pool, counts, "the groups' tables")
        free = pool.known_free_ids()
        cached = 0
        if self.memo is not None:
            key_of = self.pool.key_of
            assert all(key_of[b] is None for b in free), "cached page on the free list"
            assert all(key_of[b] == k for k, b in self.pool.by_key.items()), "key map disagrees with pages"
            evictable = {b for b, c in enumerate(counts) if c == 0 and key_of[b] is not None}
            assert set(self.pool.queue.items()) == evictable, "evictable set drifted"
            cached = len(evictable)
        assert len(free) + cached + sum(1 for c in counts if c) == pool.known, "leaked page"
        members = [set(m.tables) if isinstance(m, TokenTables) else set(m.slots) for m in self.groups]
        assert all(s == members[0] for s in members), "groups disagree on which sequences hold KV"
        assert self._host_pages() <= self.swap_capacity_blocks, "swap space over capacity"
        return pool.known + sum(counts)

