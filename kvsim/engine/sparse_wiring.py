"""Glue between the simulation and token-level sparsity: build the scheduler, attach results to the frames."""

from __future__ import annotations

from typing import Any

import pandas as pd

from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.sparse_scheduler import TIMELINE_COLUMNS, SparseScheduler
from kvsim.errors import KvsimError
from kvsim.kvcache.sparsity.tracker import REQUEST_COLUMNS


def check_compatible(sc) -> None:
    """One-line errors for settings token-level eviction does not model."""
    kv = sc.kv
    layout = getattr(kv, "layout", "paged")
    if layout != "paged":
        raise KvsimError(f"kv.sparsity.policy: '{kv.sparsity.policy}' needs kv.layout: paged "
                         f"(got '{layout}')")
    wl = sc.workload
    if wl.n > 1 or getattr(wl, "beam_width", 1) > 1:
        raise KvsimError(f"kv.sparsity.policy: '{kv.sparsity.policy}' does not model parallel sampling or "
                         "beam search (set workload.n and workload.beam_width to 1)")


def build_scheduler(limits: SchedulerLimits, kv, sc, kv_bytes_per_token: float,
                    host_bandwidth: float) -> Scheduler:
    """The scheduler for scenario sc: the base one when kv.sparsity.policy is none."""
    cfg = sc.kv.sparsity
    if not cfg.enabled:
        return Scheduler(limits, kv)
    check_compatible(sc)
    return SparseScheduler(limits, kv, cfg, kv_bytes_per_token, host_bandwidth)


def attach(replicas, requests: pd.DataFrame, timeline: pd.DataFrame,
           meta: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Add the policy's per-request columns, per-iteration timeline columns and run totals (meta key
    `sparsity`). Requests that never decoded get NaN; idle timeline rows get 0."""
    scheds = [r.sched for r in replicas if isinstance(r.sched, SparseScheduler)]
    if not scheds:
        return requests, timeline, meta
    rows = {rid: rs.row() for s in scheds for rid, rs in s.stats.items()}
    per_req = pd.DataFrame.from_dict(rows, orient="index", columns=list(REQUEST_COLUMNS))
    per_req.index.name = "rid"
    requests = requests.merge(per_req.reset_index(), on="rid", how="left")
    frames = []
    for r in replicas:
        cols = r.sched.cols
        df = pd.DataFrame({k: pd.Series(v, dtype="float64" if v.typecode == "d" else "int64")
                           for k, v in cols.items()})
        df.insert(0, "replica", r.index)
        frames.append(df)
    per_it = pd.concat(frames, ignore_index=True)
    timeline = timeline.merge(per_it, on=["replica", "iteration"], how="left")
    for k, t in TIMELINE_COLUMNS.items():
        if k != "iteration":
            timeline[k] = timeline[k].fillna(0).astype("float64" if t == "d" else "int64")
    cfg = scheds[0].cfg
    tok = scheds[0].tok_bytes
    totals = {k: sum(s.totals[k] for s in scheds) for k in scheds[0].totals}
    meta = dict(meta)
    meta["sparsity"] = {
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
    return requests, timeline, meta
