"""The radix tree of SGLang's RadixAttention, over pages (blocks) of content.

Each node holds a run of page keys (kvsim/kvcache/hashing.py, unchained) and the physical block holding
each page; its children are keyed by their first page key. A path from the root spells a cached prefix.
`match` walks the longest prefix of a page-key list, splitting a node where the match ends inside it.
`lock` counts, on every node of a path, the sequences using it; only unlocked leaves are evictable, and
evicting a leaf can make its parent an evictable leaf. With block_size 1 a page is one token, so matches
have any length; with larger blocks they are rounded down to whole pages, as in SGLang's paged cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvsim.kvcache.eviction import EvictionQueue


@dataclass(slots=True, eq=False)
class RadixNode:
    """A run of cached pages. depth: index of its first page in the prefix it spells."""

    keys: list
    blocks: list[int]
    parent: RadixNode | None
    depth: int
    children: dict = field(default_factory=dict)
    lock: int = 0
    last: int = 0
    uses: int = 1
    birth: int = 0


class RadixTree:
    """Nodes, locks and the evictable leaves (smallest eviction key first)."""

    __slots__ = ("root", "queue", "clock")

    def __init__(self, policy: str = "lru") -> None:
        self.root = RadixNode([], [], None, 0)
        self.root.lock = 1  # never evicted
        self.queue = EvictionQueue(policy)
        self.clock = 0

    def _enqueue(self, node: RadixNode) -> None:
        self.queue.add(node, node.last, node.uses, node.birth, node.depth)

    def match(self, pages: list, n: int) -> tuple[RadixNode, list[int]]:
        """The deepest node whose path is a prefix of pages[:n] (split so the path ends at a node
        boundary), and the blocks along that path."""
        node = self.root
        blocks: list[int] = []
        i = 0
        n = min(n, len(pages))
        while i < n:
            child = node.children.get(pages[i])
            if child is None:
                break
            j = common_length(child.keys, pages, i, n)
            if j < len(child.keys):
                child = self.split(child, j)
            blocks.extend(child.blocks)
            node = child
            i += j
            if j < len(node.keys):
                break
        return node, blocks

    def match_length(self, pages: list, n: int) -> int:
        """Pages of pages[:n] the tree holds as a path from the root (match without splitting)."""
        node = self.root
        i = 0
        n = min(n, len(pages))
        while i < n:
            child = node.children.get(pages[i])
            if child is None:
                break
            j = common_length(child.keys, pages, i, n)
            i += j
            if j < len(child.keys):
                break
            node = child
        return i

    def split(self, node: RadixNode, j: int) -> RadixNode:
        """Cut node after its j-th page; return the new node holding the first j pages (node keeps the
        rest and becomes its only child)."""
        mid = RadixNode(node.keys[:j], node.blocks[:j], node.parent, node.depth, {node.keys[j]: node},
                        node.lock, node.last, node.uses, node.birth)
        node.parent.children[node.keys[0]] = mid
        node.keys = node.keys[j:]
        node.blocks = node.blocks[j:]
        node.depth += j
        node.parent = mid
        if node in self.queue:
            self._enqueue(node)  # its depth changed
        return mid

    def add_child(self, parent: RadixNode, keys: list, blocks: list[int]) -> RadixNode:
        """A new node under parent, locked once (by the sequence inserting it)."""
        child = RadixNode(keys, blocks, parent, parent.depth + len(parent.keys), lock=1,
                          last=self.clock, birth=self.clock)
        parent.children[keys[0]] = child
        return child

    def lock(self, node: RadixNode) -> None:
        """One more sequence uses the path root..node."""
        while node is not None:
            node.lock += 1
            if node.lock == 1:
                self.queue.discard(node)
            node = node.parent

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
        del parent.children[leaf.keys[0]]
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


def common_length(keys: list, pages: list, start: int, end: int) -> int:
    """How many leading keys equal pages[start:end] element by element."""
    n = min(len(keys), end - start)
    j = 0
    while j < n and keys[j] == pages[start + j]:
        j += 1
    return j
