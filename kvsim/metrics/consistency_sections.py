"""The consistency checker's sections (kvsim/metrics/consistency.py) of every run: requests, throughput,
latency, concurrency, kv, prefix_cache, cost, slo and goodput, tiers, sparsity -- each figure recomputed
from its definition in docs/metrics.md and compared."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kvsim.kvcache.breakdown import SUMMARY_KEYS
from kvsim.metrics.consistency_core import MISSING, Checker, Mismatch
from kvsim.metrics.consistency_stats import (
    Tables,
    column,
    finite,
    largest,
    percentile,
    pstats,
    ratio_pos,
    tw_quantile,
)
from kvsim.schema import objectives


def check_requests(c: Checker, t: Tables) -> None:
    src = "requests.parquet"
    d = t.done
    sid = column(t.rq, "session", -1.0)
    sessions = {s for s in sid.tolist() if s >= 0}
    c.eq("requests", {
        "total": len(t.rq), "completed": int(d.sum()), "rejected": int(t.rejected.sum()),
        "prompt_tokens": int(t.prompt[d].sum()), "output_tokens": int((t.out_len * t.n)[d].sum()),
        "cached_tokens": int(column(t.rq, "cached_tokens", 0.0)[d].sum()),
        "preempted": int((column(t.rq, "preemptions", 0.0)[d] > 0).sum()),
        "sessions": len(sessions) or None,
        "requests_per_session": int((sid >= 0).sum()) / len(sessions) if sessions else None,
    }, src)


def check_throughput(c: Checker, t: Tables) -> dict[str, Any]:
    d = t.done
    out_tok = math.fsum((t.out_len * t.n)[d])
    total_tok = out_tok + math.fsum(t.prompt[d])
    span = float(t.arrival.max() - t.arrival.min()) if len(t.arrival) else None
    offered = (len(t.arrival) - 1) / span if span and len(t.arrival) > 1 else None
    sid = column(t.rq, "session", -1.0)
    starts: dict[float, float] = {}
    for s, a in zip(sid.tolist(), t.arrival.tolist(), strict=True):
        if s >= 0:
            starts[s] = min(a, starts.get(s, math.inf))
    first_starts = sorted(starts.values())
    s_span = first_starts[-1] - first_starts[0] if first_starts else None
    fig = {
        "makespan_s": t.makespan,
        "requests_per_s": t.rate(int(d.sum())),
        "output_tokens_per_s": t.rate(out_tok),
        "total_tokens_per_s": t.rate(total_tok),
        "arrival_span_s": span,
        "offered_requests_per_s": offered,
        "offered_tokens_per_s": (None if offered is None else
                                 offered * math.fsum(t.prompt + t.out_len * t.n) / len(t.arrival)),
        "sessions_per_s": ((len(first_starts) - 1) / s_span
                           if s_span and len(first_starts) > 1 else None),
    }
    c.eq("throughput", fig, "requests.parquet")
    return fig


def check_latency(c: Checker, t: Tables) -> None:
    c.eq("latency", {"ttft_s": pstats(t.ttft), "tpot_s": pstats(t.tpot), "e2e_s": pstats(t.e2e[t.done]),
                     "queue_s": pstats(t.queue)}, "requests.parquet")


def check_concurrency(c: Checker, t: Tables) -> None:
    running, waiting = column(t.tl, "running_reqs"), column(t.tl, "waiting")
    c.eq("concurrency", {
        "mean": t.per_replica_mean(running), "p50": tw_quantile(running, t.hold, 0.5),
        "p99": tw_quantile(running, t.hold, 0.99), "max": largest(running),
        "waiting_mean": t.per_replica_mean(waiting), "waiting_max": largest(waiting),
    }, "timeline.parquet")
    c.eq("preemptions", int(column(t.tl, "preempted", 0.0).sum()), "timeline.parquet", exact=True)
    # each preemption of a request preempts its n sequences (a beam search's width is not in the table)
    if not _beams(c.summary):
        c.eq("preemptions", int((column(t.rq, "preemptions", 0.0) * t.n).sum()),
             "requests.parquet (preemptions x n)", exact=True)
    c.eq("iterations", int(t.busy.sum()), "timeline.parquet", exact=True)
    c.eq("cow_copies", int(column(t.tl, "cow_copies", 0.0).sum()), "timeline.parquet", exact=True)


def _beams(summary: dict[str, Any]) -> bool:
    """Whether the scenario's workload (or a component of its mix) runs beam search."""
    wl = (summary.get("scenario") or {}).get("workload") or {}
    parts = [wl, *(wl.get("mix") or [])]
    return any((p or {}).get("beam_width", 1) > 1 for p in parts)


def _row_capacity(c: Checker, t: Tables) -> tuple[np.ndarray, np.ndarray] | None:
    """(capacity_blocks, block_size) of each timeline row's replica: the run's, or in a fleet each
    replica's own (fleet.per_replica); NaN where unknown."""
    per = (c.summary.get("fleet") or {}).get("per_replica")
    if per is None:
        blocks, bs = c.get("kv.capacity_blocks"), c.get("kv.block_size")
        if not blocks or not bs:
            return None
        return np.full(len(t.tl), float(blocks)), np.full(len(t.tl), float(bs))
    caps = {p["index"]: (p.get("capacity_blocks"), p.get("block_size")) for p in per}

    def pos(x: Any) -> float:
        return float(x) if isinstance(x, (int, float)) and x > 0 else math.nan

    blocks = np.array([pos(caps.get(int(r), (None, None))[0]) for r in t.t_replica])
    bs = np.array([pos(caps.get(int(r), (None, None))[1]) for r in t.t_replica])
    c.eq("kv.capacity_blocks", _common([pos(v[0]) for v in caps.values()]), "fleet.per_replica")
    c.eq("kv.block_size", _common([pos(v[1]) for v in caps.values()]), "fleet.per_replica")
    if np.isnan(blocks * bs).all():
        return None
    return blocks, bs


def _common(values: list[float]) -> int | None:
    if not values or any(math.isnan(v) or v != values[0] for v in values):
        return None
    return int(values[0])


def check_kv(c: Checker, t: Tables) -> None:
    blocks, bs, bpb = c.get("kv.capacity_blocks"), c.get("kv.block_size"), c.get("kv.bytes_per_block")
    c.eq("kv.capacity_tokens", blocks * bs if blocks is not None and bs is not None else None, "kv figures")
    c.eq("kv.capacity_bytes", blocks * bpb if blocks is not None and bpb else None, "kv figures")
    cap = _row_capacity(c, t)
    src = "timeline.parquet"
    keys = ("utilization_mean", "utilization_max", "used_blocks_mean", "used_blocks_max",
            "cached_blocks_mean", "internal_fragmentation_mean", "sharing_saving")
    if cap is None or not len(t.tl):
        c.eq("kv", dict.fromkeys(keys), src)
        c.eq("kv.breakdown", dict.fromkeys(SUMMARY_KEYS), src)
        return
    rb, rs = cap
    tokens = rb * rs
    states, used = column(t.tl, "kv_token_states"), column(t.tl, "kv_used_blocks")
    c.eq("kv", {
        "utilization_mean": t.per_replica_mean(states / tokens), "utilization_max": largest(states / tokens),
        "used_blocks_mean": t.per_replica_mean(used / rb), "used_blocks_max": largest(used / rb),
        "cached_blocks_mean": t.per_replica_mean(column(t.tl, "kv_cached_blocks") / rb),
        "internal_fragmentation_mean": t.per_replica_mean((used * rs - states) / tokens),
    }, src)
    c.eq("kv.breakdown", {k: (t.per_replica_mean(column(t.tl, col) / tokens) if col in t.tl.columns else None)
                          for k, col in SUMMARY_KEYS.items()}, src)
    saving = None
    if "kv_unshared_blocks" in t.tl.columns:
        unshared = math.fsum(column(t.tl, "kv_unshared_blocks") * t.hold)
        if unshared > 0:
            saving = (unshared - math.fsum(used * t.hold)) / unshared
    c.eq("kv.sharing_saving", saving, src)


def check_prefix(c: Checker, t: Tables) -> None:
    d = t.done
    prompt = t.prompt[d]
    cached = int(column(t.rq, "cached_tokens", 0.0)[d].sum())
    bs = c.get("kv.block_size") or (c.summary.get("scenario") or {}).get("kv", {}).get("block_size")
    blocks = int(np.ceil(prompt / bs).sum()) if bs else 0
    c.eq("prefix_cache", {
        "hit_rate_tokens": cached / prompt.sum() if prompt.sum() > 0 else None,
        "hit_rate_blocks": cached / bs / blocks if blocks > 0 else None,
        "prefill_tokens_saved": cached,
        "prefill_tokens_computed": int(column(t.tl, "prefill_tokens", 0.0).sum()),
    }, "requests.parquet / timeline.parquet")


def check_cost(c: Checker, thr: dict[str, Any]) -> None:
    pools = c.get("cost.pools")
    if pools is MISSING:
        return
    gpus = sum(p["gpus"] for p in pools)
    known = all(p["usd_per_gpu_hour"] is not None for p in pools)
    per_hour = math.fsum(p["gpus"] * p["usd_per_gpu_hour"] for p in pools) if known else None

    def per_million(tps: float | None) -> float | None:
        return per_hour / (tps * 3600) * 1e6 if per_hour is not None and tps else None

    c.eq("cost", {"gpus": gpus, "gpu_hours_per_day": gpus * 24, "usd_per_hour": per_hour,
                  "usd_per_day": None if per_hour is None else per_hour * 24,
                  "usd_per_million_output_tokens": per_million(thr["output_tokens_per_s"]),
                  "usd_per_million_tokens": per_million(thr["total_tokens_per_s"])},
         "cost.pools and requests.parquet")


def check_slo(c: Checker, t: Tables) -> None:
    slo = (c.summary.get("scenario") or {}).get("slo")
    if not slo:
        return
    values = {"ttft_s": t.ttft, "tpot_s": t.tpot, "e2e_s": t.e2e, "queue_s": t.queue}
    meets = t.done.copy()
    every = True
    for o in objectives(slo):
        x = values[o.metric]
        pop = x[t.done] if o.metric == "e2e_s" else x
        pop = sorted(finite(pop))
        value = percentile(pop, o.quantile) if pop else None
        attained = value is not None and value <= o.threshold_s
        every &= attained
        c.eq(f"slo.{o.metric}", {"value_s": value, "attained": attained,
                                 "within_fraction": (sum(v <= o.threshold_s for v in pop) / len(pop)
                                                     if pop else None)}, "requests.parquet")
        within = np.nan_to_num(x, nan=math.inf) <= o.threshold_s
        if o.metric == "tpot_s":
            within |= t.out_len <= 1
        meets &= within
    c.eq("slo.attained", every, "requests.parquet")
    n = int(meets.sum())
    c.eq("goodput", {"requests": n, "requests_per_s": n / t.makespan if t.makespan else None,
                     "fraction": n / len(meets) if len(meets) else None}, "requests.parquet")


def check_tiers(c: Checker, t: Tables) -> None:
    sec = c.summary.get("tiers")
    if not sec:
        return
    d = t.done
    media = list(sec["per_tier"])
    prompt = float(t.prompt[d].sum())
    by = {"gpu": int(column(t.rq, "hit_tokens_gpu", 0.0)[d].sum())}
    for m in media:
        by[m] = int(column(t.rq, f"hit_tokens_{m}", 0.0)[d].sum())
    by["computed"] = int(prompt) - sum(by.values())
    src = "requests.parquet"
    c.eq("tiers.prompt_tokens_by_source", by, src, exact=True)
    c.eq("tiers.hit_rate_by_source", {k: v / prompt if prompt else None for k, v in by.items()}, src)
    bs = c.get("kv.block_size")
    for m in media:
        cap = sec["per_tier"][m]["capacity_blocks"]
        occ = column(t.tl, f"tier_{m}_blocks")
        mean = t.per_replica_mean(occ) if f"tier_{m}_blocks" in t.tl.columns and len(t.tl) else None
        top = largest(occ) if f"tier_{m}_blocks" in t.tl.columns else None
        c.eq(f"tiers.per_tier.{m}", {"hit_rate_tokens": by[m] / prompt if prompt else None,
                                     "occupancy_mean": mean / cap if mean is not None and cap else None,
                                     "occupancy_max": top / cap if top is not None and cap else None},
             "requests.parquet / timeline.parquet")
        if top is not None:
            c.at_least(f"tiers.per_tier.{m}.peak_blocks", top, "timeline.parquet (tier blocks held)")
        loaded = column(t.rq, f"loaded_tokens_{m}", 0.0)
        c.eq(f"tiers.per_tier.{m}.loaded_tokens", int(loaded[d].sum()), src, exact=True)
        if bs:  # every admitted request runs to completion, so every block loaded is a completed one's
            c.eq(f"tiers.per_tier.{m}.loads", float(loaded[d].sum()) / bs,
                 f"requests.parquet (loaded_tokens_{m} / block size)", exact=True)
            c.at_least(f"tiers.per_tier.{m}.loads", math.ceil(by[m] / bs), "requests.parquet (hit blocks)")
        per_block = sec["per_tier"][m]["capacity_bytes"] / cap if cap else None
        for key, count in (("bytes_loaded", "loads"), ("bytes_stored", "stores")):
            c.eq(f"tiers.per_tier.{m}.{key}",
                 sec["per_tier"][m][count] * per_block if per_block is not None else sec["per_tier"][m][key],
                 f"tiers.per_tier.{m}.{count} x bytes per block")
    for name in sec["links"]:
        c.eq(f"tiers.links.{name}.utilization",
             sec["links"][name]["busy_s"] / t.makespan if t.makespan else None, "links busy_s / makespan")
    tier_hits = sum((column(t.rq, f"hit_tokens_{m}", 0.0) for m in media), np.zeros(len(t.rq))) > 0
    wait = column(t.rq, "load_wait_s", 0.0)
    sel = d & (tier_hits | (wait > 0))
    c.eq("tiers.requests_with_tier_hits", int((d & tier_hits).sum()), src, exact=True)
    # a request waits for a tier load only for KV it loaded from a tier (on any replica, any admission)
    loaded_any = sum((column(t.rq, f"loaded_tokens_{m}", 0.0) for m in media), np.zeros(len(t.rq))) > 0
    unloaded = int((d & (wait > 0) & ~loaded_any).sum())
    if unloaded:
        c.mismatches.append(Mismatch("tiers.load_wait_s", unloaded, 0, 0.0,
                                     "requests.parquet (completed requests that waited for a tier load but "
                                     "loaded no tokens from a tier)"))
    c.eq("tiers.load_wait_s", {"total": math.fsum(wait[sel]), **pstats(wait[sel])}, src)
    c.eq("tiers.load_wait_s.total", math.fsum(wait[d]), "requests.parquet (every completed request)")


def check_sparsity(c: Checker, t: Tables) -> None:
    sec = c.summary.get("sparsity")
    if not sec:
        return
    has = len(t.tl) and "kv_full_tokens" in t.tl.columns

    def tmean(col: str) -> float | None:
        return t.per_replica_mean(column(t.tl, col)) if has else None

    full_tok, kept_tok = tmean("kv_full_tokens"), tmean("kv_token_states")
    full_blk, held_blk = tmean("kv_full_blocks"), tmean("kv_table_blocks")
    cap_blocks, bs = c.get("kv.capacity_blocks"), c.get("kv.block_size")
    conc = c.get("concurrency.mean")
    cap_tokens = cap_blocks * bs if cap_blocks and bs else None
    saved = ratio_pos(held_blk, full_blk)
    steps = column(t.rq, "sparsity_decode_steps", 0.0)
    mass = column(t.rq, "sparsity_mass", 0.0)
    reread = math.fsum(finite(column(t.rq, "sparsity_reread_tokens", 0.0)))
    lost = math.fsum(finite(column(t.rq, "sparsity_reread_lost_tokens", 0.0)))
    fig: dict[str, Any] = {
        "kv_tokens_full_mean": full_tok, "kv_tokens_retained_mean": kept_tok,
        "retained_fraction": ratio_pos(kept_tok, full_tok),
        "kv_blocks_full_mean": full_blk, "kv_blocks_held_mean": held_blk,
        "memory_saved_fraction": None if saved is None else 1.0 - saved,
        "concurrency_gain": ratio_pos(full_blk, held_blk),
        "max_concurrency_supported": ratio_pos(cap_blocks, ratio_pos(held_blk, conc)),
        "max_concurrency_supported_full": ratio_pos(cap_blocks, ratio_pos(full_blk, conc)),
        "hole_fraction_mean": (t.per_replica_mean(column(t.tl, "kv_hole_slots") / cap_tokens)
                               if has and cap_tokens else None),
        "attention_mass_retained": ratio_pos(math.fsum(finite(mass * steps)), math.fsum(finite(steps))),
        "rereads": int(math.fsum(finite(column(t.rq, "sparsity_rereads", 0.0)))),
        "reread_tokens": int(reread), "reread_lost_tokens": lost,
        "reread_lost_fraction": ratio_pos(lost, reread),
        "recalled_tokens": math.fsum(finite(column(t.rq, "sparsity_recalled_tokens", 0.0))),
        "stall_s": math.fsum(finite(column(t.rq, "sparsity_stall_s", 0.0))),
    }
    if sec.get("offload") and has and "transfer_bound" in t.tl.columns:
        bound = column(t.tl, "transfer_bound")[t.busy] > 0
        fig.update({"stall_iterations": int(bound.sum()),
                    "stall_iteration_fraction": float(bound.mean()) if len(bound) else None,
                    "stall_exposed_s": math.fsum(column(t.tl, "prefetch_exposed_s")[t.busy])})
    else:
        fig.update({"stall_iterations": 0, "stall_iteration_fraction": None, "stall_exposed_s": 0.0})
    c.eq("sparsity", fig, "requests.parquet / timeline.parquet")
