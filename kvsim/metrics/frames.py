"""A run's request and timeline frames as the summary, its fleet section and the plots read them: which
requests completed, the makespan, the timeline's hold_s, and each replica's KV capacity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvsim.metrics.stats import plain

if TYPE_CHECKING:
    import pandas as pd


def with_hold(timeline: pd.DataFrame) -> pd.DataFrame:
    """The timeline with hold_s, derived as Recorder.timeline_frame does when a hand-built frame lacks it."""
    if "hold_s" in timeline.columns:
        return timeline
    df = timeline.copy()
    nxt = df.groupby("replica", sort=False)["t_s"].shift(-1)
    df["hold_s"] = (nxt - df["t_s"]).fillna(df["dt_s"])
    return df


def rejected(requests: pd.DataFrame) -> pd.Series:
    """The requests' `rejected` column (all 0 when the frame has none)."""
    if "rejected" in requests.columns:
        return requests["rejected"]
    import pandas as pd  # (a frame came in: pandas is loaded)

    return pd.Series(0, index=requests.index)


def completed_mask(requests: pd.DataFrame) -> pd.Series:
    """Completed requests: a finish_s and not rejected."""
    return requests["finish_s"].notna() & (rejected(requests) == 0)


def completed(requests: pd.DataFrame) -> pd.DataFrame:
    """The completed requests' rows (when every request completed: a frame sharing the columns, no copy)."""
    mask = completed_mask(requests)
    if mask.all():
        return requests.copy(deep=False)  # shares the columns (copy-on-write keeps them apart)
    return requests[mask]


def makespan_s(requests: pd.DataFrame) -> float | None:
    """Last finish_s over completed requests minus first arrival_s over all requests; None if undefined."""
    finish = requests.loc[completed_mask(requests), "finish_s"]
    if finish.empty:
        return None
    return plain(finish.max() - requests["arrival_s"].min())


def replica_capacities(replicas: list[dict[str, Any]], pools: list[dict[str, Any]] | None,
                       block_size: Any) -> dict[int, tuple[float, float]]:
    """Replica index -> (capacity_blocks, block_size) of a fleet: each replica's own `capacity_blocks`, and
    its `block_size` if it has one, else its pool's, else `block_size`. A figure that is missing or not
    positive is NaN (the rows of that replica drop out of the time-weighted means)."""
    pool_bs = {p.get("name"): p.get("block_size") for p in pools or ()}
    out: dict[int, tuple[float, float]] = {}
    for r in replicas:
        bs = r.get("block_size")
        if bs is None:
            bs = pool_bs.get(r.get("pool"))
        if bs is None:
            bs = block_size
        out[int(r["index"])] = (_positive(r.get("capacity_blocks")), _positive(bs))
    return out


def _positive(x: Any) -> float:
    x = plain(x)
    return float(x) if isinstance(x, (int, float)) and x > 0 else float("nan")


def row_capacity(timeline: pd.DataFrame, capacities: dict[int, tuple[float, float]]
                 ) -> tuple[pd.Series, pd.Series]:
    """(capacity_blocks, block_size) of each timeline row's replica, as float Series on the timeline's
    index (NaN for a replica `capacities` lacks)."""
    replica = timeline["replica"]
    blocks = replica.map({k: v[0] for k, v in capacities.items()}).astype("float64")
    sizes = replica.map({k: v[1] for k, v in capacities.items()}).astype("float64")
    return blocks, sizes
