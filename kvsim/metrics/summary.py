"""Turn the recorder's requests and timeline frames into the nested summary dict written to summary.json,
and into rows for the console table. docs/metrics.md defines every key."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from kvsim.kvcache.breakdown import SUMMARY_KEYS
from kvsim.metrics.bench_serve import bench_serve_rows, bench_serve_section
from kvsim.metrics.breakdown import breakdown_means, sharing_saving
from kvsim.metrics.consistency_core import check_mode
from kvsim.metrics.cost import cost_rows, cost_section
from kvsim.metrics.fleet import fleet_rows, fleet_section
from kvsim.metrics.frames import completed, makespan_s, rejected, replica_capacities, row_capacity, with_hold
from kvsim.metrics.lora import lora_rows, lora_section
from kvsim.metrics.prefix import prefix_cache_rows, prefix_cache_section
from kvsim.metrics.slo import goodput_section, meets_slo, slo_rows, slo_section
from kvsim.metrics.sparsity import sparsity_rows, sparsity_section
from kvsim.metrics.speculative import speculative_rows, speculative_section
from kvsim.metrics.stats import percentiles, plain, time_weighted_mean, time_weighted_quantile, whole
from kvsim.metrics.tiers import tiers_rows, tiers_section

META_COPIES: tuple[str, ...] = ("scenario", "kvsim_version", "model", "hardware", "cost_model")


def build_summary(requests: pd.DataFrame, timeline: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
    """The run's summary as plain JSON-safe data (ints, floats, None for undefined figures)."""
    timeline = with_hold(timeline)
    done = completed(requests)
    summary: dict[str, Any] = {
        "requests": _requests_section(requests, done),
        "throughput": _throughput_section(requests, done),
        "latency": _latency_section(requests, done),
        "concurrency": _concurrency_section(timeline),
        "kv": _kv_section(timeline, meta),
        "prefix_cache": prefix_cache_section(done, timeline, meta),
        "preemptions": _int_sum(timeline, "preempted"),
        "iterations": int((timeline["iteration"] >= 0).sum()) if len(timeline) else 0,
        "cow_copies": _int_sum(timeline, "cow_copies"),
        "replicas": _replicas(requests, timeline, meta),
        "weight_bytes_per_gpu": plain(meta.get("weight_bytes_per_gpu")),
    }
    if meta.get("tiers") is not None:  # KV tiers below the GPU (docs/tiers.md)
        summary["tiers"] = tiers_section(done, timeline, meta, summary["throughput"]["makespan_s"],
                                         _per_replica_mean)
    if meta.get("sparsity") is not None:  # token-level eviction / offload (docs/sparsity.md)
        summary["sparsity"] = sparsity_section(requests, timeline, meta, _per_replica_mean,
                                               summary["concurrency"]["mean"])
    if meta.get("speculative") is not None:  # speculative decoding (docs/speculative.md)
        summary["speculative"] = speculative_section(done, timeline, meta)
    if meta.get("lora") is not None:  # multi-LoRA serving (docs/lora.md)
        summary["lora"] = lora_section(requests, timeline, meta)
    cost = cost_section(meta.get("pricing"), summary["throughput"])
    if cost is not None:  # fleet rental cost (docs/metrics.md, cost)
        summary["cost"] = cost
    slo = (meta.get("scenario") or {}).get("slo")
    if slo:  # service-level objectives (docs/metrics.md, SLOs and goodput)
        meets = (requests["meets_slo"].to_numpy(bool) if "meets_slo" in requests.columns
                 else meets_slo(requests, slo))
        summary["slo"] = slo_section(requests, slo)
        summary["goodput"] = goodput_section(meets, summary["throughput"]["makespan_s"])
    if meta.get("fleet") is not None:  # several replicas or a cluster: section (docs/metrics.md, Fleet)
        summary["fleet"] = fleet_section(requests, timeline, meta)
    workload = (meta.get("scenario") or {}).get("workload") or {}
    if workload.get("kind") == "bench_serve":  # the benchmark client's figures (docs/metrics.md, bench_serve)
        summary["bench_serve"] = bench_serve_section(requests, timeline, workload.get("bench_serve") or {})
    for key in META_COPIES:
        summary[key] = meta.get(key)
    if check_mode(summary):  # kv.check_invariants: every figure must agree with the tables it came from
        from kvsim.metrics.consistency import assert_consistent  # (check mode only: off a run's start-up)

        assert_consistent(summary, requests, timeline)
    return summary


def _int_sum(df: pd.DataFrame, col: str) -> int:
    return int(df[col].sum()) if len(df) else 0


def _output_tokens(done: pd.DataFrame) -> int:
    return int((done["output_len"] * done["n"]).sum()) if len(done) else 0


def _requests_section(requests: pd.DataFrame, done: pd.DataFrame) -> dict[str, Any]:
    sessions = session_starts(requests)
    in_sessions = int((_sessions(requests) >= 0).sum())
    return {
        "total": int(len(requests)),
        "completed": int(len(done)),
        "rejected": int((rejected(requests) != 0).sum()),
        "prompt_tokens": _int_sum(done, "prompt_len"),
        "output_tokens": _output_tokens(done),
        "cached_tokens": _int_sum(done, "cached_tokens"),
        "preempted": int((done["preemptions"] > 0).sum()) if len(done) else 0,
        "sessions": len(sessions) if len(sessions) else None,
        "requests_per_session": in_sessions / len(sessions) if len(sessions) else None,
    }


def _sessions(requests: pd.DataFrame) -> np.ndarray:
    """Each request's session id (-1: none; a frame without the column has none)."""
    if "session" not in requests.columns:
        return np.full(len(requests), -1, dtype=np.int64)
    return requests["session"].to_numpy(np.int64)


def session_starts(requests: pd.DataFrame) -> np.ndarray:
    """The first arrival_s of each session (chat session, agent episode), sorted; empty without sessions."""
    sid = _sessions(requests)
    keep = sid >= 0
    if not keep.any():
        return np.array([], dtype=np.float64)
    return np.sort(pd.Series(requests["arrival_s"].to_numpy(np.float64)[keep]).groupby(sid[keep]).min()
                   .to_numpy(np.float64))


def _rate(count: int, span: float | None) -> float | None:
    """(count - 1) / span: events per second over the span from the first to the last (None: undefined)."""
    return (count - 1) / span if span is not None and span > 0 and count > 1 else None


def _throughput_section(requests: pd.DataFrame, done: pd.DataFrame) -> dict[str, Any]:
    span = makespan_s(requests)
    out_tok = _output_tokens(done)
    total_tok = out_tok + _int_sum(done, "prompt_len")
    if span is None or span <= 0:
        rate = dict.fromkeys(("requests_per_s", "output_tokens_per_s", "total_tokens_per_s"))
    else:
        rate = {
            "requests_per_s": len(done) / span,
            "output_tokens_per_s": out_tok / span,
            "total_tokens_per_s": total_tok / span,
        }
    arrivals = requests["arrival_s"].to_numpy(np.float64)
    arrival_span = plain(arrivals.max() - arrivals.min()) if len(arrivals) else None
    offered = _rate(len(arrivals), arrival_span)
    starts = session_starts(requests)
    per_request = None
    if len(requests):
        tokens = requests["prompt_len"].to_numpy(np.float64) + (
            requests["output_len"] * requests["n"]).to_numpy(np.float64)
        per_request = float(tokens.mean())
    return {"makespan_s": span, **rate, "arrival_span_s": arrival_span,
            "offered_requests_per_s": offered,
            "offered_tokens_per_s": None if offered is None else offered * per_request,
            "sessions_per_s": _rate(len(starts), plain(starts[-1] - starts[0]) if len(starts) else None)}


def _latency_section(requests: pd.DataFrame, done: pd.DataFrame) -> dict[str, Any]:
    multi = requests["output_len"] > 1
    return {
        "ttft_s": percentiles(requests["ttft_s"]),
        "tpot_s": percentiles(requests["tpot_s"][multi]),
        "e2e_s": percentiles(done["e2e_s"]),
        "queue_s": percentiles(requests["queue_s"]),
    }


def _per_replica_mean(timeline: pd.DataFrame, values: pd.Series) -> float | None:
    """Mean over replicas of each replica's time-weighted mean (weights hold_s); replicas with no held
    time are skipped."""
    v = values.to_numpy(np.float64)
    hold = timeline["hold_s"].to_numpy(np.float64)
    means = []
    for _, pos in sorted(timeline.groupby("replica", sort=True).indices.items()):
        m = time_weighted_mean(v[pos], hold[pos])
        if m is not None:
            means.append(m)
    return float(np.mean(means)) if means else None


def _max(values: pd.Series) -> Any:
    return plain(values.max()) if len(values) else None


def _concurrency_section(timeline: pd.DataFrame) -> dict[str, Any]:
    running = timeline["running_reqs"]
    hold = timeline["hold_s"]
    return {
        "mean": _per_replica_mean(timeline, running),
        "p50": time_weighted_quantile(running, hold, 0.5),
        "p99": time_weighted_quantile(running, hold, 0.99),
        "max": _max(running),
        "waiting_mean": _per_replica_mean(timeline, timeline["waiting"]),
        "waiting_max": _max(timeline["waiting"]),
    }


def _common(values: list[float]) -> int | None:
    """The one value every replica has (as an int), or None when they differ or one is unknown."""
    first = values[0] if values else float("nan")
    if first != first or any(v != first for v in values):
        return None
    return whole(first)


def _kv_section(timeline: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
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
    # each row over its replica's capacity: one number without a fleet, the replica's own with one
    row_blocks: Any = blocks
    row_bs: Any = block_size
    row_tokens: Any = cap_tokens
    if fleet is not None:
        row_blocks, row_bs = row_capacity(timeline, caps)
        row_tokens = row_blocks * row_bs
        known = bool(row_tokens.notna().any())
    else:
        known = bool(cap_tokens)
    ratios = ("utilization_mean", "utilization_max", "used_blocks_mean", "used_blocks_max",
              "cached_blocks_mean", "internal_fragmentation_mean")
    if not known or not len(timeline):
        return {**out, **dict.fromkeys(ratios), "breakdown": dict.fromkeys(SUMMARY_KEYS),
                "sharing_saving": None}
    util = timeline["kv_token_states"] / row_tokens
    used = timeline["kv_used_blocks"] / row_blocks
    unfilled = (timeline["kv_used_blocks"] * row_bs - timeline["kv_token_states"]) / row_tokens
    out.update({
        "utilization_mean": _per_replica_mean(timeline, util),
        "utilization_max": _max(util),
        "used_blocks_mean": _per_replica_mean(timeline, used),
        "used_blocks_max": _max(used),
        "cached_blocks_mean": _per_replica_mean(timeline, timeline["kv_cached_blocks"] / row_blocks),
        "internal_fragmentation_mean": _per_replica_mean(timeline, unfilled),
        "breakdown": breakdown_means(timeline, row_tokens, _per_replica_mean),
        "sharing_saving": sharing_saving(timeline),
    })
    return out


def _replicas(requests: pd.DataFrame, timeline: pd.DataFrame, meta: dict[str, Any]) -> int:
    if meta.get("replicas") is not None:
        return int(meta["replicas"])
    seen = set(requests["replica"].tolist()) | set(timeline["replica"].tolist())
    return max(len(seen), 1)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return f"{x:,}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _join(values: list[Any], fmt=_fmt) -> str:
    return " / ".join(fmt(v) for v in values)


def session_word(summary: dict[str, Any]) -> str:
    """What the run's sessions are called: episodes (agentic) or sessions."""
    kind = ((summary.get("scenario") or {}).get("workload") or {}).get("kind")
    return "episodes" if kind == "agentic" else "sessions"


def summary_table_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, formatted value) rows for the console table and report.md, in a fixed order."""
    req, thr, lat = summary["requests"], summary["throughput"], summary["latency"]
    conc, kv = summary["concurrency"], summary["kv"]
    rows = [("requests completed / total", f"{_fmt(req['completed'])} / {_fmt(req['total'])}")]
    offered = _fmt(thr.get("offered_requests_per_s"))
    if req.get("sessions"):
        word = session_word(summary)
        rows.append((f"{word} / requests per {word[:-1]}",
                     f"{_fmt(req['sessions'])} / {_fmt(req['requests_per_session'])}"))
        offered += f" ({_fmt(thr.get('sessions_per_s'))} {word}/s)"
    rows += [
        ("makespan (s)", _fmt(thr["makespan_s"])),
        ("offered requests/s", offered),
        ("served requests/s", _fmt(thr["requests_per_s"])),
        ("served output / total tokens/s",
         f"{_fmt(thr['output_tokens_per_s'])} / {_fmt(thr['total_tokens_per_s'])}"),
    ]
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E"), ("queue_s", "queue")):
        stats = lat[key]
        rows.append((f"{label} mean / p50 / p90 / p99 (s)", _join([stats[k] for k in stats])))
    rows += [
        ("concurrency mean / p50 / p99 / max",
         _join([conc["mean"], conc["p50"], conc["p99"], conc["max"]])),
        ("waiting mean / max", _join([conc["waiting_mean"], conc["waiting_max"]])),
        ("KV capacity (blocks x block size)",
         f"{_fmt(kv['capacity_blocks'])} x {_fmt(kv['block_size'])} = {_fmt(kv['capacity_tokens'])} tokens"),
        ("KV utilization mean / max", _join([kv["utilization_mean"], kv["utilization_max"]], _pct)),
        ("KV used blocks mean / max", _join([kv["used_blocks_mean"], kv["used_blocks_max"]], _pct)),
        ("KV internal fragmentation mean", _pct(kv["internal_fragmentation_mean"])),
        ("KV states / reserved / internal / external / free",
         _join([kv["breakdown"][k] for k in SUMMARY_KEYS], _pct)),
    ]
    if kv["sharing_saving"]:
        rows.append(("KV blocks saved by sharing", _pct(kv["sharing_saving"])))
    rows += prefix_cache_rows(summary["prefix_cache"], _pct)
    rows += tiers_rows(summary.get("tiers"), _fmt, _pct)
    rows += sparsity_rows(summary.get("sparsity"), _fmt, _pct)
    rows += speculative_rows(summary.get("speculative"), _fmt, _pct)
    rows += lora_rows(summary.get("lora"), _fmt, _pct)
    rows += slo_rows(summary.get("slo"), summary.get("goodput"), _fmt, _pct)
    rows += cost_rows(summary.get("cost"), _fmt)
    rows += [
        ("preemptions", _fmt(summary["preemptions"])),
        ("iterations", _fmt(summary["iterations"])),
        ("copy-on-write copies", _fmt(summary["cow_copies"])),
    ]
    if summary.get("fleet") is not None:
        rows += fleet_rows(summary["fleet"], _fmt, _pct)
    rows += bench_serve_rows(summary.get("bench_serve"))
    return rows
