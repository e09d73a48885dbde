"""A pool's per-block lists and its BlockQueue, driven as HashCachePool drives them (shared by
test_block_queue.py and test_block_queue_heap.py)."""

from __future__ import annotations

from kvsim.kvcache.block_queue import BlockQueue
from kvsim.kvcache.eviction import EVICTION_POLICIES


class QueueModel:
    """n blocks' lists and a queue (`cls`: BlockQueue, or the module loaded again as Python) over them:
    blocks released together (each release its own time from `clock` on, their depths their positions),
    hit, evicted; `want` is the live blocks in the policy's order, `state` the queue's internals."""

    def __init__(self, policy: str, n: int, cls: type = BlockQueue, clock: int = 0) -> None:
        self.n = n
        self.rc, self.filed = [1] * n, [0] * n
        self.last, self.uses, self.birth, self.depth = [0] * n, [1] * n, [0] * n, [0] * n
        self.q = cls(policy, self.rc, self.filed, self.last, self.uses, self.birth, self.depth)
        self.key = EVICTION_POLICIES[policy]
        self.clock = clock

    def release(self, blocks: list[int], touch: bool, uses: int) -> None:
        self.clock += 1
        for j, b in enumerate(blocks):
            self.rc[b], self.filed[b] = 0, self.clock
            if touch:
                self.last[b], self.depth[b] = self.clock, j
                self.uses[b], self.birth[b] = 1 + (b + uses) % 3, b
        if touch:
            self.q.add_run(list(blocks), self.clock)
        else:
            self.q.add_many(list(blocks), self.clock)

    def undo(self, blocks: list[int]) -> None:
        """Evictable blocks hit by an admission that is undone: back at rc 0, their bookkeeping and `filed`
        untouched (HashCachePool.release with touch=False under lru and length)."""
        self.clock += 1
        for b in blocks:
            self.hit(b)
        for b in blocks:
            self.rc[b] = 0
        self.q.revive(list(blocks), self.clock)

    def hit(self, b: int) -> None:
        self.q.discard(b)
        self.rc[b] = 1

    def pop(self, k: int) -> list[int]:
        out = self.q.pop_many(k)
        for b in out:
            self.rc[b] = 1
        return out

    def want(self) -> list[int]:
        live = [b for b in range(self.n) if self.rc[b] == 0]
        key, last, uses, birth, depth = self.key, self.last, self.uses, self.birth, self.depth
        return sorted(live, key=lambda b: (key(last[b], uses[b], birth[b], depth[b]), b))

    def state(self) -> tuple:
        q = self.q
        return ([(h, t, list(rows), top) for h, t, rows, top in q._heap], q.count, q._rows, self.filed,
                self.rc)
