"""Held-out accuracy of the kernel grids (kvsim/cost/kernel_grid.py) on a device's kernel tables.

Per table, rows are grouped by their shape class (`FAMILIES`: the key columns, the kernel included) and
laid on a grid of the size axes. Every 5th interior value of each axis (positions 2, 7, 12, ... of its
sorted values; never the first or last) is held out: the grid is built from the rows on none of those
values and predicts the rows on any of them. A row's error is |predicted - measured| / measured; a row
the grid cannot reach (a hole at a cell corner) counts in `unreached`, not in the errors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvsim.cost.kernel_grid import KernelGrid

FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "decode_attention": (("kernel", "q_heads", "kv_heads", "head_dim", "dtype", "kv_dtype", "window"),
                         ("batch", "context")),
    "prefill_attention": (("kernel", "q_heads", "kv_heads", "head_dim", "dtype", "kv_dtype", "window",
                           "prefix"), ("batch", "tokens")),
    "gemm": (("kernel", "dtype"), ("m", "n", "k")),
    "allreduce": (("kernel", "backend", "dtype", "gpus"), ("elements",)),
    "moe": (("kernel", "dtype", "hidden", "inter", "topk", "experts", "tp", "ep", "distribution"),
            ("tokens",)),
    "mla_decode": (("kernel", "model", "dtype", "kv_dtype", "gemm_dtype", "heads", "query", "tp"),
                   ("batch", "context")),
    "mla_prefill": (("kernel", "model", "dtype", "kv_dtype", "gemm_dtype", "heads", "prefix", "tp"),
                    ("batch", "tokens")),
    "gdn": (("kernel", "phase", "model", "d_model", "d_conv", "k_heads", "k_dim", "v_heads", "v_dim"),
            ("batch", "seq_len")),
}
"""Table -> (shape-class key columns, size axes)."""
EVERY = 5


@dataclass(frozen=True, slots=True)
class HeldOut:
    """Errors of one table's held-out rows: their count, the median / p90 / mean absolute percentage
    error, and how many held-out rows the grid could not reach."""

    rows: int
    median: float
    p90: float
    mape: float
    unreached: int


def _held_values(values: np.ndarray) -> np.ndarray:
    return values[[i for i in range(2, len(values) - 1, EVERY)]]


def held_out_errors(df, keys: tuple[str, ...], axes: tuple[str, ...]) -> tuple[np.ndarray, int]:
    """(absolute percentage errors of every held-out row, rows unreached) over the shape classes of df."""
    errors: list[float] = []
    unreached = 0
    for _, group in df.groupby(list(keys), sort=True):
        held_mask = np.zeros(len(group), dtype=bool)
        for a in axes:
            vals = np.unique(group[a].to_numpy())
            held_mask |= np.isin(group[a].to_numpy(), _held_values(vals))
        if not held_mask.any() or held_mask.all():
            continue
        grid = KernelGrid.from_rows(group[~held_mask], axes)
        test = group[held_mask]
        points = test[list(axes)].to_numpy(np.float64)
        for p, true in zip(points, test["latency_s"].to_numpy(np.float64), strict=True):
            got = grid(*p)
            if got is None:
                unreached += 1
            else:
                errors.append(abs(got - true) / true)
    return np.asarray(errors), unreached


def held_out(tables, table: str) -> HeldOut | None:
    """The held-out errors of one table of a KernelTables (None if the device lacks it)."""
    if table not in tables:
        return None
    keys, axes = FAMILIES[table]
    err, unreached = held_out_errors(tables[table], keys, axes)
    if not len(err):
        return HeldOut(0, float("nan"), float("nan"), float("nan"), unreached)
    return HeldOut(len(err), float(np.median(err)), float(np.quantile(err, 0.9)), float(err.mean()),
                   unreached)
