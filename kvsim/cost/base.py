"""The cost-model protocol: how long one engine iteration takes."""

from __future__ import annotations

from typing import Any, Protocol

from kvsim.cost.batch import Batch


class CostModel(Protocol):
    """Maps a Batch (what an iteration computes and moves) to its duration in seconds."""

    name: str
    request_overhead: float
    """Seconds from a request's arrival until the engine may schedule it (cost.request_overhead_s)."""

    def step_time(self, batch: Batch) -> float: ...

    def prefetch_overlap(self, batch: Batch) -> tuple[float, float, float]:
        """(forward time the batch's prefetch overlaps, its transfer time, the part step_time adds because
        compute does not hide it); read by the replica only for batches with prefetch_bytes."""
        ...

    def describe(self) -> dict[str, Any]:
        """Parameters that determine the timing (goes into summary.json)."""
        ...
