"""kind: rag: prompt structure, Zipf top-k without replacement, ordering, closed loop."""

import numpy as np
import pytest
from pydantic import ValidationError

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
