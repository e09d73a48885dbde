"""`kind: synthetic`: independent requests with unique content and lengths drawn from distributions.

Open loop: one request per arrival of the arrival process, rids in arrival order. Closed loop: the
requests are split over the users (see `arrivals.closed_loop_counts`) and listed user by user; each
user's first request arrives at 0 and every later one is a follow-up of the user's previous request
(after = its rid, think_s = arrival.think_time_s, arrival_s = 0 as a placeholder).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim.workload.config import WorkloadConfig
from kvsim.workload.lengths import sample_lengths, sample_pairs
from kvsim.workload.links import independent_stream
from kvsim.workload.request import Request, RequestTable


def synthetic_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                       duration_s: float | None, base_dir: str | Path | None = None) -> list[Request]:
    """The synthetic request stream (see the module docstring for order and follow-up links)."""
    return list(synthetic_table(cfg, rng, max_requests, duration_s, base_dir))


def synthetic_table(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                    duration_s: float | None, base_dir: str | Path | None = None) -> RequestTable:
    """The stream of `synthetic_requests` as columns (the same requests, built as they are read)."""
    times, after, think = independent_stream(cfg.arrival, rng, max_requests, duration_s)
    n = len(times)
    if cfg.length_pairs is not None:
        prompt, output = sample_pairs(cfg.length_pairs, rng, n, base_dir)
    else:
        prompt = sample_lengths(cfg.prompt_len, rng, n, base_dir)
        output = sample_lengths(cfg.output_len, rng, n, base_dir)
    return RequestTable(times, prompt, output, after=after, think_s=think, n=cfg.n, source="synthetic")
