"""The summary sections every run has (requests, throughput, latency, concurrency, kv, prefix_cache and
the timeline counts), computed from RunTables (kvsim/metrics/run_tables.py) one column, or one timeline
chunk, at a time: no pandas, and never the whole widened table. docs/metrics.md defines every key; each
figure is bit for bit the one the frames gave (kvsim/metrics/timeline_figures.py says how)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvsim.kvcache.breakdown import SUMMARY_KEYS
from kvsim.metrics import timeline_figures as tf
from kvsim.metrics.frames import replica_capacities
from kvsim.metrics.run_tables import RunTables
from kvsim.metrics.stats import percentiles, plain, time_weighted_quantile, whole


class Requests:
    """The request columns the sections read, each read once (rid order) and kept while needed."""

    def __init__(self, tables: RunTables) -> None:
        self.tables = tables
        self.n = tables.request_count
        finish = tables.request("finish_s")
        self.done = ~np.isnan(finish)
        if tables.has_request("rejected"):
            self.rejected = tables.request("rejected")
            self.done &= self.rejected == 0
        else:
            self.rejected = np.zeros(self.n, dtype=np.int64)
        self.all_done = bool(self.done.all())
        self.finish_done = self.on_done(finish)

    def col(self, name: str) -> np.ndarray:
        return self.tables.request(name)

    def on_done(self, values: np.ndarray) -> np.ndarray:
        return values if self.all_done else values[self.done]

    def done_sum(self, name: str) -> int:
        return int(self.on_done(self.col(name)).sum()) if self.done.any() else 0

    def sessions(self) -> np.ndarray:
        if not self.tables.has_request("session"):
            return np.full(self.n, -1, dtype=np.int64)
        return self.col("session").astype(np.int64, copy=False)


def session_starts(sid: np.ndarray, arrival: np.ndarray) -> np.ndarray:
    """The first arrival_s of each session (sid >= 0), sorted; empty without sessions."""
    keep = sid >= 0
    if not keep.any():
        return np.array([], dtype=np.float64)
    s, a = sid[keep], arrival[keep]
    order = np.argsort(s, kind="stable")
    s, a = s[order], a[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    return np.sort(np.minimum.reduceat(a, starts))


def requests_section(rq: Requests) -> dict[str, Any]:
    sid = rq.sessions()
    starts = session_starts(sid, rq.col("arrival_s"))
    in_sessions = int((sid >= 0).sum())
    preempted = int((rq.on_done(rq.col("preemptions")) > 0).sum()) if rq.done.any() else 0
    return {
        "total": rq.n,
        "completed": int(rq.done.sum()),
        "rejected": int((rq.rejected != 0).sum()),
        "prompt_tokens": rq.done_sum("prompt_len"),
        "output_tokens": output_tokens(rq),
        "cached_tokens": rq.done_sum("cached_tokens"),
        "preempted": preempted,
        "sessions": len(starts) if len(starts) else None,
        "requests_per_session": in_sessions / len(starts) if len(starts) else None,
    }


def output_tokens(rq: Requests) -> int:
    if not rq.done.any():
        return 0
    return int((rq.on_done(rq.col("output_len")) * rq.on_done(rq.col("n"))).sum())


def makespan_s(rq: Requests) -> float | None:
    """Last finish_s over completed requests minus first arrival_s over all requests; None if undefined."""
    if not len(rq.finish_done):
        return None
    return plain(rq.finish_done.max() - rq.col("arrival_s").min())


def _rate(count: int, span: float | None) -> float | None:
    return (count - 1) / span if span is not None and span > 0 and count > 1 else None


def throughput_section(rq: Requests) -> dict[str, Any]:
    span = makespan_s(rq)
    out_tok = output_tokens(rq)
    total_tok = out_tok + rq.done_sum("prompt_len")
    done = int(rq.done.sum())
    if span is None or span <= 0:
        rate = dict.fromkeys(("requests_per_s", "output_tokens_per_s", "total_tokens_per_s"))
    else:
        rate = {"requests_per_s": done / span, "output_tokens_per_s": out_tok / span,
                "total_tokens_per_s": total_tok / span}
    arrivals = rq.col("arrival_s").astype(np.float64, copy=False)
    arrival_span = plain(arrivals.max() - arrivals.min()) if len(arrivals) else None
    offered = _rate(len(arrivals), arrival_span)
    starts = session_starts(rq.sessions(), arrivals)
    per_request = None
    if rq.n:
        tokens = rq.col("prompt_len").astype(np.float64) + (rq.col("output_len") * rq.col("n")).astype(
            np.float64)
        per_request = float(tokens.mean())
    return {"makespan_s": span, **rate, "arrival_span_s": arrival_span,
            "offered_requests_per_s": offered,
            "offered_tokens_per_s": None if offered is None else offered * per_request,
            "sessions_per_s": _rate(len(starts), plain(starts[-1] - starts[0]) if len(starts) else None)}


def latency_section(rq: Requests) -> dict[str, Any]:
    multi = rq.col("output_len") > 1
    return {
        "ttft_s": percentiles(rq.col("ttft_s")),
        "tpot_s": percentiles(rq.col("tpot_s")[multi]),
        "e2e_s": percentiles(rq.on_done(rq.col("e2e_s"))),
        "queue_s": percentiles(rq.col("queue_s")),
    }


def quantiles(tables: RunTables, name: str, qs: tuple[float, ...]) -> list[float | None]:
    """Time-weighted quantiles of a timeline column (by counting sort for an int column)."""
    if tables.timeline_kind(name) == "q":
        return tf.weighted_quantiles(tables, name, qs)
    values, hold = tables.timeline_column(name), tables.timeline_column("hold_s")
    return [time_weighted_quantile(values, hold, q) for q in qs]


def concurrency_section(tables: RunTables, mean: tf.ReplicaMeans) -> dict[str, Any]:
    p50, p99 = quantiles(tables, "running_reqs", (0.5, 0.99))
    return {
        "mean": mean(["running_reqs"], tf.column("running_reqs")),
        "p50": p50,
        "p99": p99,
        "max": tf.maximum(tables, ["running_reqs"]),
        "waiting_mean": mean(["waiting"], tf.column("waiting")),
        "waiting_max": tf.maximum(tables, ["waiting"]),
    }


def _common(values: list[float]) -> int | None:
    """The one value every replica has (as an int), or None when they differ or one is unknown."""
    first = values[0] if values else float("nan")
    if first != first or any(v != first for v in values):
        return None
    return whole(first)


def kv_section(tables: RunTables, meta: dict[str, Any], mean: tf.ReplicaMeans) -> dict[str, Any]:
    blocks = plain(meta.get("capacity_blocks"))
    block_size = plain(meta.get("block_size"))
    fleet = meta.get("fleet")
    if fleet is not None:  # the fleet-wide capacity only when every replica has the same one
        caps = replica_capacities(fleet["replicas"], fleet.get("pools"), block_size)
        blocks = _common([c[0] for c in caps.values()])
        block_size = _common([c[1] for c in caps.values()])
    bytes_per_block = whole(meta.get("bytes_per_block"))
    cap_tokens = blocks * block_size if blocks is not None and block_size is not None else None
    out: dict[str, Any] = {
        "capacity_blocks": blocks,
        "block_size": block_size,
        "capacity_tokens": cap_tokens,
        "bytes_per_token": whole(meta.get("kv_bytes_per_token")),
        "bytes_per_block": bytes_per_block,
        "capacity_bytes": whole(blocks * bytes_per_block) if blocks is not None and bytes_per_block else None,
    }
    if fleet is not None:  # each row over its own replica's capacity
        per_blocks, per_bs = _capacity_lookup(caps, max(mean.rows, default=-1))
        known = bool(np.any(~np.isnan(per_blocks * per_bs))) and _any_known_row(tables, per_blocks * per_bs)

        def capacity(cols):
            rep = cols["replica"].astype(np.int64)
            return per_blocks[rep], per_bs[rep]
    else:
        known = bool(cap_tokens)
        if known:
            fixed = (np.float64(blocks), np.float64(block_size))

        def capacity(cols):
            return fixed
    ratios = ("utilization_mean", "utilization_max", "used_blocks_mean", "used_blocks_max",
              "cached_blocks_mean", "internal_fragmentation_mean")
    if not known or not tables.timeline_count:
        return {**out, **dict.fromkeys(ratios), "breakdown": dict.fromkeys(SUMMARY_KEYS),
                "sharing_saving": None}

    def over_tokens(name):
        def values(cols):
            b, bs = capacity(cols)
            return cols[name].astype(np.float64) / (b * bs)
        return values

    def over_blocks(name):
        def values(cols):
            return cols[name].astype(np.float64) / capacity(cols)[0]
        return values

    def unfilled(cols):
        b, bs = capacity(cols)
        used = cols["kv_used_blocks"].astype(np.float64)
        return (used * bs - cols["kv_token_states"].astype(np.float64)) / (b * bs)

    rep = ["replica"]
    util, used = over_tokens("kv_token_states"), over_blocks("kv_used_blocks")
    out.update({
        "utilization_mean": mean(["kv_token_states", *rep], util),
        "utilization_max": tf.maximum(tables, ["kv_token_states", *rep], util),
        "used_blocks_mean": mean(["kv_used_blocks", *rep], used),
        "used_blocks_max": tf.maximum(tables, ["kv_used_blocks", *rep], used),
        "cached_blocks_mean": mean(["kv_cached_blocks", *rep], over_blocks("kv_cached_blocks")),
        "internal_fragmentation_mean": mean(["kv_used_blocks", "kv_token_states", *rep], unfilled),
        "breakdown": {key: mean([col, *rep], over_tokens(col)) if tables.has_timeline(col) else None
                      for key, col in SUMMARY_KEYS.items()},
        "sharing_saving": sharing_saving(tables),
    })
    return out


def _capacity_lookup(caps: dict[int, tuple[float, float]], last: int) -> tuple[np.ndarray, np.ndarray]:
    """(capacity_blocks, block_size) arrays indexed by replica id up to `last` at least (NaN where caps
    lacks it)."""
    size = max(max(caps, default=-1), last) + 1
    blocks = np.full(size, np.nan)
    sizes = np.full(size, np.nan)
    for r, (b, bs) in caps.items():
        blocks[r], sizes[r] = b, bs
    return blocks, sizes


def _any_known_row(tables: RunTables, per_tokens: np.ndarray) -> bool:
    """Whether a timeline row's replica has a known capacity (row_tokens.notna().any())."""
    for _, cols in tables.timeline_chunks(["replica"]):
        if (~np.isnan(per_tokens[cols["replica"].astype(np.int64)])).any():
            return True
    return False


def sharing_saving(tables: RunTables) -> float | None:
    """breakdown.sharing_saving over the chunks."""
    if not tables.has_timeline("kv_unshared_blocks") or not tables.timeline_count:
        return None
    unshared = tf.weighted_sum(tables, "kv_unshared_blocks")
    if unshared <= 0:
        return None
    used = tf.weighted_sum(tables, "kv_used_blocks")
    return (unshared - used) / unshared


def prefix_cache_section(rq: Requests, tables: RunTables, meta: dict[str, Any]) -> dict[str, Any]:
    """prefix.prefix_cache_section from the columns."""
    prompt = rq.done_sum("prompt_len")
    cached = rq.done_sum("cached_tokens")
    bs = meta.get("block_size")
    blocks = int((-(-rq.on_done(rq.col("prompt_len")) // bs)).sum()) if rq.done.any() and bs else 0
    return {
        "policy": meta.get("prefix_cache"),
        "hit_rate_tokens": cached / prompt if prompt > 0 else None,
        "hit_rate_blocks": cached / bs / blocks if blocks > 0 else None,
        "evictions": int(meta.get("prefix_cache_evictions") or 0),
        "prefill_tokens_saved": cached,
        "prefill_tokens_computed": tf.total(tables, "prefill_tokens") if tables.timeline_count else 0,
    }


def timeline_counts(tables: RunTables) -> dict[str, int]:
    """preemptions, iterations (rows of a scheduled batch) and cow_copies."""
    if not tables.timeline_count:
        return {"preemptions": 0, "iterations": 0, "cow_copies": 0}
    iterations = sum(int((cols["iteration"] >= 0).sum()) for _, cols in tables.timeline_chunks(["iteration"]))
    return {"preemptions": tf.total(tables, "preempted"), "iterations": iterations,
            "cow_copies": tf.total(tables, "cow_copies")}


def replica_count(rq: Requests, tables: RunTables, meta: dict[str, Any]) -> int:
    if meta.get("replicas") is not None:
        return int(meta["replicas"])
    seen = set(rq.col("replica").tolist()) | set(tables.timeline_column("replica").tolist())
    return max(len(seen), 1)
