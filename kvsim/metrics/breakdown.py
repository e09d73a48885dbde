"""Summary figures of the KV memory breakdown and of block sharing (docs/metrics.md, `kv.breakdown` and
`kv.sharing_saving`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.kvcache.breakdown import SUMMARY_KEYS
from kvsim.metrics.stats import weighted_sum

if TYPE_CHECKING:
    import pandas as pd


def breakdown_means(timeline: pd.DataFrame, capacity_tokens: int | pd.Series,
                    mean: Callable[[pd.DataFrame, pd.Series], float | None]) -> dict[str, Any]:
    """Each breakdown part as a fraction of the KV capacity (one number, or per timeline row: each
    replica's own in a heterogeneous fleet), averaged with `mean` (the summary's per-replica time-weighted
    mean); None for a part whose column the timeline lacks."""
    out: dict[str, Any] = {}
    for key, col in SUMMARY_KEYS.items():
        out[key] = mean(timeline, timeline[col] / capacity_tokens) if col in timeline.columns else None
    return out


def sharing_saving(timeline: pd.DataFrame) -> float | None:
    """Blocks saved by sharing over blocks without sharing (PagedAttention paper, section 6.3), both
    integrated over time: sum((unshared - used) * hold_s) / sum(unshared * hold_s) over every row of every
    replica. None when no sequence held a block or the timeline lacks the columns."""
    if "kv_unshared_blocks" not in timeline.columns or not len(timeline):
        return None
    hold = timeline["hold_s"].to_numpy(np.float64)
    unshared = weighted_sum(timeline["kv_unshared_blocks"].to_numpy(np.float64), hold)
    if unshared <= 0:
        return None
    used = weighted_sum(timeline["kv_used_blocks"].to_numpy(np.float64), hold)
    return (unshared - used) / unshared
