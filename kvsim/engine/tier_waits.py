"""Tier-load waits: when the KV a prefix hit found below the GPU (cpu, ssd, remote tiers) has arrived,
and whether the admitted group waits for it before its prefill."""

from __future__ import annotations

from collections.abc import Callable

from kvsim.engine.group import Group


class TierWaits:
    """The scheduler's side of KV tiers. `loader(now, hit.by_tier) -> arrival time` of the KV a hit loads
    from below the GPU (kvsim/kvcache/links.py TierLinks.load). Whether the group waits for it before its
    prefill (blocking) or the iteration that prefills it waits (pipelined: Batch.kv_load_wait_s) is
    SchedulerLimits.tier_load."""

    __slots__ = ("loader",)

    def __init__(self, loader: Callable[[float, tuple], float]) -> None:
        self.loader = loader

    def arrival(self, now: float, g: Group, by_tier: tuple) -> float:
        """When the KV of g's hit (`by_tier`) is on the GPU; a load from below the GPU adds its wait to
        g.load_wait_s and its tokens per tier to g.tier_loaded. Called once per admission that goes ahead
        (the KV manager loads the blocks when they are allocated or reserved right after)."""
        if by_tier and (len(by_tier) > 1 or by_tier[0][0] != "gpu"):
            ready = self.loader(now, by_tier)
            g.load_wait_s += ready - now
            loaded = g.tier_loaded
            if loaded is None:
                loaded = g.tier_loaded = {}
            for medium, tokens in by_tier:
                if medium != "gpu":
                    loaded[medium] = loaded.get(medium, 0) + tokens
            return ready
        return now


def next_load_s(prefilling, now: float) -> float | None:
    """When the first blocking load (or KV transfer) still in flight for one of `prefilling` arrives
    (None if none): a replica with nothing else to run waits until then."""
    times = [g.ready_s for g in prefilling if g.ready_s > now]
    return min(times) if times else None
