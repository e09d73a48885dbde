"""The line a run in which no request completed starts with (`kvsim run`'s first console line, and the
warning `kvsim.run` issues): an empty latency table otherwise looks like a result."""

from __future__ import annotations

from typing import Any


def nothing_completed(summary: dict[str, Any], meta: dict[str, Any],
                      figures: str = "figures below") -> str | None:
    """The first console line of a run in which no request completed (an empty latency table otherwise
    looks like a result): how many were refused outright and why (meta's `refusals`), or None when any
    completed. `figures` names where the empty latency figures are."""
    req = summary.get("requests") or {}
    total, done = req.get("total") or 0, req.get("completed") or 0
    if not total or done:
        return None
    refusals = meta.get("refusals") or {}
    why = "; ".join(f"{n} {reason}" for reason, n in refusals.items())
    refused = sum(refusals.values())
    tail = f": {refused} refused ({why})" if refused else " (none refused: the run ended first)"
    return (f"warning: 0 of {total} requests completed{tail}; the latency {figures} are empty "
            "(scheduler.max_model_len, kv.gpu_memory_utilization and kv.num_gpu_blocks_override set the "
            "limits)")
