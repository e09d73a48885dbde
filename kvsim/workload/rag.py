"""`kind: rag`: retrieval-augmented generation over a passage corpus with Zipf popularity.

Request prompt, as segments:

    (instruction header h) (passage p1) ... (passage pk) (question, unique to the request)

The corpus has `passages` passages, passage i (0-based popularity rank) with a length drawn once from
`passage_len`. A request retrieves top_k distinct passages: each next one is drawn with probability
proportional to 1/(i+1)^zipf_s among the passages not yet chosen (sequential sampling without
replacement), and the draw order is the retrieval order, rank 1 first. `order: sorted` instead lists them by
popularity rank (a what-if for engines that reorder retrieved passages to share prefixes). The header is
one of `instructions` headers, chosen uniformly, each with a length drawn once from `instruction_len`.

Content ids: header h is RAG_INSTRUCTION_ID_BASE + h, passage i is RAG_PASSAGE_ID_BASE + i, the question
of request rid is RAG_QUESTION_ID_BASE + rid. Arrivals and closed loops as for `kind: synthetic`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim.workload.chat import zipf_weights
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.lengths import sample_lengths
from kvsim.workload.links import check_segments, independent_stream
from kvsim.workload.request import Request

RAG_INSTRUCTION_ID_BASE = 4 << 40
RAG_PASSAGE_ID_BASE = 5 << 40
RAG_QUESTION_ID_BASE = 6 << 40


REJECTION_ROUNDS = 8
"""Rounds of the fast draw-with-replacement pass before the rows still short are finished exactly."""


def zipf_top_k(n: int, k: int, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """n rows of k distinct indices: sequential weighted sampling without replacement, i.e. draws with
    replacement in order, a repeat skipped. Vectorised: 2k candidates per row at a time, rows that are
    still short drawn again, for at most REJECTION_ROUNDS rounds; a row still short then (the weights so
    concentrated that repeats dominate, e.g. zipf_s = 12) gets its remaining indices from the not yet
    chosen ones directly (`_draw_rest`), which is the same distribution in bounded time."""
    out = np.full((n, k), -1, dtype=np.int64)
    filled = np.zeros(n, dtype=np.int64)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    rows = np.arange(n)
    for _ in range(REJECTION_ROUNDS):
        if not len(rows):
            return out
        cand = np.searchsorted(cdf, rng.random((len(rows), 2 * k)), side="right")
        np.minimum(cand, len(weights) - 1, out=cand)
        for r, row in zip(rows.tolist(), cand.tolist(), strict=True):
            have = out[r]
            f = int(filled[r])
            seen = set(have[:f].tolist())
            for c in row:
                if c not in seen:
                    seen.add(c)
                    have[f] = c
                    f += 1
                    if f == k:
                        break
            filled[r] = f
        rows = rows[filled[rows] < k]
    if len(rows):
        _draw_rest(out, filled, rows, weights, rng)
    return out


def _draw_rest(out: np.ndarray, filled: np.ndarray, rows: np.ndarray, weights: np.ndarray,
               rng: np.random.Generator) -> None:
    """Fill rows `rows` of `out` (filled[r] indices drawn so far) by drawing each next index directly
    from those not yet in the row, with probability proportional to its weight: the free indices of a
    row form runs between its taken ones; a run is picked by its mass, an index within it by inverting
    the suffix sums (tail[i] = the weight of i and beyond, summed from the end, so that tiny tails keep
    their precision). One pick for every short row per step, vectorised over the rows."""
    size, k = len(weights), out.shape[1]
    tail = np.concatenate((np.cumsum(weights[::-1])[::-1], [0.0]))
    neg_tail = -tail  # non-decreasing, for searchsorted
    taken = np.where(np.arange(k) < filled[rows, None], out[rows], size)
    taken.sort(axis=1)
    have = filled[rows].copy()
    live = np.arange(len(rows))
    while len(live):
        t = taken[live]
        starts = np.minimum(np.concatenate((np.zeros((len(live), 1), np.int64), t + 1), axis=1), size)
        ends = np.concatenate((t, np.full((len(live), 1), size)), axis=1)
        mass = np.where(starts < ends, np.maximum(tail[starts] - tail[ends], 0.0), 0.0)
        cum = np.cumsum(mass, axis=1)
        u = rng.random((len(live), 2))
        run = (cum <= (u[:, 0] * cum[:, -1])[:, None]).sum(axis=1)
        last_heavy = k - np.argmax((mass > 0)[:, ::-1], axis=1)  # u * total rounded up to the total
        run = np.where((run > k) | (np.take_along_axis(mass, np.minimum(run, k)[:, None], 1)[:, 0] <= 0),
                       last_heavy, run)
        first_free = np.argmax(starts < ends, axis=1)  # every free weight underflowed to 0
        run = np.where(cum[:, -1] > 0, run, first_free)
        a = np.take_along_axis(starts, run[:, None], 1)[:, 0]
        b = np.take_along_axis(ends, run[:, None], 1)[:, 0]
        m = np.take_along_axis(mass, run[:, None], 1)[:, 0]
        pick = np.searchsorted(neg_tail, -(tail[a] - u[:, 1] * m), side="right") - 1
        pick = np.clip(pick, a, b - 1)
        out[rows[live], have[live]] = pick
        taken[live, -1] = pick  # the last column is free: the row is short
        taken[live] = np.sort(taken[live], axis=1)
        have[live] += 1
        live = live[have[live] < k]


def rag_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                 duration_s: float | None, base_dir: str | Path | None = None) -> list[Request]:
    """The RAG request stream (see the module docstring)."""
    rag = cfg.rag
    times, after, think = independent_stream(cfg.arrival, rng, max_requests, duration_s)
    n = len(times)
    check_segments(n * (rag.top_k + 2), "workload.rag.top_k")
    passage_len = sample_lengths(rag.passage_len, rng, rag.passages, base_dir)
    header_len = sample_lengths(rag.instruction_len, rng, rag.instructions, base_dir)
    header = rng.integers(0, rag.instructions, size=n)
    chosen = zipf_top_k(n, rag.top_k, zipf_weights(rag.passages, rag.zipf_s), rng)
    if rag.order == "sorted":
        chosen.sort(axis=1)
    question = sample_lengths(rag.question_len, rng, n, base_dir)
    output = sample_lengths(cfg.output_len, rng, n, base_dir)
    plen = passage_len.tolist()
    hlen = header_len.tolist()
    out: list[Request] = []
    for rid, (t, h, ps, q, o, a, k) in enumerate(zip(times.tolist(), header.tolist(), chosen.tolist(),
                                                      question.tolist(), output.tolist(), after.tolist(),
                                                      think.tolist(), strict=True)):
        segs = ((RAG_INSTRUCTION_ID_BASE + h, hlen[h]), *((RAG_PASSAGE_ID_BASE + p, plen[p]) for p in ps),
                (RAG_QUESTION_ID_BASE + rid, q))
        prompt = sum(length for _, length in segs)
        out.append(Request(rid=rid, arrival_s=t, prompt_len=prompt, output_len=o, n=cfg.n, segments=segs,
                           after=a, think_s=k, source="rag"))
    return out
