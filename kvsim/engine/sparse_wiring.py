"""Glue between the simulation and token-level sparsity: build the scheduler, register its columns with the
recorder, hand each row its values, and the run totals (meta key `sparsity`).

Which settings token-level eviction models (kv.layout: paged, one sequence per request) is a rule of the
scenario schema (kvsim/scenario.py `cross_check`), checked before a Simulation starts.
"""

from __future__ import annotations

import math
from typing import Any

from kvsim.engine.scheduler import SchedulerLimits
from kvsim.engine.sparse_scheduler import SparseScheduler
from kvsim.kvcache.sparsity.tracker import REQUEST_COLUMNS, TIMELINE_COLUMNS
from kvsim.metrics.recorder import ColumnGroup, Recorder

TIMELINE_GROUP = ColumnGroup(TIMELINE_COLUMNS, default=0)
"""Idle timeline rows get 0."""
REQUEST_GROUP = ColumnGroup(REQUEST_COLUMNS, default=math.nan)
"""Requests that never decoded (refused, or finished at the end of prefill) get NaN."""


def build_scheduler(limits: SchedulerLimits, kv, sc, kv_bytes_per_token: float,
                    host_bandwidth: float) -> SparseScheduler:
    """The scheduler for scenario sc, whose kv.sparsity.policy is not none."""
    return SparseScheduler(limits, kv, sc.kv.sparsity, kv_bytes_per_token, host_bandwidth)


def register_columns(recorder: Recorder) -> None:
    """Add the policy's per-iteration and per-request columns to the recorder (before the run)."""
    recorder.add_timeline_columns(TIMELINE_GROUP)
    recorder.add_request_columns(REQUEST_GROUP)


def request_values(sched: SparseScheduler, rid: int) -> tuple | None:
    """Request rid's values of the sparsity request columns, or None if it never decoded."""
    rs = sched.stats.get(rid)
    return None if rs is None else rs.row()


def run_totals(scheds: list[SparseScheduler]) -> dict[str, Any]:
    """The `sparsity` entry of the run's meta: the policy's settings and its totals over all replicas."""
    cfg = scheds[0].cfg
    tok = scheds[0].tok_bytes
    totals = {k: sum(s.totals[k] for s in scheds) for k in scheds[0].totals}
    return {
        "policy": cfg.policy,
        "reclaim": cfg.reclaim,
        "budget_tokens": scheds[0].policy.budget(0) if cfg.budget_fraction is None else None,
        "budget_fraction": cfg.budget_fraction,
        "offload": scheds[0].policy.offload,
        "compaction_copy_bytes": totals["copy_tokens"] * tok,
        "offload_bytes": totals["offload_tokens"] * tok,
        "recall_bytes": totals["recall_tokens"] * tok,
        "host_bytes_max": max(s.host_tokens_max for s in scheds) * tok,
        "host_bandwidth": scheds[0].host_bw,
        "decode_kv_tokens_full": sum(rs.full_sum for s in scheds for rs in s.stats.values()),
        "decode_kv_tokens_kept": sum(rs.kept_sum for s in scheds for rs in s.stats.values()),
    }
