"""The radix tree of SGLang's RadixAttention, over pages (blocks) of content, kept as runs of pages.

A page is a full block of a sequence's content (kvsim/kvcache/hashing.py): inside one segment it is "tokens
off .. off + block_size of content cid", else the pieces of the segments it spans. Pages are compared by
content only, so a page has one key: the int `cid * 2^64 + off` inside a segment, the tuple of
`(cid, off, length)` pieces across segments. Consecutive pages inside a segment form a *run*: a start key
and a count, page t of the run having key start + t * block_size. `PageRuns` holds a request's pages this
way and every node its own, so matching, inserting and splitting work per run, not per page.

Each node holds a run list of pages and the physical block holding each page; its children are keyed by
their first page's key. A path from the root spells a cached prefix. `match` walks the longest prefix of a
request's pages, splitting a node where the match ends inside it. `lock` counts, on every node of a path,
the sequences using it; only unlocked leaves are evictable, and evicting a leaf can make its parent an
evictable leaf. With block_size 1 a page is one token, so matches have any length; with larger blocks they
are rounded down to whole pages, as in SGLang's paged cache.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

from kvsim.kvcache.eviction import DEPTH_BITS, fifo_key, get_policy, lru_key
from kvsim.kvcache.hashing import cross_page

SHIFT = 1 << 64
"""A page inside segment cid at offset off has key cid * SHIFT + off (offsets stay below 2^63)."""


class PageRuns:
    """A request's pages as runs, computed lazily from its content segments (hashing.request_content):
    `upto(n)` extends them to at least n pages (fewer only if the content ends first) and returns how many
    there are. Run r starts at page firsts[r], has counts[r] pages, and starts[r] is its first page's key
    (an int; a page across segments is a run of one whose key is its tuple of pieces)."""

    __slots__ = ("bs", "segs", "starts", "counts", "firsts", "pages", "_i", "_off")

    def __init__(self, segments, block_size: int) -> None:
        self.bs = block_size
        self.segs = [s if type(s) is tuple and type(s[0]) is int else (int(s[0]), s[1]) for s in segments
                     if s[1] > 0]
        self.starts: list = []
        self.counts: list[int] = []
        self.firsts: list[int] = []
        self.pages = 0
        self._i = 0
        self._off = 0

    def upto(self, n: int) -> int:
        pages = self.pages
        if pages >= n:
            return pages
        bs = self.bs
        segs = self.segs
        nseg = len(segs)
        i, off = self._i, self._off
        while pages < n and i < nseg:
            cid, length = segs[i]
            if length - off >= bs:  # whole pages inside segment i: one run
                k = min(n - pages, (length - off) // bs)
                self.starts.append((cid << 64) + off)  # (cid * SHIFT + off: a shift costs less)
                self.counts.append(k)
                self.firsts.append(pages)
                pages += k
                off += k * bs
                if off == length:
                    i, off = i + 1, 0
                continue
            page, i, off = cross_page(segs, i, off, bs)
            if page is None:
                break  # content ended inside this page: it is not full
            self.starts.append(page)
            self.counts.append(1)
            self.firsts.append(pages)
            pages += 1
        self._i, self._off = i, off
        self.pages = pages
        return pages

    def resume(self, prev: PageRuns) -> None:
        """Take prev's runs of the leading full pages the two contents share (their segments up to where
        they differ; prev of the same block size): the pages upto would compute, prev's last run cut where
        the shared pages end (page i's key is the same however its run is cut). Only on runs with no pages
        yet: a conversation's next turn starts from the pages of the turn before."""
        bs = self.bs
        if self.pages or prev.bs != bs:
            return
        a = prev.segs
        segs = self.segs
        n = min(len(a), len(segs))
        cap = prev.pages * bs  # (the tokens of prev's pages: what lies past them is not read)
        pos = 0
        k = 0
        while k < n and pos < cap:
            x = a[k]
            y = segs[k]
            l1 = x[1]
            if x is not y:  # (a conversation's turns share their history's segment tuples)
                if x[0] != y[0]:
                    break
                l2 = y[1]
                if l1 != l2:
                    pos += min(l1, l2)
                    break
            pos += l1
            k += 1
        m = min(pos // bs, prev.pages)
        if m <= 0:
            return
        firsts = prev.firsts
        r = len(firsts)
        while firsts[r - 1] >= m:  # (r: the runs up to the one holding page m - 1)
            r -= 1
        self.starts = prev.starts[:r]
        self.counts = prev.counts[:r]
        self.firsts = firsts[:r]
        self.counts[r - 1] = m - firsts[r - 1]
        self.pages = m
        i = 0
        t = m * bs
        nseg = len(segs)
        while i < nseg:
            l2 = segs[i][1]
            if t < l2:
                break
            t -= l2
            i += 1
        self._i, self._off = i, t

    def key(self, i: int):
        """The key of page i (i < pages)."""
        r = _run_of(self.firsts, i)
        a = self.starts[r]
        if type(a) is int:
            return a + (i - self.firsts[r]) * self.bs
        return a

    def runs(self, i: int, j: int) -> tuple[list, list[int]]:
        """(starts, counts) of pages [i, j) (j <= pages)."""
        firsts, starts, counts, bs = self.firsts, self.starts, self.counts, self.bs
        r = _run_of(firsts, i)
        u = i - firsts[r]
        out_s: list = []
        out_c: list[int] = []
        while i < j:
            a = starts[r]
            c = counts[r] - u
            if c > j - i:
                c = j - i
            out_s.append(a + u * bs if type(a) is int else a)
            out_c.append(c)
            i += c
            r += 1
            u = 0
        return out_s, out_c


def new_runs(segs: list, block_size: int) -> PageRuns:
    """PageRuns(segs, block_size) of segs already as it keeps them (positive lengths, (int, length) tuples),
    taking the list (when compiled, C stores: no argument parsing, no copy)."""
    pr = PageRuns.__new__(PageRuns)
    pr.bs = block_size
    pr.segs = segs
    pr.starts = []
    pr.counts = []
    pr.firsts = []
    pr.pages = 0
    pr._i = 0
    pr._off = 0
    return pr


def _run_of(firsts: list[int], i: int) -> int:
    """bisect_right(firsts, i) - 1: the run holding page i (firsts ascending, firsts[0] = 0 <= i)."""
    lo = 0
    hi = len(firsts)
    while lo < hi:
        mid = (lo + hi) // 2
        f = firsts[mid]
        if i < f:
            hi = mid
        else:
            lo = mid + 1
    return lo - 1


class RadixNode:
    """A run list of cached pages (starts, counts: as PageRuns) and their blocks. depth: index of its first
    page in the prefix it spells."""

    __slots__ = ("starts", "counts", "blocks", "parent", "depth", "children", "lock", "last", "uses",
                 "birth")

    def __init__(self, starts: list, counts: list, blocks: list, parent, depth: int, children: dict,
                 lock: int, last: int, uses: int, birth: int) -> None:
        self.starts = starts
        self.counts = counts
        self.blocks = blocks
        self.parent = parent
        self.depth = depth
        self.children = children
        self.lock = lock
        self.last = last
        self.uses = uses
        self.birth = birth

    def keys(self, bs: int) -> list:
        """The key of every page, bs the block size (for tests and checks)."""
        out = []
        for a, c in zip(self.starts, self.counts, strict=True):
            out.extend(a + t * bs if type(a) is int else a for t in range(c))
        return out


def common_pages(node: RadixNode, pr: PageRuns, i: int, end: int) -> int:
    """How many leading pages of node equal pr's pages i, i + 1, ... (at most end - i; end <= pr.pages)."""
    firsts, starts, counts, bs = pr.firsts, pr.starts, pr.counts, pr.bs
    r = _run_of(firsts, i)
    u = i - firsts[r]
    left = end - i
    j = 0
    kstarts, kcounts = node.starts, node.counts
    for k in range(len(kstarts)):
        a = kstarts[k]
        na = kcounts[k]
        v = 0
        while v < na:
            if j >= left:
                return j
            b = starts[r]
            nb = counts[r]
            if type(a) is int:
                if type(b) is not int or a + v * bs != b + u * bs:
                    return j
                step = na - v
                if nb - u < step:
                    step = nb - u
                if left - j < step:
                    step = left - j
            else:
                if a != b:  # (a page across segments: a run of one, as is b if equal)
                    return j
                step = 1
            j += step
            v += step
            u += step
            if u == nb:
                r += 1
                u = 0
    return j


def _cut(starts: list, counts: list, j: int, bs: int) -> tuple[list, list, list, list]:
    """Runs (starts, counts) cut after page j: (left starts, left counts, right starts, right counts)."""
    r = 0
    while j >= counts[r]:
        j -= counts[r]
        r += 1
    if j == 0:
        return starts[:r], counts[:r], starts[r:], counts[r:]
    a, c = starts[r], counts[r]
    return ([*starts[:r], a], [*counts[:r], j], [a + j * bs, *starts[r + 1:]], [c - j, *counts[r + 1:]])


assert DEPTH_BITS == 24  # (LeafQueue.add inlines lru_key and fifo_key with it, and 2^24 - 1, in C)


class LeafQueue:
    """The evictable leaves, smallest priority first, ties to the leaf filed first: eviction.EvictionQueue's
    order for entries filed one at a time (its batches of one: a heap of (priority, ticket) with lazy
    invalidation), shaped for radix nodes: one heap row per filing, the lru and fifo keys computed inline
    (radix_tree.pxd: C integers), stale rows compacted when they outnumber live ones."""

    __slots__ = ("key", "kind", "_heap", "live", "_ticket")

    def __init__(self, policy: str = "lru") -> None:
        self.key = get_policy(policy)
        self.kind = 1 if self.key is lru_key else 2 if self.key is fifo_key else 0
        self._heap: list = []
        self.live: dict = {}
        """node -> ticket of its live row."""
        self._ticket = 0

    def __len__(self) -> int:
        return len(self.live)

    def __contains__(self, node) -> bool:
        return node in self.live

    def add(self, node: RadixNode) -> None:
        """File a leaf under its key now (a filing replaces any before)."""
        self._ticket += 1
        ticket = self._ticket
        self.live[node] = ticket
        kind = self.kind
        if kind == 1:
            t = node.last  # (unsigned: times below 2^40 shift within 64 bits)
            prio = (t << 24) | (16777215 - node.depth)
        elif kind == 2:
            t = node.birth
            prio = (t << 24) | (16777215 - node.depth)
        else:
            prio = self.key(node.last, node.uses, node.birth, node.depth)
        heap = self._heap
        heappush(heap, (prio, ticket, node))
        if len(heap) > 2 * len(self.live) + 64:
            live = self.live
            heap = [row for row in heap if live.get(row[2]) == row[1]]
            heapify(heap)
            self._heap = heap

    def discard(self, node) -> None:
        self.live.pop(node, None)

    def pop(self) -> RadixNode:
        """Remove and return the leaf with the smallest priority. IndexError when empty."""
        heap = self._heap
        live = self.live
        while heap:
            row = heappop(heap)
            node = row[2]
            if live.get(node) == row[1]:
                del live[node]
                return node
        raise IndexError("no evictable entry")

    def items(self) -> list:
        """The live leaves (for invariant checks), in no particular order."""
        return list(self.live)


class RadixTree:
    """Nodes, locks and the evictable leaves (smallest eviction key first)."""

    __slots__ = ("root", "queue", "clock", "bs")

    def __init__(self, policy: str = "lru", block_size: int = 1) -> None:
        self.bs = block_size
        self.root = RadixNode([], [], [], None, 0, {}, 1, 0, 1, 0)  # lock 1: never evicted
        self.queue = LeafQueue(policy)
        self.clock = 0

    def _enqueue(self, node: RadixNode) -> None:
        self.queue.add(node)

    def match(self, pr: PageRuns, n: int) -> tuple[RadixNode, list[int]]:
        """The deepest node whose path is a prefix of pr's first n pages (split so the path ends at a node
        boundary), and the blocks along that path."""
        node = self.root
        blocks: list[int] = []
        i = 0
        n = min(n, pr.upto(n))
        while i < n:
            child = node.children.get(pr.key(i))
            if child is None:
                break
            j = common_pages(child, pr, i, n)
            if j < len(child.blocks):
                child = self.split(child, j)
            blocks += child.blocks
            node = child
            i += j
        return node, blocks

    def match_length(self, pr: PageRuns, n: int) -> int:
        """Pages of pr's first n the tree holds as a path from the root (match without splitting)."""
        node = self.root
        i = 0
        n = min(n, pr.upto(n))
        while i < n:
            child = node.children.get(pr.key(i))
            if child is None:
                break
            j = common_pages(child, pr, i, n)
            i += j
            if j < len(child.blocks):
                break
            node = child
        return i

    def split(self, node: RadixNode, j: int) -> RadixNode:
        """Cut node after its j-th page; return the new node holding the first j pages (node keeps the
        rest and becomes its only child)."""
        ls, lc, rs, rc = _cut(node.starts, node.counts, j, self.bs)
        mid = RadixNode(ls, lc, node.blocks[:j], node.parent, node.depth, {rs[0]: node},
                        node.lock, node.last, node.uses, node.birth)
        node.parent.children[ls[0]] = mid
        node.starts = rs
        node.counts = rc
        node.blocks = node.blocks[j:]
        node.depth += j
        node.parent = mid
        if node in self.queue:
            self._enqueue(node)  # its depth changed
        return mid

    def add_child(self, parent: RadixNode, starts: list, counts: list, blocks: list[int]) -> RadixNode:
        """A new node under parent, locked once (by the sequence inserting it)."""
        clock = self.clock
        depth = parent.depth + len(parent.blocks)
        child = RadixNode(starts, counts, blocks, parent, depth, {}, 1, clock, 1, clock)
        parent.children[starts[0]] = child
        return child

    def grow(self, node: RadixNode, starts: list, counts: list, blocks: list[int]) -> None:
        """Append pages to a leaf (a run continuing its last one merges into it)."""
        a = node.starts[-1]
        b = starts[0]
        if type(a) is int and type(b) is int and a + node.counts[-1] * self.bs == b:
            node.counts[-1] += counts[0]
            node.starts += starts[1:]
            node.counts += counts[1:]
        else:
            node.starts += starts
            node.counts += counts
        node.blocks += blocks

    def lock(self, node: RadixNode) -> None:
        """One more sequence uses the path root..node."""
        while node is not None:
            node.lock += 1
            if node.lock == 1:
                self.queue.discard(node)
            node = node.parent

    def lock_path(self, node: RadixNode, rc: list[int]) -> int:
        """lock(node) plus one reference (rc, the pool's refcounts) to each block of the path, node by node:
        a tree block's refcount is its node's lock, so an unlocked node's blocks are the cached ones (rc 0).
        Returns how many of the path's blocks were cached."""
        root = self.root
        cached = 0
        while node is not root:
            blocks = node.blocks
            if node.lock == 0:
                self.queue.discard(node)
                cached += len(blocks)
            node.lock += 1
            v = node.lock  # (each block's refcount was its node's lock: it is the new lock)
            for b in blocks:
                rc[b] = v
            node = node.parent
        root.lock += 1
        return cached

    def unlock_path(self, node: RadixNode, rc: list[int], touch: bool) -> int:
        """unlock(node, touch) plus dropping one reference (rc) from each block of the path: the blocks of a
        node no other sequence locks become cached (rc 0). Returns how many stay referenced."""
        self.clock += 1
        clock = self.clock
        root = self.root
        held = 0
        while node is not root:
            blocks = node.blocks
            node.lock -= 1
            v = node.lock  # (each block's refcount was its node's lock: it is the new lock)
            for b in blocks:
                rc[b] = v
            if touch:
                node.last = clock
            if node.lock == 0:
                if not node.children:
                    self._enqueue(node)
            else:
                held += len(blocks)
            node = node.parent
        root.lock -= 1
        if touch:
            root.last = clock
        return held

    def lock_one(self, node: RadixNode) -> None:
        """Extend a sequence's lock by one node below its locked path."""
        node.lock += 1
        if node.lock == 1:
            self.queue.discard(node)

    def unlock(self, node: RadixNode, touch: bool = True) -> None:
        """One sequence stops using the path root..node; with touch its nodes' last use is now."""
        self.clock += 1
        while node is not None:
            node.lock -= 1
            if touch:
                node.last = self.clock
            if node.lock == 0 and not node.children:
                self._enqueue(node)
            node = node.parent

    def hit(self, node: RadixNode) -> None:
        """Count a cache hit on every node of the path root..node."""
        while node is not self.root:
            node.uses += 1
            node = node.parent

    def pop_leaf(self) -> RadixNode:
        """Detach and return the evictable leaf with the smallest key (IndexError when none)."""
        leaf = self.queue.pop()
        parent = leaf.parent
        del parent.children[leaf.starts[0]]
        if parent.lock == 0 and not parent.children:
            self._enqueue(parent)
        return leaf

    def nodes(self) -> list[RadixNode]:
        """Every node but the root, parents before children."""
        out: list[RadixNode] = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node is not self.root:
                out.append(node)
            stack.extend(node.children.values())
        return out
