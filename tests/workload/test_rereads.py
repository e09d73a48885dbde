"""workload.rereads: which segments a request re-reads, determinism, and the off switch."""

from __future__ import annotations

import numpy as np

from kvsim.workload.config import WorkloadConfig
from kvsim.workload.factory import build_requests
from kvsim.workload.request import Request
from kvsim.workload.rereads import RereadConfig, annotate_rereads


def req(rid, segments, source="agentic"):
    return Request(rid, 0.0, sum(n for _, n in segments), 10, segments=tuple(segments), source=source)


def test_eligible_segments_only():
    # first and last skipped, segment 3 too short: only ids 2 and 4 can be re-read
    r = req(0, [(1, 500), (2, 100), (3, 10), (4, 200), (5, 50)])
    annotate_rereads([r], RereadConfig(mean=50, min_tokens=32), np.random.default_rng(0))
    assert r.rereads == (2, 4)  # Poisson(50) draws far more than two: each eligible segment once


def test_sources_filter_and_no_eligible_segment():
    a = req(0, [(1, 500), (2, 100), (3, 100)], source="chat")
    b = req(1, [(1, 500), (2, 100), (3, 100)], source="agentic")
    c = req(2, [(1, 500), (3, 100)])
    annotate_rereads([a, b, c], RereadConfig(mean=50, sources=["agentic"]), np.random.default_rng(0))
    assert a.rereads == () and b.rereads == (2,) and c.rereads == ()


def test_mean_zero_leaves_the_stream_and_rng_alone():
    rng = np.random.default_rng(3)
    r = req(0, [(1, 500), (2, 100), (3, 100)])
    annotate_rereads([r], RereadConfig(), rng)
    assert r.rereads == () and rng.integers(1 << 30) == np.random.default_rng(3).integers(1 << 30)


def test_generated_stream_is_deterministic_and_unchanged_otherwise():
    cfg = WorkloadConfig(kind="chat", rereads=RereadConfig(mean=1.0))
    plain = WorkloadConfig(kind="chat")
    a = build_requests(cfg, np.random.default_rng(7), 200)
    b = build_requests(cfg, np.random.default_rng(7), 200)
    c = build_requests(plain, np.random.default_rng(7), 200)
    assert [r.rereads for r in a] == [r.rereads for r in b]
    assert sum(len(r.rereads) for r in a) > 20
    assert [(r.prompt_len, r.output_len, r.segments) for r in a] == [
        (r.prompt_len, r.output_len, r.segments) for r in c]
    for r in a:
        ids = {cid for cid, _ in r.segments[1:-1]}
        assert set(r.rereads) <= ids
