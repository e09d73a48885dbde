"""build_summary on the hand-filled recorder of conftest.py; every expected number worked out by hand."""

import json

import pytest

from kvsim.metrics.recorder import Recorder
from kvsim.metrics.summary import build_summary, summary_table_rows

approx = pytest.approx


def _assert_plain(node, path="summary"):
    """Only JSON-native types (exact type, so numpy float64 - a float subclass - is caught)."""
    if isinstance(node, dict):
        for k, v in node.items():
            assert type(k) is str, path
            _assert_plain(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _assert_plain(v, f"{path}[{i}]")
    else:
        assert node is None or type(node) in (bool, int, float, str), f"{path}: {type(node)}"


def test_requests_and_throughput(frames, meta):
    s = build_summary(*frames, meta)
    # completed: rids 0 and 1 (rid 2 has no finish_s, rid 3 was rejected)
    assert s["requests"] == {
        "total": 4,
        "completed": 2,
        "rejected": 1,
        "prompt_tokens": 150,      # 100 + 50
        "output_tokens": 13,       # 11 * 1 + 1 * 2
        "cached_tokens": 16,
        "preempted": 1,            # rid 1
        "sessions": None,          # no request belongs to a session
        "requests_per_session": None,
    }
    # makespan: last finish 2.0 - first arrival 0.0; offered: 4 arrivals over 2.5 s, 3 gaps
    assert s["throughput"] == {
        "makespan_s": 2.0,
        "requests_per_s": 1.0,         # 2 / 2.0
        "output_tokens_per_s": 6.5,    # 13 / 2.0
        "total_tokens_per_s": 81.5,    # (13 + 150) / 2.0
        "arrival_span_s": 2.5,
        "offered_requests_per_s": 1.2,  # (4 - 1) / 2.5
        "offered_tokens_per_s": approx(1.2 * 9373 / 4),
        "sessions_per_s": None,
    }
    assert s["prefix_cache"]["hit_rate_tokens"] == approx(16 / 150)  # more in test_prefix.py


def test_latency(frames, meta):
    lat = build_summary(*frames, meta)["latency"]
    # TTFT: rid 0 0.5 - 0.0 = 0.5, rid 1 2.0 - 1.0 = 1.0, rids 2 and 3 none.
    # linear percentiles of [0.5, 1.0]: p90 = 0.5 + 0.9 * 0.5, p99 = 0.5 + 0.99 * 0.5
    assert lat["ttft_s"] == approx({"mean": 0.75, "p50": 0.75, "p90": 0.95, "p99": 0.995})
    # TPOT: only output_len > 1 -> rid 0: (1.5 - 0.5) / (11 - 1) = 0.1 (rids 2, 3 unfinished)
    assert lat["tpot_s"] == approx({"mean": 0.1, "p50": 0.1, "p90": 0.1, "p99": 0.1})
    # E2E over completed: [1.5, 1.0]
    assert lat["e2e_s"] == approx({"mean": 1.25, "p50": 1.25, "p90": 1.45, "p99": 1.495})
    # queue: [0.0, 0.5, 1.0] (rid 3 never scheduled)
    # p90 at rank 1.8 -> 0.5 + 0.8 * 0.5, p99 at rank 1.98 -> 0.5 + 0.98 * 0.5
    assert lat["queue_s"] == approx({"mean": 0.5, "p50": 0.5, "p90": 0.9, "p99": 0.99})


def test_concurrency(frames, meta):
    c = build_summary(*frames, meta)["concurrency"]
    # hold_s: replica 0 rows [1.0, 0.5, 0.5], replica 1 row [1.0]
    # running: replica 0 (1*1 + 2*0.5 + 3*0.5) / 2 = 1.75, replica 1 = 1 -> mean of the two 1.375
    # pooled weights: value 1 holds 2.0, value 2 0.5, value 3 0.5 (total 3): F(1) = 2/3, F(2) = 5/6
    assert c == approx({
        "mean": 1.375, "p50": 1.0, "p99": 3.0, "max": 3,
        # waiting: replica 0 (0*1 + 1*0.5 + 0*0.5) / 2 = 0.25, replica 1 = 2 -> 1.125
        "waiting_mean": 1.125, "waiting_max": 2,
    })


def test_kv(frames, meta):
    kv = build_summary(*frames, meta)["kv"]
    kv.pop("breakdown"), kv.pop("sharing_saving")  # hand-checked in test_breakdown.py
    assert kv == approx({
        "capacity_blocks": 10,
        "block_size": 4,
        "capacity_tokens": 40,           # 10 * 4
        "bytes_per_token": 1000,
        "bytes_per_block": 4000,
        "capacity_bytes": 40000,         # 10 * 4000
        # token states / 40: [0.3, 0.75, 1.0 | 0.125]
        # replica 0 (0.3*1 + 0.75*0.5 + 1.0*0.5) / 2 = 0.5875; replica 1 0.125 -> 0.35625
        "utilization_mean": 0.35625,
        "utilization_max": 1.0,
        # used blocks / 10: [0.4, 0.8, 1.0 | 0.2]; replica 0 (0.4 + 0.4 + 0.5) / 2 = 0.65 -> (0.65 + 0.2) / 2
        "used_blocks_mean": 0.425,
        "used_blocks_max": 1.0,
        # cached / 10: [0, 0.2, 0 | 0]; replica 0 0.2*0.5 / 2 = 0.05 -> 0.025
        "cached_blocks_mean": 0.025,
        # (used*4 - tokens) / 40: [4/40, 2/40, 0 | 3/40] = [0.1, 0.05, 0 | 0.075]
        # replica 0 (0.1*1 + 0.05*0.5) / 2 = 0.0625; replica 1 0.075 -> 0.06875
        "internal_fragmentation_mean": 0.06875,
    })


def test_counts_and_meta_copies(frames, meta):
    s = build_summary(*frames, meta)
    assert s["preemptions"] == 1
    assert s["iterations"] == 4
    assert s["cow_copies"] == 3            # 1 + 2
    assert s["replicas"] == 2
    assert s["weight_bytes_per_gpu"] == 16_000_000_000
    for key in ("scenario", "kvsim_version", "model", "hardware", "cost_model"):
        assert s[key] == meta[key]
    assert set(s) == {"requests", "throughput", "latency", "concurrency", "kv", "prefix_cache",
                      "preemptions", "iterations", "cow_copies", "replicas", "weight_bytes_per_gpu",
                      "scenario", "kvsim_version", "model", "hardware", "cost_model"}


def test_json_safe_and_deterministic(frames, meta):
    a = build_summary(*frames, meta)
    _assert_plain(a)
    b = build_summary(*frames, meta)
    assert json.dumps(a, sort_keys=True, allow_nan=False) == json.dumps(b, sort_keys=True, allow_nan=False)


def test_missing_meta_and_empty_run():
    rec = Recorder()
    s = build_summary(rec.requests_frame(), rec.timeline_frame(), {})
    _assert_plain(s)
    assert s["requests"]["total"] == 0
    assert s["throughput"]["makespan_s"] is None
    assert s["throughput"]["requests_per_s"] is None
    assert s["latency"]["ttft_s"]["p99"] is None
    assert s["concurrency"]["mean"] is None and s["concurrency"]["max"] is None
    assert s["kv"]["capacity_tokens"] is None and s["kv"]["utilization_mean"] is None
    assert s["prefix_cache"]["hit_rate_tokens"] is None and s["prefix_cache"]["hit_rate_blocks"] is None
    assert s["replicas"] == 1
    assert s["scenario"] is None
    json.dumps(s, allow_nan=False)
    assert summary_table_rows(s)  # formats Nones as "-"


def test_replicas_inferred_without_meta(frames):
    assert build_summary(*frames, {})["replicas"] == 2


def test_summary_table_rows(frames, meta):
    rows = dict(summary_table_rows(build_summary(*frames, {**meta, "prefix_cache": "hash"})))
    assert rows["requests completed / total"] == "2 / 4"
    assert rows["served requests/s"] == "1" and rows["offered requests/s"] == "1.2"
    assert rows["served output / total tokens/s"] == "6.5 / 81.5"
    assert rows["TTFT mean / p50 / p90 / p99 (s)"] == "0.75 / 0.75 / 0.95 / 0.995"
    assert rows["concurrency mean / p50 / p99 / max"] == "1.375 / 1 / 3 / 3"
    assert rows["KV capacity (blocks x block size)"] == "10 x 4 = 40 tokens"
    assert rows["KV utilization mean / max"] == "35.6% / 100.0%"
    assert rows["prefix cache hit rate tokens / blocks"] == "10.7% / 10.5%"
    assert rows["copy-on-write copies"] == "3"
    labels = [label for label, _ in summary_table_rows(build_summary(*frames, meta))]
    assert labels[0] == "requests completed / total" and labels[-1] == "copy-on-write copies"


def test_rejected_with_finish_time_is_not_completed(frames, meta):
    requests, timeline = frames
    requests = requests.copy()
    requests.loc[requests["rid"] == 3, "finish_s"] = 2.5
    s = build_summary(requests, timeline, meta)
    assert s["requests"]["completed"] == 2
    assert s["throughput"]["makespan_s"] == 2.0  # last completion, not the rejection at 2.5


def test_offered_rates_and_sessions(frames, meta):
    """Arrivals 0, 1, 2, 2.5 (4 requests over 2.5 s: 3 gaps), sessions 0 (rids 0, 1), 1 (rid 2) and a
    request of none (rid 3): 1.2 requests/s offered, 2 sessions of 1.5 requests, started 0 and 2 s."""
    requests, timeline = frames
    requests = requests.assign(session=[0, 0, 1, -1])
    s = build_summary(requests, timeline, meta)
    thr, req = s["throughput"], s["requests"]
    assert thr["arrival_span_s"] == 2.5 and thr["offered_requests_per_s"] == pytest.approx(1.2)
    # tokens per request: (100 + 11) + (50 + 1 x 2) + (200 + 5) + (9000 + 5) = 9373 over 4 requests
    assert thr["offered_tokens_per_s"] == pytest.approx(1.2 * 9373 / 4)
    assert (req["sessions"], req["requests_per_session"]) == (2, 1.5)
    assert thr["sessions_per_s"] == pytest.approx(0.5)
    rows = dict(summary_table_rows(s))
    assert rows["offered requests/s"] == "1.2 (0.5 sessions/s)"
    assert rows["sessions / requests per session"] == "2 / 1.5"
    assert rows["served requests/s"] == _fmt_rate(thr["requests_per_s"])
    plain = build_summary(*frames, meta)  # no session column: no sessions
    assert plain["requests"]["sessions"] is None and plain["throughput"]["sessions_per_s"] is None


def _fmt_rate(x):
    return f"{x:.4g}"
