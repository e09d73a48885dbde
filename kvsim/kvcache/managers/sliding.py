"""Page tables of a sliding-window cache group: pages the window has left go back to the pool.

As vLLM's SlidingWindowManager does, a sequence that has computed c tokens keeps the pages from the one
holding token c - window + 1 on (the last window - 1 tokens the next token attends to); the pages before
it are released (`first` moves past them). Sinks are not modelled here: every sliding layer kvsim knows
keeps no KV for them (gpt-oss's sinks are learned logits). Pages are trimmed when a sequence grows (a
block boundary, a prefill chunk) or is forked, so a sequence holds at most one page beyond its window's.
"""

from __future__ import annotations

from kvsim.kvcache.block_pool import BlockPool
from kvsim.kvcache.managers.token_tables import TokenTables


class SlidingTables(TokenTables):
    """TokenTables whose pages before the window are released as the sequence grows."""

    __slots__ = ("window",)

    def __init__(self, pool: BlockPool, block_size: int, window: int) -> None:
        super().__init__(pool, block_size)
        self.window = window

    @classmethod
    def for_group(cls, pool: BlockPool, block_size: int, group, cache_index: int | None) -> SlidingTables:
        return cls(pool, block_size, group.window)

    def _keep_from(self, computed: int) -> int:
        """First logical block still needed once `computed` tokens are computed."""
        return max(0, computed - self.window + 1) // self.bs

    def _drop(self, seq: int, computed: int) -> int:
        """Leading pages of seq the window has left once `computed` tokens are computed (the page being
        written always stays)."""
        return min(self._keep_from(computed) - self.first[seq], len(self.tables[seq]) - 1)

    def freeable(self, seq: int, computed: int) -> int:
        """Pages trim(seq, computed) gives back to the pool (those only this sequence holds)."""
        drop = self._drop(seq, computed)
        if drop <= 0:
            return 0
        rc = self.pool.rc
        return sum(1 for b in self.tables[seq][:drop] if rc[b] == 1)

    def trim(self, seq: int, computed: int) -> None:
        drop = self._drop(seq, computed)
        if drop <= 0:
            return
        table = self.tables[seq]
        gone = table[:drop]
        del table[:drop]
        self.first[seq] += drop
        kept = self.pool.release(gone)
        self.dup -= len(kept) * self.bs  # released pages before the last are full

    def fork(self, parent: int, child: int) -> None:
        """Share parent's pages with child, after giving back those its window has left: a one-chunk
        prefill holds the whole prompt until its next growth, and a child sharing the pages before the
        window would keep them (and count them in `dup`, which token states subtract) for nothing."""
        self.trim(parent, max(self.ntok[parent] - 1, 0))
        super().fork(parent, child)

    def decode_bound(self) -> int:
        """Most pages a sequence holds right after a one-token growth: ceil(window / block_size) + 1 (its
        window's blocks and the page being written). A prefill chunk of c tokens may hold up to
        ceil((c + window - 1) / block_size) + 1 until its next growth, as vLLM does."""
        return -(-self.window // self.bs) + 1

    def check(self, counts: list[int]) -> None:
        """TokenTables' checks, and no page the next token attends to has been given back."""
        super().check(counts)
        for s in self.tables:
            assert self.first[s] <= self._keep_from(max(self.ntok[s] - 1, 0)), \
                f"sliding table of seq {s} trimmed past its window"
