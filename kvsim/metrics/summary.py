"""Turn the recorder's requests and timeline frames into the nested summary dict written to summary.json,
and into rows for the console table. docs/metrics.md defines every key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.kvcache.breakdown import SUMMARY_KEYS
from kvsim.metrics import core_sections as core
from kvsim.metrics.bench_serve import bench_serve_rows, bench_serve_section
from kvsim.metrics.consistency_core import check_mode
from kvsim.metrics.cost import cost_rows, cost_section
from kvsim.metrics.fleet import fleet_rows, fleet_section
from kvsim.metrics.frames import completed
from kvsim.metrics.lora import lora_rows, lora_section
from kvsim.metrics.prefix import prefix_cache_rows
from kvsim.metrics.run_tables import RunTables
from kvsim.metrics.slo import goodput_section, meets_slo, slo_rows, slo_section
from kvsim.metrics.sparsity import sparsity_rows, sparsity_section
from kvsim.metrics.speculative import speculative_rows, speculative_section
from kvsim.metrics.stats import plain, time_weighted_mean
from kvsim.metrics.tiers import tiers_rows, tiers_section
from kvsim.metrics.timeline_figures import ReplicaMeans

if TYPE_CHECKING:
    import pandas as pd

META_COPIES: tuple[str, ...] = ("scenario", "kvsim_version", "model", "hardware", "cost_model")


def build_summary(requests: pd.DataFrame | RunTables, timeline: pd.DataFrame | None,
                  meta: dict[str, Any]) -> dict[str, Any]:
    """The run's summary as plain JSON-safe data (ints, floats, None for undefined figures). requests: the
    requests frame (with the timeline frame), or a run's RunTables (timeline None): the sections every run
    has then read its compact columns (kvsim/metrics/core_sections.py) and the frames are built only for
    the sections that need them (tiers, sparsity, speculative, LoRA, SLOs, fleet, bench_serve, check mode)."""
    tables = requests if isinstance(requests, RunTables) else RunTables.from_frames(requests, timeline)
    rq = core.Requests(tables)
    mean = ReplicaMeans(tables)
    summary: dict[str, Any] = {
        "requests": core.requests_section(rq),
        "throughput": core.throughput_section(rq),
        "latency": core.latency_section(rq),
        "concurrency": core.concurrency_section(tables, mean),
        "kv": core.kv_section(tables, meta, mean),
        "prefix_cache": core.prefix_cache_section(rq, tables, meta),
        **core.timeline_counts(tables),
        "replicas": core.replica_count(rq, tables, meta),
        "weight_bytes_per_gpu": plain(meta.get("weight_bytes_per_gpu")),
    }
    del rq, mean
    if any(meta.get(k) is not None for k in _FRAME_SECTIONS):
        _frame_sections(summary, tables, meta)
    cost = cost_section(meta.get("pricing"), summary["throughput"])
    if cost is not None:  # fleet rental cost (docs/metrics.md, cost)
        summary["cost"] = cost
    slo = (meta.get("scenario") or {}).get("slo")
    if slo:  # service-level objectives (docs/metrics.md, SLOs and goodput)
        requests = tables.requests_frame()
        meets = (requests["meets_slo"].to_numpy(bool) if "meets_slo" in requests.columns
                 else meets_slo(requests, slo))
        summary["slo"] = slo_section(requests, slo)
        summary["goodput"] = goodput_section(meets, summary["throughput"]["makespan_s"])
    if meta.get("fleet") is not None:  # several replicas or a cluster: section (docs/metrics.md, Fleet)
        summary["fleet"] = fleet_section(tables.requests_frame(), tables.timeline_frame(), meta)
    workload = (meta.get("scenario") or {}).get("workload") or {}
    if workload.get("kind") == "bench_serve":  # the benchmark client's figures (docs/metrics.md, bench_serve)
        summary["bench_serve"] = bench_serve_section(tables.requests_frame(), tables.timeline_frame(),
                                                     workload.get("bench_serve") or {})
    for key in META_COPIES:
        summary[key] = meta.get(key)
    if check_mode(summary):  # kv.check_invariants: every figure must agree with the tables it came from
        from kvsim.metrics.consistency import assert_consistent  # (check mode only: off a run's start-up)

        assert_consistent(summary, tables.requests_frame(), tables.timeline_frame())
    return summary


_FRAME_SECTIONS = ("tiers", "sparsity", "speculative", "lora")


def _frame_sections(summary: dict[str, Any], tables: RunTables, meta: dict[str, Any]) -> None:
    """The sections read off the pandas frames: tiers, sparsity, speculative decoding, LoRA."""
    requests, timeline = tables.requests_frame(), tables.timeline_frame()
    done = completed(requests)
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


def session_starts(requests: pd.DataFrame) -> np.ndarray:
    """The first arrival_s of each session (chat session, agent episode), sorted; empty without sessions."""
    if "session" not in requests.columns:
        return np.array([], dtype=np.float64)
    return core.session_starts(requests["session"].to_numpy(np.int64),
                               requests["arrival_s"].to_numpy(np.float64))


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
