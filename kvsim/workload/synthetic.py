"""`kind: synthetic`: independent requests with unique content and lengths drawn from distributions.

Open loop: one request per arrival of the arrival process, rids in arrival order. Closed loop: the
requests are split over the users (see `arrivals.closed_loop_counts`) and listed user by user; each
user's first request arrives at 0 and every later one is a follow-up of the user's previous request
(after = its rid, think_s = arrival.think_time_s, arrival_s = 0 as a placeholder).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim.workload.arrivals import arrival_times, closed_loop_counts, require_request_cap
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.lengths import sample_lengths
from kvsim.workload.request import Request


def synthetic_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                       duration_s: float | None, base_dir: str | Path | None = None) -> list[Request]:
    """The synthetic request stream (see the module docstring for order and follow-up links)."""
    arrival = cfg.arrival
    if arrival.process == "closed_loop":
        n = require_request_cap(max_requests)
        counts = closed_loop_counts(n, arrival.users)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        first = np.zeros(n, dtype=bool)
        first[starts[counts > 0]] = True
        times = np.zeros(n)
        after = np.where(first, -1, np.arange(n) - 1)
        think = np.where(first, 0.0, arrival.think_time_s)
    else:
        times = arrival_times(arrival, rng, max_requests, duration_s)
        n = len(times)
        after = np.full(n, -1)
        think = np.zeros(n)
    prompt = sample_lengths(cfg.prompt_len, rng, n, base_dir)
    output = sample_lengths(cfg.output_len, rng, n, base_dir)
    return [
        Request(rid=i, arrival_s=t, prompt_len=p, output_len=o, n=cfg.n, after=a, think_s=k,
                source="synthetic")
        for i, (t, p, o, a, k) in enumerate(zip(times.tolist(), prompt.tolist(), output.tolist(),
                                                after.tolist(), think.tolist(), strict=True))
    ]
