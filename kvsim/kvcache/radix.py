"""RadixAttention-style prefix caching (SGLang semantics) on top of the paged manager.

A sequence's admission matches its prompt's pages against the radix tree (kvsim/kvcache/radix_tree.py),
at most floor((prompt - 1) / block_size) pages so the last prompt token is computed, maps the matched
blocks into its table and locks the path. As its prompt blocks fill (chunk by chunk) they are inserted
under its path, and when the sequence is freed the blocks its generated tokens filled are inserted too
(SGLang's cache_unfinished_req / cache_finished_req). When an insert finds the pages already in the tree
(another sequence computed them meanwhile) the sequence switches to the tree's blocks and frees its own
copies. Tree blocks whose nodes no sequence locks stay cached with refcount 0; an allocation that finds no
free block evicts whole unlocked leaves, smallest eviction key first.
"""

from __future__ import annotations

from kvsim.kvcache.block_pool import BlockPool
from kvsim.kvcache.checks import check_tables
from kvsim.kvcache.hashing import (
    KEPT,
    OUTPUT_ID_BASE,
    PAD_ID_BASE,
    UNBOUNDED,
    UNIQUE_ID_BASE,
    ContentMemo,
    cached_upto,
)
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.radix_tree import PageRuns, RadixNode, RadixTree, common_pages, new_runs
from kvsim.kvcache.view import Hit


class RadixPool(BlockPool):
    """A BlockPool whose blocks held by the radix tree stay cached at refcount 0; `num_free` counts free
    plus cached-unreferenced blocks, and an allocation evicts tree leaves (`_evict`) when none is truly
    free. (An extension type when compiled, radix.pxd: copies and pickles by BlockPool.__reduce__, which
    reads the __slots__ below.)"""

    __slots__ = ("in_tree", "num_cached_free", "tree", "evictions")

    def __init__(self, num_blocks: int, block_size: int, tree: RadixTree) -> None:
        self.in_tree = bytearray()  # per block with state (BlockPool)
        BlockPool.__init__(self, num_blocks, block_size)
        self.num_cached_free = 0
        self.tree = tree
        self.evictions = 0

    def _extend(self, k: int) -> None:
        BlockPool._extend(self, k)
        self.in_tree += bytes(k)

    @property
    def num_free(self) -> int:
        return self.free_count + self.num_cached_free

    def free_now(self) -> int:
        return self.free_count + self.num_cached_free

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.free_count - self.num_cached_free

    def _evict(self, k: int) -> list[int]:
        """The blocks of whole unlocked leaves (eviction order), at least k; [] if fewer are cached."""
        if k > self.num_cached_free:
            return []
        ids: list[int] = []
        freed = 0
        in_tree = self.in_tree
        rc = self.rc
        while freed < k:
            blocks = self.tree.pop_leaf().blocks
            _forget(blocks, in_tree, rc)
            ids += blocks
            freed += len(blocks)
        self.num_cached_free -= freed
        self.evictions += freed
        return ids

    def release(self, ids: list[int]) -> list[int]:
        kept, zeroed = self.drop_refs(ids)
        in_tree = self.in_tree
        rc = self.rc
        free = []
        for b in zeroed:
            if in_tree[b]:
                self.num_cached_free += 1
                rc[b] = 0
            else:
                free.append(b)
        if free:
            self._put_free(free)
        return kept

    def release_own(self, ids: list[int]) -> list[int]:
        """release() of blocks none of which is in the tree: those reaching refcount 0 go free, in order."""
        kept, zeroed = self.drop_refs(ids)
        if zeroed:
            self._put_free(zeroed)
        return kept

    def reuse(self, bid: int) -> int:
        """Add a reference to a tree block; return its refcount before."""
        r = self.rc[bid]
        if r == 0:
            self.num_cached_free -= 1
        else:
            self.shared += 1
        self.rc[bid] = r + 1
        return r


def _forget(blocks: list[int], in_tree: bytearray, rc: list[int]) -> None:
    """Evicted tree blocks: out of the tree, rc 1 (a free block's, BlockPool)."""
    for b in blocks:
        in_tree[b] = 0
        rc[b] = 1


def _cached_free(pool: RadixPool) -> int:
    """pool.num_cached_free (when compiled, a C read of the typed pool: cached_blocks is read every step)."""
    return pool.num_cached_free


def _mark(blocks: list[int], in_tree: bytearray) -> None:
    for b in blocks:
        in_tree[b] = 1


def _first_shared(rc: list[int], table: list[int], i: int, end: int) -> int:
    """The first index of table[i:end] whose block another table holds too (end if none)."""
    for t in range(i, end):
        b = table[t]
        if rc[b] > 1:
            return t
    return end


def _content_segs(req) -> list:
    """The segments PageRuns(hashing.request_content(req), bs) keeps (those of positive length, each an
    (int, length) tuple), built without the content tuple."""
    rid = req.rid
    plen = req.prompt_len
    segs = req.segments
    out = []
    if not segs:
        if plen > 0:
            out.append(_seg(UNIQUE_ID_BASE + rid, plen))
    else:
        short = plen
        for s in segs:
            n = s[1]
            short -= n
            if n > 0:
                out.append(s if type(s) is tuple and type(s[0]) is int else (int(s[0]), n))
        if short > 0:
            out.append(_seg(PAD_ID_BASE + rid, short))
    out_id = req.output_id
    if out_id < 0:
        out_id = OUTPUT_ID_BASE + rid
    out.append(_seg(out_id, UNBOUNDED))
    return out


def _seg(cid, n) -> tuple:
    """(cid, n) as PageRuns keeps a segment (an int id)."""
    return (cid, n) if type(cid) is int else (int(cid), n)


class _SeqPath:
    """A sequence's place in the tree. (A plain class, not a dataclass: a dataclass's generated __init__
    runs interpreted even when this module is compiled, once per admission; an extension type when compiled,
    radix.pxd.)"""

    __slots__ = ("content", "prompt", "node", "pages", "pending", "computed", "rid")

    def __init__(self, content: PageRuns | None, prompt: int, node: RadixNode, pages: int, pending: bool,
                 computed: int = -1, rid: int = -1) -> None:
        self.content = content  # None: a forked sample, which inserts nothing
        self.prompt = prompt
        self.node = node        # deepest node of the locked path
        self.pages = pages      # pages on the path root..node (= leading table blocks that are tree blocks)
        self.pending = pending  # admitted, not yet allocated: the scheduler may still undo it
        self.computed = computed  # tokens with KV, when the scheduler said (set_computed_tokens); -1 if not
        self.rid = rid          # the request's id (its runs are kept for its follow-up when it is freed)


def _new_path(content: PageRuns, prompt: int, node: RadixNode, pages: int, pending: bool, rid) -> _SeqPath:
    """_SeqPath(content, prompt, node, pages, pending, -1, rid), its fields set one by one (when compiled, C
    stores: no argument parsing)."""
    st = _SeqPath.__new__(_SeqPath)
    st.content = content
    st.prompt = prompt
    st.node = node
    st.pages = pages
    st.pending = pending
    st.computed = -1
    st.rid = rid
    return st


_GPU_HITS: dict[int, Hit] = {}
"""Hit.gpu(tokens) by tokens: a Hit is immutable, and building one (a frozen dataclass) costs more than the
look-up."""


def _gpu_hit(tokens: int) -> Hit:
    hit = _GPU_HITS.get(tokens)
    if hit is None:
        hit = _GPU_HITS[tokens] = Hit.gpu(tokens)
    return hit


class RadixKVManager(PagedKVManager):
    """PagedKVManager plus an SGLang-style radix prefix cache (see the module docstring). An extension type
    when compiled (radix.pxd): copies and pickles by PagedKVManager.__reduce__, which reads the __slots__
    below."""

    __slots__ = ("tree", "paths", "_runs_rid", "_runs", "_kept")

    def __init__(self, num_blocks: int, block_size: int, swap_capacity_blocks: int = 0,
                 eviction: str = "lru", memo: ContentMemo | None = None) -> None:
        """memo: taken as the hash cache takes it (kvsim/kvcache/factory.py), not used: a request's page runs
        cost a few tuples, less than the memo's look-up."""
        PagedKVManager.__init__(self, num_blocks, block_size, swap_capacity_blocks=swap_capacity_blocks)
        self.tree = RadixTree(eviction, block_size)
        self.pool: RadixPool = RadixPool(num_blocks, block_size, self.tree)
        self.paths: dict[int, _SeqPath] = {}
        self._runs_rid = -1
        self._runs: PageRuns | None = None
        self._kept: dict[int, PageRuns] = {}
        """Request id -> its page runs, for its follow-up (_pages), the most recent KEPT."""

    def _pages(self, req) -> PageRuns:
        """req's pages as runs (the last request's kept: a waiting request is offered every iteration); a
        follow-up (a conversation's next turn) starts from the runs of the request it follows, when kept."""
        if self._runs_rid != req.rid or self._runs is None:
            runs = new_runs(_content_segs(req), self.block_size)
            if req.after >= 0 and self._kept:
                prev = self._kept.pop(req.after, None)
                if prev is not None:
                    runs.resume(prev)
            self._runs = runs
            self._runs_rid = req.rid
        return self._runs

    def _keep(self, rid: int, runs: PageRuns) -> None:
        """Keep the runs of request rid, whose sequence let its blocks go, for a follow-up of it (the most
        recent KEPT)."""
        kept = self._kept
        kept.pop(rid, None)
        kept[rid] = runs
        if len(kept) > KEPT:
            del kept[next(iter(kept))]

    @property
    def cached_blocks(self) -> int:
        return _cached_free(self.pool)

    @property
    def evictions(self) -> int:
        return self.pool.evictions

    def peek_hit(self, req, prompt_tokens: int) -> Hit:
        """The longest cached prefix path, without changing anything."""
        limit = (prompt_tokens - 1) // self.block_size
        return _gpu_hit(self.tree.match_length(self._pages(req), limit) * self.block_size)

    def admit(self, seq: int, req, prompt_tokens: int, output_tokens: int) -> Hit:
        assert seq not in self.tables, f"admit of seq {seq} that holds blocks"
        bs = self.block_size
        prompt = prompt_tokens
        content = self._pages(req)
        tree = self.tree
        node, blocks = tree.match(content, (prompt - 1) // bs)
        pool = self.pool
        cached = tree.lock_path(node, pool.rc)
        pool.num_cached_free -= cached
        n = len(blocks)
        reused = n - cached
        pool.shared += reused
        self.shared_dup_tokens += reused * bs
        self.tables[seq] = blocks
        self.ntok[seq] = n * bs
        self.paths[seq] = _new_path(content, prompt, node, n, True, req.rid)
        return _gpu_hit(n * bs)

    def allocate(self, seq: int, num_tokens: int) -> bool:
        return self._allocate(seq, num_tokens, True)

    def reserve(self, seq: int, num_tokens: int) -> bool:
        """allocate() without inserting the new pages into the tree: their KV is still on its way."""
        return self._allocate(seq, num_tokens, False)

    def _allocate(self, seq: int, num_tokens: int, insert: bool) -> bool:
        if not PagedKVManager.allocate(self, seq, num_tokens):
            return False
        st = self.paths.get(seq)
        if st is not None and st.content is not None:
            if st.pending:
                st.pending = False
                self.tree.hit(st.node)
            upto = min(num_tokens, st.prompt) // self.block_size
            if insert and upto > st.pages:
                self._insert(seq, st, upto)
        return True

    def _insert(self, seq: int, st: _SeqPath, upto: int) -> None:
        """Put table pages [st.pages, upto) into the tree under seq's path, switching to the tree's
        blocks where the pages are already there."""
        pr = st.content
        upto = min(upto, pr.upto(upto))
        table = self.tables[seq]
        tree = self.tree
        node, i = st.node, st.pages
        while i < upto:
            child = node.children.get(pr.key(i))
            if child is None:
                break
            j = common_pages(child, pr, i, upto)
            if j < len(child.blocks):
                child = tree.split(child, j)
            blocks = child.blocks
            for t in range(j):
                self._switch(table, i + t, blocks[t])
            tree.lock_one(child)
            node, i = child, i + j
        # a block shared with a forked sequence that does not lock it stays out of the tree, and what follows
        upto = _first_shared(self.pool.rc, table, i, upto)
        if i < upto:
            starts, counts = pr.runs(i, upto)
            new_blocks = table[i:upto]
            if node is not tree.root and not node.children and node.lock == 1:
                tree.grow(node, starts, counts, new_blocks)  # seq alone holds this leaf: grow it in place
            else:
                node = tree.add_child(node, starts, counts, new_blocks)
            pool = self.pool
            _mark(new_blocks, pool.in_tree)
        st.node, st.pages = node, upto

    def _switch(self, table: list[int], idx: int, tree_block: int) -> None:
        own = table[idx]
        if own == tree_block:
            return
        pool = self.pool
        bs = self.block_size
        if pool.reuse(tree_block):
            self.shared_dup_tokens += bs
        table[idx] = tree_block
        if pool.rc[own] > 1:
            self.shared_dup_tokens -= bs
        pool.release([own])

    def fork(self, parent: int, child: int) -> None:
        PagedKVManager.fork(self, parent, child)
        st = self.paths.get(parent)
        if st is not None:
            self.tree.lock(st.node)
            self.paths[child] = _SeqPath(None, st.prompt, st.node, st.pages, False)

    def set_computed_tokens(self, seq: int, num_tokens: int) -> None:
        """free(seq) inserts only the blocks full of seq's num_tokens tokens with KV."""
        st = self.paths.get(seq)
        if st is not None:
            st.computed = num_tokens

    def free(self, seq: int) -> int:
        """Insert the full blocks seq's generated tokens filled, release its table, unlock its path."""
        st = self.paths.pop(seq, None)
        if st is None:
            return PagedKVManager.free(self, seq)
        bs = self.block_size
        if st.content is not None and not st.pending:
            # (SGLang's cache_finished_req inserts as many: the page-aligned prefix of the tokens with KV)
            upto = cached_upto(len(self.tables[seq]), st.computed, bs)
            if upto > st.pages:
                self._insert(seq, st, upto)
        if st.content is not None:
            self._keep(st.rid, st.content)
        table = self.tables.pop(seq)
        ntok = self.ntok.pop(seq)
        pages = st.pages
        pool = self.pool
        n = len(table)
        # the blocks past the path are seq's own (or a fork's): none is in the tree
        kept = pool.release_own(table[pages:]) if pages < n else []
        last_kept = bool(kept) and kept[-1] == table[-1]
        if pages == n and pages:
            last_kept = st.node.lock > 1
        shared = self.tree.unlock_path(st.node, pool.rc, not st.pending)
        pool.num_cached_free += pages - shared
        pool.shared -= shared
        if kept or shared:
            self.shared_dup_tokens -= (len(kept) + shared) * bs
            if last_kept and ntok % bs:
                self.shared_dup_tokens += bs - ntok % bs
        return n - len(kept) - shared

    def check_invariants(self) -> int:
        """Paged invariants plus the tree's: node shapes and depths, locks equal the sequences whose path
        crosses the node, each tree block's refcount equal to its node's lock, evictable = unlocked
        leaves, and free + cached + referenced = all blocks. Returns the entries read: the blocks with
        state, the table entries and the tree's blocks."""
        counts = check_tables(self)
        pool, tree = self.pool, self.tree
        locks: dict[int, int] = {}
        for s, st in self.paths.items():
            path_blocks: list[int] = []
            node = st.node
            while node is not tree.root:
                locks[id(node)] = locks.get(id(node), 0) + 1
                path_blocks[:0] = node.blocks
                node = node.parent
            assert self.tables[s][: st.pages] == path_blocks, f"seq {s} table disagrees with its path"
        in_tree = cached = 0
        evictable = set()
        for node in tree.nodes():
            parent = node.parent
            assert node.blocks and sum(node.counts) == len(node.blocks), "malformed node"
            runs = list(zip(node.starts, node.counts, strict=True))
            assert all(c > 0 and (type(a) is int or c == 1) for a, c in runs), "malformed runs"
            assert parent.children.get(node.starts[0]) is node, "child keyed wrongly"
            assert node.depth == parent.depth + len(parent.blocks), "node depth wrong"
            assert node.lock == locks.get(id(node), 0), "lock count drifted"
            assert all(pool.in_tree[b] for b in node.blocks), "tree block not marked"
            # (admit and free count a path's references node by node: a tree block's refcount is its lock)
            assert all(counts[b] == node.lock for b in node.blocks), "lock/refcount mismatch"
            in_tree += len(node.blocks)
            if node.lock == 0:
                cached += len(node.blocks)
                if not node.children:
                    evictable.add(node)
        assert in_tree == sum(pool.in_tree), "blocks marked in tree but in no node"
        assert cached == pool.num_cached_free, "cached block count drifted"
        assert set(tree.queue.items()) == evictable, "evictable leaves drifted"
        free = pool.known_free_ids()  # the blocks with state (the others were never handed out)
        assert not any(pool.in_tree[b] for b in free), "tree block on the free list"
        referenced = sum(1 for c in counts if c > 0)
        assert len(free) + cached + referenced == pool.known, "leaked block"
        return pool.known + sum(counts) + in_tree
