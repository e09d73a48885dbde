"""kind: rag: prompt structure, Zipf top-k without replacement, ordering, closed loop."""

import time
from collections import Counter

import numpy as np
import pytest
from pydantic import ValidationError

from kvsim.errors import KvsimError
from kvsim.workload import links
from kvsim.workload import rag as rag_module
from kvsim.workload.chat import zipf_weights
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.factory import build_requests
from kvsim.workload.rag import RAG_INSTRUCTION_ID_BASE, RAG_PASSAGE_ID_BASE, RAG_QUESTION_ID_BASE, zipf_top_k


def rag(**kw):
    return WorkloadConfig.model_validate({"kind": "rag", **kw})


def test_prompt_is_header_passages_question():
    cfg = rag(rag={"passages": 50, "top_k": 3, "instructions": 2, "passage_len": {"dist": "uniform",
                                                                                 "low": 10, "high": 90}})
    reqs = build_requests(cfg, np.random.default_rng(1), 300)
    plen: dict[int, int] = {}
    for r in reqs:
        assert len(r.segments) == 5 and r.source == "rag" and r.after == -1
        header, *passages, question = r.segments
        assert header[0] - RAG_INSTRUCTION_ID_BASE in (0, 1) and header[1] == 300
        ids = [cid - RAG_PASSAGE_ID_BASE for cid, _ in passages]
        assert len(set(ids)) == 3 and all(0 <= i < 50 for i in ids)
        for cid, n in passages:
            assert plen.setdefault(cid, n) == n  # a passage has one length everywhere
        assert question[0] == RAG_QUESTION_ID_BASE + r.rid
        assert r.prompt_len == sum(n for _, n in r.segments)
    assert build_requests(cfg, np.random.default_rng(1), 300) == reqs  # deterministic


def test_sorted_order_lists_passages_by_rank():
    reqs = build_requests(rag(rag={"passages": 40, "top_k": 4, "order": "sorted"}),
                          np.random.default_rng(2), 100)
    for r in reqs:
        ids = [cid for cid, _ in r.segments[1:-1]]
        assert ids == sorted(ids)


def test_zipf_top_k_is_sequential_sampling_without_replacement():
    """Two passages with Zipf s = 1: weights 2/3 and 1/3, so a row starts with passage 0 with
    probability 2/3 and always holds both."""
    w = np.array([2 / 3, 1 / 3])
    rows = zipf_top_k(20000, 2, w, np.random.default_rng(0))
    assert (np.sort(rows, axis=1) == [0, 1]).all()
    assert (rows[:, 0] == 0).mean() == pytest.approx(2 / 3, abs=0.01)
    # s = 0 over 5: first pick uniform
    rows = zipf_top_k(20000, 3, np.full(5, 0.2), np.random.default_rng(1))
    assert np.bincount(rows[:, 0], minlength=5) / 20000 == pytest.approx([0.2] * 5, abs=0.015)
    assert all(len(set(r)) == 3 for r in rows.tolist())


def test_top_k_cannot_exceed_corpus():
    with pytest.raises(ValidationError, match="top_k must be <= passages"):
        rag(rag={"passages": 3, "top_k": 4})


def test_closed_loop_chains_each_user():
    cfg = rag(arrival={"process": "closed_loop", "users": 2, "think_time_s": 0.5})
    reqs = build_requests(cfg, np.random.default_rng(0), 5)
    assert [r.after for r in reqs] == [-1, 0, 1, -1, 3]
    assert [r.think_s for r in reqs] == [0.0, 0.5, 0.5, 0.0, 0.5]


@pytest.mark.parametrize("s", [12.0, 20.0])
def test_concentrated_popularity_terminates(s):
    """zipf_s = 12 once hung: passage 5 weighs 5^-12 = 4e-9 of passage 1, so drawing with replacement
    until 5 distinct ones turn up takes about 1e8 draws per row. Rows still short after the fast rounds are
    finished from the passages not yet chosen."""
    t0 = time.perf_counter()
    cfg = rag(rag={"passages": 10000, "top_k": 5, "zipf_s": s})
    reqs = build_requests(cfg, np.random.default_rng(0), 500)
    assert time.perf_counter() - t0 < 5
    ids = [sorted(cid - RAG_PASSAGE_ID_BASE for cid, _ in r.segments[1:-1]) for r in reqs]
    assert all(len(set(row)) == 5 for row in ids)
    # the fifth pick is passage 4 with odds 5^-s : 6^-s : ..., so 0..4 most of the time
    assert sum(row == [0, 1, 2, 3, 4] for row in ids) > 0.5 * len(ids)


def test_direct_draws_are_sequential_sampling_without_replacement(monkeypatch):
    """With no rejection rounds every pick comes from _draw_rest. Weights w = (4, 2, 1, 1) / 8: the pair
    (a, b) has probability w_a * w_b / (1 - w_a), e.g. (0, 1): 0.5 * 0.25 / 0.5 = 0.25, (2, 3): 0.125 *
    0.125 / 0.875 = 1/56, (1, 0): 0.25 * 0.5 / 0.75 = 1/6."""
    monkeypatch.setattr(rag_module, "REJECTION_ROUNDS", 0)
    w = np.array([4, 2, 1, 1]) / 8
    rows = zipf_top_k(40000, 2, w, np.random.default_rng(4))
    assert (rows[:, 0] != rows[:, 1]).all()
    pairs = Counter(map(tuple, rows.tolist()))
    assert pairs[(0, 1)] / 40000 == pytest.approx(0.25, abs=0.01)
    assert pairs[(2, 3)] / 40000 == pytest.approx(1 / 56, abs=0.004)
    assert pairs[(1, 0)] / 40000 == pytest.approx(1 / 6, abs=0.01)
    full = zipf_top_k(100, 4, w, np.random.default_rng(5))
    assert (np.sort(full, axis=1) == [0, 1, 2, 3]).all()


def _unbounded_top_k(n, k, weights, rng):
    """The rejection sampler as it was before the direct draws (loops until every row is full)."""
    out = np.full((n, k), -1, dtype=np.int64)
    filled = np.zeros(n, dtype=np.int64)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    rows = np.arange(n)
    while len(rows):
        cand = np.searchsorted(cdf, rng.random((len(rows), 2 * k)), side="right")
        cand = np.minimum(cand, len(weights) - 1)
        for r, row in zip(rows.tolist(), cand.tolist(), strict=True):
            seen = set(out[r, :filled[r]].tolist())
            for c in row:
                if c not in seen and filled[r] < k:
                    seen.add(c)
                    out[r, filled[r]] = c
                    filled[r] += 1
        rows = rows[filled[rows] < k]
    return out


def test_ordinary_popularity_draws_as_before():
    """Rows the rejection rounds complete are drawn exactly as by the old loop (same stream, same rows)."""
    w = zipf_weights(2000, 1.1)
    new = zipf_top_k(500, 5, w, np.random.default_rng(7))
    old = _unbounded_top_k(500, 5, w, np.random.default_rng(7))
    assert new.tolist() == old.tolist()


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("zipf_s", 21, "less than or equal to 20"),
    ("passages", 10**12, "less than or equal to 1000000"),
    ("top_k", 257, "less than or equal to 256"),
])
def test_bounds(key, value, needle):
    with pytest.raises(ValidationError, match=needle):
        rag(rag={"passages": 1000, key: value})


def test_segment_bound(monkeypatch):
    monkeypatch.setattr(links, "MAX_SEGMENTS", 600)
    with pytest.raises(KvsimError, match=r"^workload\.rag\.top_k: the prompts would list 700 segments in "
                                         r"all, more than the 600"):
        build_requests(rag(), np.random.default_rng(0), 100)  # 100 requests x (5 passages + 2)
