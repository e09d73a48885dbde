"""The recorder columns of token-level sparsity (kvsim/engine/sparse_sizing.py): the column groups, their
registration before the run, and the run totals (meta key `sparsity`). docs/sparsity.md defines them.

Which settings token-level eviction models (kv.layout: paged, one sequence per request) is a rule of the
scenario schema (kvsim/scenario.py `cross_check`), checked before a Simulation starts.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvsim.metrics.recorder import ColumnGroup, Recorder

if TYPE_CHECKING:  # annotations only: a run without kv.sparsity does not load the sizing (start-up)
    from kvsim.engine.sparse_sizing import SparseSizing

REQUEST_COLUMNS: dict[str, str] = {
    # name: array typecode ('q' int64, 'd' float64); docs/sparsity.md defines them
    "sparsity_decode_steps": "q",
    "sparsity_full_tokens": "q",
    "sparsity_kept_tokens": "d",
    "sparsity_kept_fraction": "d",
    "sparsity_mass": "d",
    "sparsity_rereads": "q",
    "sparsity_reread_tokens": "q",
    "sparsity_reread_lost_tokens": "d",
    "sparsity_recalled_tokens": "d",
    "sparsity_recall_bytes": "d",
    "sparsity_stall_s": "d",
    "sparsity_prefetch_bytes": "d",
    "sparsity_host_evicted_tokens": "d",
}
"""Columns added to requests.parquet when a policy is on, in `RequestStats.row()` order; a request that
never decoded has no RequestStats and gets NaN (an int column with a NaN in it is float64)."""

TIMELINE_COLUMNS: dict[str, str] = {
    # name: array typecode; idle rows get 0
    "kv_full_tokens": "q",    # KV tokens the running sequences would hold without eviction
    "kv_full_blocks": "q",    # blocks their tables would hold without eviction
    "kv_table_blocks": "q",   # blocks their tables hold
    "kv_hole_slots": "q",     # evicted slots inside held blocks (reclaim: block)
    "kv_host_tokens": "q",    # KV tokens offloaded to host memory
    "recall_bytes": "d",      # KV moved host -> GPU this iteration (re-read recalls and prefetch)
    "offload_bytes": "d",     # KV written to host this iteration
    "kv_copy_bytes": "d",     # KV copied on device by compaction this iteration
    "prefetch_bytes": "d",    # of recall_bytes, the per-step prefetch (overlapped with compute)
    "prefetch_exposed_s": "d",  # seconds of the prefetch the forward pass did not hide
    "transfer_bound": "q",    # 1 when the prefetch transfer exceeded the compute it overlaps
}
"""Columns added to timeline.parquet when a policy is on, in the order `SparseSizing.timeline_values()`
gives them."""

TIMELINE_GROUP = ColumnGroup(TIMELINE_COLUMNS, default=0)
"""Idle timeline rows get 0."""
REQUEST_GROUP = ColumnGroup(REQUEST_COLUMNS, default=math.nan)
"""Requests that never decoded (refused, or finished at the end of prefill) get NaN."""


def register_columns(recorder: Recorder) -> None:
    """Add the policy's per-iteration and per-request columns to the recorder (before the run)."""
    recorder.add_timeline_columns(TIMELINE_GROUP)
    recorder.add_request_columns(REQUEST_GROUP)


def run_totals(sizings: list[SparseSizing]) -> dict[str, Any]:
    """The `sparsity` entry of the run's meta: the policy's settings and its totals over all replicas."""
    first = sizings[0]
    cfg = first.cfg
    tok = first.tok_bytes
    totals = {k: sum(s.totals[k] for s in sizings) for k in first.totals}
    return {
        "policy": cfg.policy,
        "reclaim": cfg.reclaim,
        "budget_tokens": first.policy.budget(0) if cfg.budget_fraction is None else None,
        "budget_fraction": cfg.budget_fraction,
        "offload": first.policy.offload,
        "block_tables": cfg.block_tables,
        "selection": cfg.selection,
        "kv_heads": first.heads,
        "pool_kernel": cfg.pool_kernel if cfg.policy in ("snapkv", "pyramidkv") else None,
        "prefetch": first.policy.prefetch,
        "compaction_copy_bytes": totals["copy_tokens"] * tok,
        "offload_bytes": totals["offload_tokens"] * tok,
        "recall_bytes": totals["recall_tokens"] * tok,
        "prefetch_bytes": totals["prefetch_tokens"] * tok,
        "host_evicted_bytes": totals["evicted_tokens"] * tok,
        "host_pool_bytes": (first.host_pool_bytes if first.offload and math.isfinite(first.host_pool_bytes)
                            else None),
        "host_bytes_max": max(s.host_tokens_max for s in sizings) * tok,
        "host_bandwidth": first.host_bw,
        "decode_kv_tokens_full": sum(rs.full_sum for s in sizings for rs in s.stats.values()),
        "decode_kv_tokens_kept": sum(rs.kept_sum for s in sizings for rs in s.stats.values()),
    }
