"""The entry points that turn a workload config into a request stream: `build_requests` (a list) and
`build_request_stream` (what the engine replays: columns where the generator has them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kvsim.errors import KvsimError
from kvsim.schema import MAX_REQUESTS
from kvsim.workload.agentic import agentic_requests
from kvsim.workload.bench_serve import bench_serve_requests, bench_serve_table
from kvsim.workload.chat import chat_requests, chat_table
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.mix import mix_requests
from kvsim.workload.rag import rag_requests
from kvsim.workload.request import Request, RequestTable
from kvsim.workload.rereads import annotate_rereads
from kvsim.workload.synthetic import synthetic_requests, synthetic_table
from kvsim.workload.trace import trace_requests

_GENERATORS = {
    "synthetic": synthetic_requests,
    "chat": chat_requests,
    "trace": trace_requests,
    "rag": rag_requests,
    "agentic": agentic_requests,
    "mix": mix_requests,
    "bench_serve": bench_serve_requests,
}
_TABLES = {"synthetic": synthetic_table, "chat": chat_table, "bench_serve": bench_serve_table}
"""Generators that can hand their stream over as a RequestTable."""


def build_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None = None,
                   duration_s: float | None = None, base_dir: str | Path | None = None) -> list[Request]:
    """All requests of a run, deterministic for a given rng state.

    The list is ordered by rid (0..N-1) and sorted by (arrival_s, rid). Open-loop requests (after == -1)
    have rids increasing with arrival_s. A follow-up (after >= 0) comes after the request it waits for,
    carries that request's arrival_s as a placeholder, and is released think_s after it completes.
    max_requests caps the total count, follow-ups included (the first requests in list order are kept);
    duration_s drops open-loop arrivals after it but keeps follow-ups of sessions that started in time
    (infinite: no time limit). max_requests is at most MAX_REQUESTS.
    Relative file paths resolve against base_dir, else the working directory.
    """
    _check_bounds(max_requests, duration_s)
    generator = _GENERATORS.get(cfg.kind)
    if generator is None:
        raise KvsimError(f"workload.kind: unknown kind '{cfg.kind}' (known: {', '.join(_GENERATORS)})")
    requests = generator(cfg, rng, max_requests, duration_s, base_dir)
    annotate_rereads(requests, cfg.rereads, rng)
    if cfg.beam_width > 1:
        for r in requests:
            r.beam_width = cfg.beam_width
    return requests


def build_request_stream(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None = None,
                         duration_s: float | None = None, base_dir: str | Path | None = None
                         ) -> Sequence[Request]:
    """The requests of `build_requests`, the same ones in the same order, as a RequestTable (a few
    columns, each Request built when it is read) where the generator has one and no re-reads are drawn;
    else the list."""
    table = _TABLES.get(cfg.kind)
    if table is None or cfg.rereads.mean > 0:
        return build_requests(cfg, rng, max_requests, duration_s, base_dir)
    _check_bounds(max_requests, duration_s)
    out: RequestTable = table(cfg, rng, max_requests, duration_s, base_dir)
    out.beam_width = cfg.beam_width if cfg.beam_width > 1 else 1
    return out


def _check_bounds(max_requests: int | None, duration_s: float | None) -> None:
    if max_requests is None and duration_s is None:
        raise KvsimError("simulation: set 'requests' or 'duration_s'")
    if max_requests is not None and max_requests > MAX_REQUESTS:  # callers that skip the schema
        raise KvsimError(f"requests: {max_requests:,} is more than the {MAX_REQUESTS:,} one run may generate")
