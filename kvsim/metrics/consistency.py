"""Check that summary.json agrees with requests.parquet and timeline.parquet: every summary figure that is a
sum, mean, count, percentile or ratio of per-request or per-iteration figures is recomputed here from its
definition in docs/metrics.md, by code of its own (plain sorting, loops over replicas, math.fsum), and
compared with the summary's value; engine totals that have a per-request counterpart (P/D transfer bytes,
preemptions, tier loads) are compared with it. Every other numeric figure is listed in EXEMPT with the
reason it cannot be derived from the two tables (docs/metrics.md, "Consistency of the figures").

`check_consistency(summary, requests, timeline)` returns the Mismatches (empty: consistent), among them any
numeric figure of the summary that is neither checked nor exempt, so a new figure cannot slip by. In check
mode (`kv.check_invariants: true`) build_summary raises ConsistencyError on the first.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kvsim.kvcache.breakdown import SUMMARY_KEYS
from kvsim.schema import objectives

REL_TOL = 1e-9
"""Relative tolerance of a float figure (summation order and interpolation formulas differ)."""
ABS_TOL = 1e-12
"""Absolute floor of the tolerance (a mean of values that cancel to 0 may read 1e-17)."""

CONFIG_COPIES = ("scenario", "model", "hardware", "cost_model", "kvsim_version")
"""Top-level keys that copy the run's configuration: not figures."""

EXEMPT: dict[str, str] = {
    # configuration and model facts copied into the summary
    "kv.capacity_blocks": "configuration: the replica's KV pool (from the memory budget)",
    "kv.block_size": "configuration",
    "kv.bytes_per_token": "model fact",
    "kv.bytes_per_block": "model fact",
    "weight_bytes_per_gpu": "model fact",
    "replicas": "configuration: the engine's replica count",
    "cost.pools[].gpus": "configuration",
    "cost.pools[].usd_per_gpu_hour": "configuration (price)",
    "slo.*.threshold_s": "configuration (the objective)",
    "tiers.chunk_blocks": "configuration",
    "tiers.store_min_uses": "configuration",
    "tiers.per_tier.*.capacity_blocks": "configuration",
    "tiers.per_tier.*.capacity_bytes": "configuration",
    "fleet.pools[].*": "configuration (the pools as run)",
    "fleet.per_replica[].index": "configuration",
    "fleet.per_replica[].tensor_parallel_size": "configuration",
    "fleet.per_replica[].capacity_blocks": "configuration",
    "fleet.per_replica[].block_size": "configuration",
    "fleet.per_role.*.replicas": "configuration (replicas of the role)",
    "fleet.kv_transfer.latency_s": "configuration",
    "fleet.kv_transfer.bandwidth_bytes_per_s.*": "configuration",
    "bench_serve.max_concurrency": "configuration",
    "bench_serve.request_rate": "configuration",
    "bench_serve.metric_percentiles[]": "configuration",
    "sparsity.budget_tokens": "configuration",
    "sparsity.budget_fraction": "configuration",
    "sparsity.kv_heads": "configuration",
    "sparsity.pool_kernel": "configuration",
    "sparsity.host_pool_bytes": "configuration",
    # engine counters no table row carries
    "prefix_cache.evictions": "engine counter: evictions belong to no request or iteration row",
    "fleet.per_replica[].routed": "engine counter: the router's decisions (re-routed requests count again)",
    "tiers.per_tier.*.loads": "engine counter (checked: loaded_tokens / block size, where the replicas share "
                              "one block size)",
    "tiers.per_tier.*.stores": "engine counter: stores belong to no request row (checked: bytes_stored)",
    "tiers.per_tier.*.evictions": "engine counter",
    "tiers.per_tier.*.peak_blocks": "engine counter (checked: at least the timeline's tier_<medium>_blocks)",
    "tiers.links.*.bytes": "engine counter: link traffic includes loads of requests re-admitted",
    "tiers.links.*.busy_s": "engine counter",
    "tiers.links.*.transfers": "engine counter",
    "tiers.dropped_blocks": "engine counter",
    "fleet.kv_transfer.busy_s": "engine counter: NIC time, queueing overlaps are not in a request row",
    "sparsity.decode_kv_read_fraction": "engine counter: KV tokens read per decode step",
    "sparsity.recall_bytes": "engine counter",
    "sparsity.offload_bytes": "engine counter",
    "sparsity.host_bytes_max": "engine counter",
    "sparsity.compaction_copy_bytes": "engine counter",
    "sparsity.prefetch_bytes": "engine counter",
    "sparsity.host_evicted_bytes": "engine counter",
}
"""Figure path (a list index as `[]`, `*` any one key) -> why it is not recomputed from the tables."""


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A summary figure that disagrees with what the tables give (`relation` "==" or ">=": the summary's
    value must equal, or be at least, `recomputed`); `source` names what it was recomputed from."""

    figure: str
    summary: Any
    recomputed: Any
    tolerance: float
    source: str
    relation: str = "=="

    def line(self) -> str:
        """One line: the figure, both values, the source."""
        want = "" if self.relation == "==" else "at least "
        return (f"summary {self.figure} = {_show(self.summary)}, {self.source} gives {want}"
                f"{_show(self.recomputed)}")


class ConsistencyError(AssertionError):
    """Check mode: a summary figure disagrees with requests.parquet / timeline.parquet (a kvsim bug)."""


def _show(x: Any) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


# ---- independent statistics (not kvsim.metrics.stats: the point is a second implementation) ----

def _finite(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64).ravel() if not math.isnan(v)]


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default): rank q/100 * (n - 1)."""
    h = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def _pstats(values: Any) -> dict[str, float | None]:
    x = sorted(_finite(values))
    if not x:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    return {"mean": math.fsum(x) / len(x), "p50": _percentile(x, 50), "p90": _percentile(x, 90),
            "p99": _percentile(x, 99)}


def _pairs(values: Any, weights: Any) -> list[tuple[float, float]]:
    v = np.asarray(values, dtype=np.float64).ravel()
    w = np.asarray(weights, dtype=np.float64).ravel()
    return [(a, b) for a, b in zip(v.tolist(), w.tolist(), strict=True)
            if not (math.isnan(a) or math.isnan(b)) and b > 0]


def _tw_mean(values: Any, weights: Any) -> float | None:
    p = _pairs(values, weights)
    total = math.fsum(w for _, w in p)
    return math.fsum(v * w for v, w in p) / total if total > 0 else None


def _tw_quantile(values: Any, weights: Any, q: float) -> float | None:
    p = sorted(_pairs(values, weights))
    if not p:
        return None
    total = math.fsum(w for _, w in p)
    run = 0.0
    for v, w in p:
        run += w
        if run >= q * total * (1 - 1e-12):
            return v
    return p[-1][0]


def _max(values: Any) -> float | None:
    x = _finite(values)
    return max(x) if x else None


def _col(df: pd.DataFrame, name: str, default: float = math.nan) -> np.ndarray:
    if name in df.columns:
        return df[name].to_numpy(np.float64)
    return np.full(len(df), default)


class _Tables:
    """The two tables as numpy columns, with the masks and hold times the definitions use."""

    def __init__(self, requests: pd.DataFrame, timeline: pd.DataFrame) -> None:
        self.rq, self.tl = requests, timeline
        r = requests
        self.arrival = _col(r, "arrival_s")
        self.finish = _col(r, "finish_s")
        self.first_token = _col(r, "first_token_s")
        self.first_sched = _col(r, "first_scheduled_s")
        self.prompt = _col(r, "prompt_len")
        self.out_len = _col(r, "output_len")
        self.n = _col(r, "n", 1.0)
        self.rejected = _col(r, "rejected", 0.0) != 0
        self.done = ~np.isnan(self.finish) & ~self.rejected
        self.replica = _col(r, "replica")
        self.ttft = self.first_token - self.arrival
        self.e2e = self.finish - self.arrival
        self.queue = self.first_sched - self.arrival
        with np.errstate(divide="ignore", invalid="ignore"):
            decode = (self.finish - self.first_token) / (self.out_len - 1)
        self.tpot = np.where(self.out_len > 1, decode, np.nan)
        finished = self.finish[self.done]
        self.makespan = float(finished.max() - self.arrival.min()) if finished.size else None
        t = timeline
        self.t_replica = _col(t, "replica")
        self.busy = _col(t, "iteration") >= 0
        self.hold = self._hold(t)
        self.replica_rows = {int(k): np.flatnonzero(self.t_replica == k) for k in sorted(set(self.t_replica))}

    @staticmethod
    def _hold(t: pd.DataFrame) -> np.ndarray:
        """Each row until the same replica's next row starts; the replica's last row: its dt_s."""
        ts, dt, rep = _col(t, "t_s"), _col(t, "dt_s"), _col(t, "replica")
        hold = dt.copy()
        last: dict[float, int] = {}
        for i in range(len(ts)):
            j = last.get(rep[i])
            if j is not None:
                hold[j] = ts[i] - ts[j]
            last[rep[i]] = i
        return hold

    def per_replica_mean(self, values: np.ndarray) -> float | None:
        means = [m for rows in self.replica_rows.values()
                 if (m := _tw_mean(values[rows], self.hold[rows])) is not None]
        return math.fsum(means) / len(means) if means else None

    def rate(self, count: float) -> float | None:
        return count / self.makespan if self.makespan is not None and self.makespan > 0 else None


class _Checker:
    def __init__(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        self.checked: set[str] = set()
        self.mismatches: list[Mismatch] = []

    def get(self, path: str) -> Any:
        node: Any = self.summary
        for key in _split(path):
            if isinstance(node, list):
                node = node[int(key)]
            elif isinstance(node, dict) and key in node:
                node = node[key]
            else:
                return _MISSING
        return node

    def eq(self, path: str, recomputed: Any, source: str, exact: bool = False) -> None:
        """The figure at path must equal recomputed (floats within REL_TOL; exact: ints exactly)."""
        value = self.get(path)
        if value is _MISSING:
            return
        self.checked.add(path)
        if isinstance(recomputed, dict):
            for k, v in recomputed.items():
                self.eq(f"{path}.{k}", v, source, exact)
            return
        tol = 0.0 if exact else REL_TOL
        if not _same(value, recomputed, tol):
            self.mismatches.append(Mismatch(path, value, _plain(recomputed), tol, source))

    def at_least(self, path: str, bound: float, source: str) -> None:
        """A cross-check: the figure at path (also checked or exempt elsewhere) must be >= bound."""
        value = self.get(path)
        if value is _MISSING or value is None:
            return
        if value < bound - max(REL_TOL * abs(bound), ABS_TOL):
            self.mismatches.append(Mismatch(path, value, _plain(bound), REL_TOL, source, ">="))


_MISSING = object()


def _split(path: str) -> list[str]:
    out = []
    for part in path.split("."):
        while "[" in part:
            head, _, rest = part.partition("[")
            idx, _, part = rest.partition("]")
            if head:
                out.append(head)
            out.append(idx)
        if part:
            out.append(part)
    return out


def _plain(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    return x


def _same(a: Any, b: Any, tol: float) -> bool:
    b = _plain(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    if tol == 0.0:
        return a == b
    return abs(a - b) <= max(tol * max(abs(a), abs(b)), ABS_TOL)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


# ---- the sections ----

def _requests(c: _Checker, t: _Tables) -> None:
    src = "requests.parquet"
    d = t.done
    sid = _col(t.rq, "session", -1.0)
    sessions = {s for s in sid.tolist() if s >= 0}
    c.eq("requests", {
        "total": len(t.rq), "completed": int(d.sum()), "rejected": int(t.rejected.sum()),
        "prompt_tokens": int(t.prompt[d].sum()), "output_tokens": int((t.out_len * t.n)[d].sum()),
        "cached_tokens": int(_col(t.rq, "cached_tokens", 0.0)[d].sum()),
        "preempted": int((_col(t.rq, "preemptions", 0.0)[d] > 0).sum()),
        "sessions": len(sessions) or None,
        "requests_per_session": int((sid >= 0).sum()) / len(sessions) if sessions else None,
    }, src)


def _throughput(c: _Checker, t: _Tables) -> dict[str, Any]:
    d = t.done
    out_tok = math.fsum((t.out_len * t.n)[d])
    total_tok = out_tok + math.fsum(t.prompt[d])
    span = float(t.arrival.max() - t.arrival.min()) if len(t.arrival) else None
    offered = (len(t.arrival) - 1) / span if span and len(t.arrival) > 1 else None
    sid = _col(t.rq, "session", -1.0)
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


def _latency(c: _Checker, t: _Tables) -> None:
    c.eq("latency", {"ttft_s": _pstats(t.ttft), "tpot_s": _pstats(t.tpot), "e2e_s": _pstats(t.e2e[t.done]),
                     "queue_s": _pstats(t.queue)}, "requests.parquet")


def _concurrency(c: _Checker, t: _Tables) -> None:
    running, waiting = _col(t.tl, "running_reqs"), _col(t.tl, "waiting")
    c.eq("concurrency", {
        "mean": t.per_replica_mean(running), "p50": _tw_quantile(running, t.hold, 0.5),
        "p99": _tw_quantile(running, t.hold, 0.99), "max": _max(running),
        "waiting_mean": t.per_replica_mean(waiting), "waiting_max": _max(waiting),
    }, "timeline.parquet")
    c.eq("preemptions", int(_col(t.tl, "preempted", 0.0).sum()), "timeline.parquet", exact=True)
    # each preemption of a request preempts its n sequences (a beam search's width is not in the table)
    if not _beams(c.summary):
        c.eq("preemptions", int((_col(t.rq, "preemptions", 0.0) * t.n).sum()),
             "requests.parquet (preemptions x n)", exact=True)
    c.eq("iterations", int(t.busy.sum()), "timeline.parquet", exact=True)
    c.eq("cow_copies", int(_col(t.tl, "cow_copies", 0.0).sum()), "timeline.parquet", exact=True)


def _beams(summary: dict[str, Any]) -> bool:
    """Whether the scenario's workload (or a component of its mix) runs beam search."""
    wl = (summary.get("scenario") or {}).get("workload") or {}
    parts = [wl, *(wl.get("mix") or [])]
    return any((p or {}).get("beam_width", 1) > 1 for p in parts)


def _row_capacity(c: _Checker, t: _Tables) -> tuple[np.ndarray, np.ndarray] | None:
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


def _kv(c: _Checker, t: _Tables) -> None:
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
    states, used = _col(t.tl, "kv_token_states"), _col(t.tl, "kv_used_blocks")
    c.eq("kv", {
        "utilization_mean": t.per_replica_mean(states / tokens), "utilization_max": _max(states / tokens),
        "used_blocks_mean": t.per_replica_mean(used / rb), "used_blocks_max": _max(used / rb),
        "cached_blocks_mean": t.per_replica_mean(_col(t.tl, "kv_cached_blocks") / rb),
        "internal_fragmentation_mean": t.per_replica_mean((used * rs - states) / tokens),
    }, src)
    c.eq("kv.breakdown", {k: (t.per_replica_mean(_col(t.tl, col) / tokens) if col in t.tl.columns else None)
                          for k, col in SUMMARY_KEYS.items()}, src)
    saving = None
    if "kv_unshared_blocks" in t.tl.columns:
        unshared = math.fsum(_col(t.tl, "kv_unshared_blocks") * t.hold)
        if unshared > 0:
            saving = (unshared - math.fsum(used * t.hold)) / unshared
    c.eq("kv.sharing_saving", saving, src)


def _prefix(c: _Checker, t: _Tables) -> None:
    d = t.done
    prompt = t.prompt[d]
    cached = int(_col(t.rq, "cached_tokens", 0.0)[d].sum())
    bs = c.get("kv.block_size") or (c.summary.get("scenario") or {}).get("kv", {}).get("block_size")
    blocks = int(np.ceil(prompt / bs).sum()) if bs else 0
    c.eq("prefix_cache", {
        "hit_rate_tokens": cached / prompt.sum() if prompt.sum() > 0 else None,
        "hit_rate_blocks": cached / bs / blocks if blocks > 0 else None,
        "prefill_tokens_saved": cached,
        "prefill_tokens_computed": int(_col(t.tl, "prefill_tokens", 0.0).sum()),
    }, "requests.parquet / timeline.parquet")


def _cost(c: _Checker, thr: dict[str, Any]) -> None:
    pools = c.get("cost.pools")
    if pools is _MISSING:
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


def _slo(c: _Checker, t: _Tables) -> None:
    slo = (c.summary.get("scenario") or {}).get("slo")
    if not slo:
        return
    values = {"ttft_s": t.ttft, "tpot_s": t.tpot, "e2e_s": t.e2e, "queue_s": t.queue}
    meets = t.done.copy()
    every = True
    for o in objectives(slo):
        x = values[o.metric]
        pop = x[t.done] if o.metric == "e2e_s" else x
        pop = sorted(_finite(pop))
        value = _percentile(pop, o.quantile) if pop else None
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


def _tiers(c: _Checker, t: _Tables) -> None:
    sec = c.summary.get("tiers")
    if not sec:
        return
    d = t.done
    media = list(sec["per_tier"])
    prompt = float(t.prompt[d].sum())
    by = {"gpu": int(_col(t.rq, "hit_tokens_gpu", 0.0)[d].sum())}
    for m in media:
        by[m] = int(_col(t.rq, f"hit_tokens_{m}", 0.0)[d].sum())
    by["computed"] = int(prompt) - sum(by.values())
    src = "requests.parquet"
    c.eq("tiers.prompt_tokens_by_source", by, src, exact=True)
    c.eq("tiers.hit_rate_by_source", {k: v / prompt if prompt else None for k, v in by.items()}, src)
    bs = c.get("kv.block_size")
    for m in media:
        cap = sec["per_tier"][m]["capacity_blocks"]
        occ = _col(t.tl, f"tier_{m}_blocks")
        mean = t.per_replica_mean(occ) if f"tier_{m}_blocks" in t.tl.columns and len(t.tl) else None
        top = _max(occ) if f"tier_{m}_blocks" in t.tl.columns else None
        c.eq(f"tiers.per_tier.{m}", {"hit_rate_tokens": by[m] / prompt if prompt else None,
                                     "occupancy_mean": mean / cap if mean is not None and cap else None,
                                     "occupancy_max": top / cap if top is not None and cap else None},
             "requests.parquet / timeline.parquet")
        if top is not None:
            c.at_least(f"tiers.per_tier.{m}.peak_blocks", top, "timeline.parquet (tier blocks held)")
        loaded = _col(t.rq, f"loaded_tokens_{m}", 0.0)
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
    tier_hits = sum((_col(t.rq, f"hit_tokens_{m}", 0.0) for m in media), np.zeros(len(t.rq))) > 0
    wait = _col(t.rq, "load_wait_s", 0.0)
    sel = d & (tier_hits | (wait > 0))
    c.eq("tiers.requests_with_tier_hits", int((d & tier_hits).sum()), src, exact=True)
    # a request waits for a tier load only for KV it loaded from a tier (on any replica, any admission)
    loaded_any = sum((_col(t.rq, f"loaded_tokens_{m}", 0.0) for m in media), np.zeros(len(t.rq))) > 0
    unloaded = int((d & (wait > 0) & ~loaded_any).sum())
    if unloaded:
        c.mismatches.append(Mismatch("tiers.load_wait_s", unloaded, 0, 0.0,
                                     "requests.parquet (completed requests that waited for a tier load but "
                                     "loaded no tokens from a tier)"))
    c.eq("tiers.load_wait_s", {"total": math.fsum(wait[sel]), **_pstats(wait[sel])}, src)
    c.eq("tiers.load_wait_s.total", math.fsum(wait[d]), "requests.parquet (every completed request)")


def _fleet(c: _Checker, t: _Tables, thr: dict[str, Any]) -> None:
    sec = c.summary.get("fleet")
    if not sec:
        return
    prefill = _col(t.rq, "prefill_replica")
    cached = _col(t.rq, "cached_tokens", 0.0)
    dt = _col(t.tl, "dt_s")
    states, used = _col(t.tl, "kv_token_states"), _col(t.tl, "kv_used_blocks")
    running = _col(t.tl, "running_reqs")
    src = "requests.parquet / timeline.parquet"
    per = sec["per_replica"]
    out_sum = []
    for i, p in enumerate(per):
        idx = p["index"]
        served = (t.replica == idx) | (prefill == idx)
        done = served & t.done
        made = (t.replica == idx) & t.done
        prompt = float(t.prompt[done].sum())
        rows = t.replica_rows.get(idx, np.array([], dtype=np.int64))
        blocks = p.get("capacity_blocks") or math.nan
        bs = p.get("block_size") or math.nan
        ttft = sorted(_finite(t.ttft[served]))
        out_rate = t.rate(math.fsum((t.out_len * t.n)[made]))
        out_sum.append(out_rate or 0.0)
        c.eq(f"fleet.per_replica[{i}]", {
            "finished": int(done.sum()),
            # (decode replicas prefill nothing: their requests' hits are the prefill replica's)
            "hit_rate": float(cached[done].sum()) / prompt if prompt > 0 and p["role"] != "decode" else None,
            "ttft_p50_s": _percentile(ttft, 50) if ttft else None,
            "ttft_p99_s": _percentile(ttft, 99) if ttft else None,
            "output_tokens_per_s": out_rate,
            "busy_fraction": t.rate(math.fsum(dt[rows][t.busy[rows]])),
            "kv_utilization_mean": _tw_mean(states[rows] / (blocks * bs), t.hold[rows]),
            "kv_used_blocks_mean": _tw_mean(used[rows] / blocks, t.hold[rows]),
            "running_mean": _tw_mean(running[rows], t.hold[rows]),
        }, src)
    if thr["output_tokens_per_s"] is not None:
        c.eq("throughput.output_tokens_per_s", math.fsum(out_sum), "fleet.per_replica[].output_tokens_per_s")
    front = [p for p in per if p["role"] != "decode"]
    c.eq("fleet.load_imbalance", {"routed": _imbalance([p["routed"] for p in front]),
                                  "finished": _imbalance([p["finished"] for p in front])},
         "fleet.per_replica")
    handed = prefill >= 0
    pd_run = any(p["role"] in ("prefill", "decode") for p in per)
    if not pd_run:
        c.eq("fleet.per_role", None, "fleet.per_replica roles (no prefill or decode replica)")
    if "prefill_replica" not in t.rq.columns:
        c.eq("fleet.kv_transfer", None, "requests.parquet (no P/D columns)")
    if sec.get("per_role"):
        for role, mask_of, wait in (
                ("prefill", lambda ids: np.isin(t.replica, ids) | np.isin(prefill, ids), t.queue),
                ("decode", lambda ids: np.isin(t.replica, ids) & handed,
                 _col(t.rq, "decode_admit_s") - _col(t.rq, "prefill_done_s"))):
            members = [p for p in per if p["role"] == role]
            busy = [p["busy_fraction"] for p in members if p["busy_fraction"] is not None]
            c.eq(f"fleet.per_role.{role}", {
                "busy_fraction_mean": math.fsum(busy) / len(busy) if busy else None,
                "queue_s": _pstats(wait[mask_of([p["index"] for p in members])])}, src)
    kt = sec.get("kv_transfer")
    if kt:
        moved = _col(t.rq, "kv_transfer_bytes")[handed]
        secs = _col(t.rq, "kv_transfer_s")[handed]
        ttft = t.ttft[handed]
        ok = ~np.isnan(secs) & (ttft > 0)
        bw = kt.get("bandwidth_bytes_per_s")
        nics = len(bw) if isinstance(bw, dict) and bw else None
        admit_wait = _col(t.rq, "decode_admit_s") - _col(t.rq, "prefill_done_s")
        c.eq("fleet.kv_transfer", {
            "handed_off": int(handed.sum()), "nics": nics,
            "link_utilization": (2 * kt["busy_s"] / nics / t.makespan
                                 if kt.get("busy_s") is not None and nics and t.makespan else None),
            "bytes_per_request_mean": (math.fsum(_finite(moved)) / len(_finite(moved)) if _finite(moved)
                                       else None),
            "transfer_s": _pstats(secs),
            "decode_admission_wait_s": _pstats(admit_wait[handed]),
            "ttft_share_mean": (math.fsum(secs[ok] / ttft[ok]) / int(ok.sum()) if ok.any() else None),
        }, "requests.parquet")
        c.eq("fleet.kv_transfer.bytes", math.fsum(_finite(moved)), "requests.parquet (kv_transfer_bytes)")
        c.eq("fleet.kv_transfer.transfers", int((np.nan_to_num(moved) > 0).sum()),
             "requests.parquet (requests with kv_transfer_bytes > 0)", exact=True)


def _imbalance(values: list[Any]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    mean = math.fsum(values) / len(values)
    return max(values) / mean if mean > 0 else None


def _bench_serve(c: _Checker, t: _Tables) -> None:
    sec = c.summary.get("bench_serve")
    if not sec:
        return
    d = t.done
    ends = [float(t.finish[d].max())] if d.any() else []
    if t.rejected.any():
        ends.append(float(t.arrival[t.rejected].max()))
    duration = max(ends) if ends else 0.0
    tin, tout = int(t.prompt[d].sum()), int(t.out_len[d].sum())

    def rate(x: float) -> float | None:
        return x / duration if duration > 0 else None

    fig: dict[str, Any] = {"completed": int(d.sum()), "failed": int(t.rejected.sum()), "duration_s": duration,
                           "total_input_tokens": tin, "total_output_tokens": tout,
                           "request_throughput": rate(int(d.sum())), "output_throughput": rate(tout),
                           "total_token_throughput": rate(tin + tout)}
    pcts = sec["metric_percentiles"]

    def stats(name: str, values: np.ndarray) -> None:
        x = sorted(_finite(values)) or [0.0]
        mean = math.fsum(x) / len(x)
        fig[f"mean_{name}_ms"] = mean * 1000
        fig[f"median_{name}_ms"] = _percentile(x, 50) * 1000
        fig[f"std_{name}_ms"] = math.sqrt(math.fsum((v - mean) ** 2 for v in x) / len(x)) * 1000
        for p in pcts:
            word = str(int(p)) if int(p) == p else str(p)
            fig[f"p{word}_{name}_ms"] = _percentile(x, p) * 1000

    stats("ttft", t.ttft[d])
    stats("tpot", t.tpot[d & (t.out_len > 1)])
    stats("e2el", t.e2e[d])
    if "mean_client_queue_time_ms" in sec:
        stats("client_queue_time", _col(t.rq, "client_wait_s")[d])
    # ITL: the gaps between one replica's consecutive iteration ends, one per decode token
    tl = t.tl[t.busy].sort_values(["replica", "t_s", "iteration"], kind="stable")
    gaps: list[float] = []
    prev: dict[float, float] = {}
    for rep, ts, dts, k in zip(tl["replica"].tolist(), tl["t_s"].tolist(), tl["dt_s"].tolist(),
                               tl["decode_seqs"].tolist(), strict=True):
        end = ts + dts
        if k > 0 and rep in prev:
            gaps += [end - prev[rep]] * int(k)
        elif k > 0:
            gaps += [math.nan] * int(k)
        prev[rep] = end
    n_gaps = int(np.maximum(t.out_len[d] - 1, 0).sum())
    decode_s = math.fsum((t.finish - t.first_token)[d & (t.out_len > 1)])
    handed = bool((_col(t.rq, "prefill_replica", -1.0)[d] >= 0).any())
    exact = (n_gaps > 0 and not handed and len(gaps) == n_gaps and not any(map(math.isnan, gaps))
             and math.isclose(math.fsum(gaps), decode_s, rel_tol=1e-9, abs_tol=1e-12))
    if n_gaps == 0:
        stats("itl", np.zeros(0))
        exact = True
    elif exact:
        stats("itl", np.array(gaps))
        fig["mean_itl_ms"] = decode_s / n_gaps * 1000
    else:
        fig["mean_itl_ms"] = decode_s / n_gaps * 1000
        fig["median_itl_ms"] = fig["std_itl_ms"] = None
        for p in pcts:
            fig[f"p{str(int(p)) if int(p) == p else str(p)}_itl_ms"] = None
    fig["itl_exact"] = exact
    start, finish = t.arrival[d], t.finish[d]
    events = sorted([(e, 0) for e in finish.tolist()] + [(s, 1) for s in start.tolist()])
    live = top = 0
    for _, kind in events:
        live += 1 if kind else -1
        top = max(top, live)
    fig["max_concurrent_requests"] = top
    if not d.any():
        fig["max_output_tokens_per_s"] = 0.0
    elif not exact:
        fig["max_output_tokens_per_s"] = None
    else:
        t0 = float(start.min())
        n_buckets = int(math.ceil(float(finish.max()) - t0)) + 1
        counts = [0] * n_buckets
        stamps = list(t.first_token[d]) + [e for e, k in zip((tl["t_s"] + tl["dt_s"]).tolist(),
                                                             tl["decode_seqs"].tolist(), strict=True)
                                           for _ in range(int(k))]
        for s in stamps:
            b = math.floor(s - t0)
            if 0 <= b < n_buckets:
                counts[b] += 1
        fig["max_output_tokens_per_s"] = float(max(counts))
    c.eq("bench_serve", fig, "requests.parquet / timeline.parquet")


def _sparsity(c: _Checker, t: _Tables) -> None:
    sec = c.summary.get("sparsity")
    if not sec:
        return
    has = len(t.tl) and "kv_full_tokens" in t.tl.columns

    def tmean(col: str) -> float | None:
        return t.per_replica_mean(_col(t.tl, col)) if has else None

    full_tok, kept_tok = tmean("kv_full_tokens"), tmean("kv_token_states")
    full_blk, held_blk = tmean("kv_full_blocks"), tmean("kv_table_blocks")
    cap_blocks, bs = c.get("kv.capacity_blocks"), c.get("kv.block_size")
    conc = c.get("concurrency.mean")
    cap_tokens = cap_blocks * bs if cap_blocks and bs else None
    saved = _ratio_pos(held_blk, full_blk)
    steps = _col(t.rq, "sparsity_decode_steps", 0.0)
    mass = _col(t.rq, "sparsity_mass", 0.0)
    reread = math.fsum(_finite(_col(t.rq, "sparsity_reread_tokens", 0.0)))
    lost = math.fsum(_finite(_col(t.rq, "sparsity_reread_lost_tokens", 0.0)))
    fig: dict[str, Any] = {
        "kv_tokens_full_mean": full_tok, "kv_tokens_retained_mean": kept_tok,
        "retained_fraction": _ratio_pos(kept_tok, full_tok),
        "kv_blocks_full_mean": full_blk, "kv_blocks_held_mean": held_blk,
        "memory_saved_fraction": None if saved is None else 1.0 - saved,
        "concurrency_gain": _ratio_pos(full_blk, held_blk),
        "max_concurrency_supported": _ratio_pos(cap_blocks, _ratio_pos(held_blk, conc)),
        "max_concurrency_supported_full": _ratio_pos(cap_blocks, _ratio_pos(full_blk, conc)),
        "hole_fraction_mean": (t.per_replica_mean(_col(t.tl, "kv_hole_slots") / cap_tokens)
                               if has and cap_tokens else None),
        "attention_mass_retained": _ratio_pos(math.fsum(_finite(mass * steps)), math.fsum(_finite(steps))),
        "rereads": int(math.fsum(_finite(_col(t.rq, "sparsity_rereads", 0.0)))),
        "reread_tokens": int(reread), "reread_lost_tokens": lost,
        "reread_lost_fraction": _ratio_pos(lost, reread),
        "recalled_tokens": math.fsum(_finite(_col(t.rq, "sparsity_recalled_tokens", 0.0))),
        "stall_s": math.fsum(_finite(_col(t.rq, "sparsity_stall_s", 0.0))),
    }
    if sec.get("offload") and has and "transfer_bound" in t.tl.columns:
        bound = _col(t.tl, "transfer_bound")[t.busy] > 0
        fig.update({"stall_iterations": int(bound.sum()),
                    "stall_iteration_fraction": float(bound.mean()) if len(bound) else None,
                    "stall_exposed_s": math.fsum(_col(t.tl, "prefetch_exposed_s")[t.busy])})
    else:
        fig.update({"stall_iterations": 0, "stall_iteration_fraction": None, "stall_exposed_s": 0.0})
    c.eq("sparsity", fig, "requests.parquet / timeline.parquet")


def _ratio_pos(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and b > 0 else None


# ---- the leaves ----

def numeric_leaves(summary: dict[str, Any]) -> list[str]:
    """Path of every number in the summary outside the configuration copies; list indices written `[i]`
    (a null is no number: a figure undefined in this run is still compared where it is checked)."""
    out: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            out.append(path)

    walk({k: v for k, v in summary.items() if k not in CONFIG_COPIES}, "")
    return out


def exemption(path: str) -> str | None:
    """Why the figure at path is not recomputed (its EXEMPT entry), or None."""
    parts = _pattern_parts(path)
    for pattern, reason in EXEMPT.items():
        want = _pattern_parts(pattern)
        if len(want) == len(parts) and all(w in ("*", p) for w, p in zip(want, parts, strict=True)):
            return reason
    return None


def _pattern_parts(path: str) -> list[str]:
    return re.sub(r"\[\d*\]", "[]", path).split(".")


def _run(summary: dict[str, Any], requests: pd.DataFrame, timeline: pd.DataFrame) -> _Checker:
    c = _Checker(summary)
    t = _Tables(requests, timeline)
    _requests(c, t)
    thr = _throughput(c, t)
    for section in (_latency, _concurrency, _kv, _prefix, _slo, _tiers, _bench_serve, _sparsity):
        section(c, t)
    _cost(c, thr)
    _fleet(c, t, thr)
    return c


def check_consistency(summary: dict[str, Any], requests: pd.DataFrame,
                      timeline: pd.DataFrame) -> list[Mismatch]:
    """Every figure of `summary` that the tables determine, recomputed from them and compared; plus a
    Mismatch (recomputed "neither checked nor exempt") for each numeric figure this module does not know."""
    c = _run(summary, requests, timeline)
    for path in numeric_leaves(summary):
        if path not in c.checked and exemption(path) is None:
            c.mismatches.append(Mismatch(path, c.get(path), "neither checked nor exempt", 0.0,
                                         "kvsim/metrics/consistency.py"))
    return c.mismatches


def checked_figures(summary: dict[str, Any], requests: pd.DataFrame, timeline: pd.DataFrame
                    ) -> tuple[list[str], list[str]]:
    """(checked, exempt) numeric figure paths of this summary."""
    c = _run(summary, requests, timeline)
    leaves = numeric_leaves(summary)
    return [p for p in leaves if p in c.checked], [p for p in leaves if p not in c.checked and exemption(p)]


def check_mode(summary: dict[str, Any]) -> bool:
    """Whether the run was in check mode: kv.check_invariants on the scenario or any of its pools."""
    sc = summary.get("scenario") or {}
    pools = (sc.get("cluster") or {}).get("pools") or []
    return bool((sc.get("kv") or {}).get("check_invariants")) or any(
        ((p or {}).get("kv") or {}).get("check_invariants") for p in pools)


def assert_consistent(summary: dict[str, Any], requests: pd.DataFrame, timeline: pd.DataFrame) -> None:
    """Raise ConsistencyError naming the first mismatching figure (and how many more) if there is one."""
    found = check_consistency(summary, requests, timeline)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        raise ConsistencyError(found[0].line() + more)
