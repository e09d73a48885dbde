"""Value objects at the boundary of a replica's KV caches.

- `ContextSums`: what the scheduler knows of the KV its sequences hold, handed to the KV manager so it can
  count token states without reading the scheduler (totals over the sequences on the GPU).
- `Hit`: what an admission found in the caches: prompt tokens served, and by which tier (the GPU only,
  until tiers below it exist).
- `KVView`: a read-only view of one replica's caches, for a router or a report: capacity, free and used
  pages, and what of a request's prompt would hit (tokens, by tier), without changing anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class ContextSums(NamedTuple):
    """Totals over the sequences holding KV on one replica: `tokens` = sum of their KV lengths (a shared
    slot once per sequence); `windowed[i]` = sum of min(length, windows[i]) for the KV manager's
    `windows`; `seqs` = how many sequences. (Immutable; a NamedTuple: built every iteration.)"""

    tokens: int
    windowed: tuple[int, ...] = ()
    seqs: int = 0


@dataclass(frozen=True, slots=True)
class Hit:
    """Prompt tokens an admission found cached (`tokens`), and per tier how many (`by_tier`)."""

    tokens: int = 0
    by_tier: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def gpu(tokens: int) -> Hit:
        return Hit(tokens, (("gpu", tokens),) if tokens else ())


NO_HIT = Hit()


class KVView:
    """Read-only view of one KV manager (see the module docstring). `hit_tokens(request)` asks the
    manager's `peek_hit`, which must not change its state (no eviction order, no refcounts)."""

    __slots__ = ("_kv", "_local")

    def __init__(self, kv) -> None:
        self._kv = kv
        self._local = getattr(kv, "peek_local", None)

    @property
    def num_blocks(self) -> int:
        return self._kv.num_blocks

    @property
    def free_blocks(self) -> int:
        return self._kv.num_free_blocks

    @property
    def used_blocks(self) -> int:
        return self._kv.used_blocks

    @property
    def usage(self) -> float:
        """Share of the pool referenced by sequences."""
        n = self._kv.num_blocks
        return self._kv.used_blocks / n if n else 0.0

    def hit(self, request, prompt_tokens: int | None = None) -> Hit:
        """What its caches would serve of `request`'s prompt now: tokens, and per tier (`Hit.by_tier`:
        gpu, then cpu / ssd / remote where the replica has those tiers)."""
        prompt = request.prompt_len if prompt_tokens is None else prompt_tokens
        return self._kv.peek_hit(request, prompt)

    def hit_tokens(self, request, prompt_tokens: int | None = None) -> int:
        """Prompt tokens of `request` its caches would serve now."""
        return self.hit(request, prompt_tokens).tokens

    def local_hit_tokens(self, request) -> int | None:
        """hit_tokens(request) where every hit token would be on the replica's GPU (a prefix-hash cache
        without tiers below it), else None (ask `hit` for the tiers)."""
        local = self._local
        return None if local is None else local(request, request.prompt_len)
