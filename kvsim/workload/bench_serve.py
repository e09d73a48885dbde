"""`kind: bench_serve`: the requests `vllm bench serve` sends, and when its schedule releases them.

Lengths (docs/workloads.md, "kind: bench_serve"): the random dataset's uniform integer intervals
(`BenchServeConfig.input_interval` / `output_interval`), or rows of a ShareGPT length file taken in a
random order without replacement (with replacement only past the file's length, as vLLM oversamples).
Send times (`send_times`): all at 0 at request_rate inf; otherwise cumulative gamma gaps (shape
burstiness, scale 1 / (rate x burstiness)), rescaled so the last request goes at num_prompts / rate
(`rate_schedule: rescaled`) or starting at 0 unscaled (`legacy`). The times are the client's schedule:
with max_concurrency a request also waits for a slot, which the engine's client gate
(kvsim/engine/client_gate.py) applies and which sets the request's arrival_s to when it is sent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim.workload.bench_serve_config import BenchServeConfig
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.lengths import load_empirical
from kvsim.workload.request import Request, RequestTable

PREFIX_ID = 13 << 40
"""Content id of the random dataset's shared prefix (random_prefix_len plus the special tokens)."""
REST_BASE = 14 << 40
"""Content id of request rid's own part of the prompt, after a shared prefix: REST_BASE + rid."""


def bench_serve_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                         duration_s: float | None, base_dir: str | Path | None = None) -> list[Request]:
    """The bench_serve stream as a list (the requests of `bench_serve_table`)."""
    return list(bench_serve_table(cfg, rng, max_requests, duration_s, base_dir))


def bench_serve_table(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                      duration_s: float | None, base_dir: str | Path | None = None) -> RequestTable:
    """num_prompts requests in send order (rid i is the client's i-th request), arrival_s its scheduled
    send time; as for every kind, max_requests keeps the first ones and those scheduled after duration_s
    are dropped (the schedule is num_prompts' either way)."""
    b = cfg.bench_serve or BenchServeConfig()
    n = b.num_prompts
    draw = rng if b.seed is None else np.random.default_rng(b.seed)
    prompt, output = (random_lengths(b, draw, n) if b.dataset == "random"
                      else sharegpt_lengths(b, draw, n, base_dir))
    times = send_times(b, rng, n)
    keep = n if max_requests is None else min(n, max_requests)
    if duration_s is not None and duration_s != float("inf"):
        keep = min(keep, int(np.searchsorted(times, duration_s, side="right")))
    times, prompt, output = times[:keep], prompt[:keep], output[:keep]
    shared = b.random_prefix_len + b.num_special_tokens if b.dataset == "random" else 0
    segments = None
    if b.dataset == "random" and b.random_prefix_len > 0:
        def segments(i: int) -> tuple[tuple[int, int], ...]:
            rest = prompt.item(i) - shared
            return ((PREFIX_ID, shared), (REST_BASE + i, rest)) if rest > 0 else ((PREFIX_ID, shared),)
    return RequestTable(times, prompt, output, source="bench_serve", segments=segments)


def random_lengths(b: BenchServeConfig, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) lengths of the random dataset: input draws then output draws, each
    rng.integers(low, high + 1) over its interval (vLLM's order and calls), the prompt plus
    random_prefix_len and num_special_tokens (what the server counts)."""
    in_lo, in_hi = b.input_interval()
    out_lo, out_hi = b.output_interval()
    sampled = rng.integers(in_lo, in_hi + 1, size=n)
    output = rng.integers(out_lo, out_hi + 1, size=n)
    prompt = sampled + (b.random_prefix_len + b.num_special_tokens)
    return prompt.astype(np.int64), output.astype(np.int64)


def sharegpt_lengths(b: BenchServeConfig, rng: np.random.Generator, n: int,
                     base_dir: str | Path | None) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) rows of `dataset_path` (columns prompt, output): a random permutation of the rows,
    the first n of it; past the file's length the rest drawn with replacement. sharegpt_output_len
    replaces every output. Values rounded, at least 1."""
    prompt_all = load_empirical(b.dataset_path, "prompt", base_dir)
    output_all = load_empirical(b.dataset_path, "output", base_dir)
    rows = rng.permutation(len(prompt_all))[:n]
    if n > len(rows):
        rows = np.concatenate([rows, rng.integers(0, len(prompt_all), size=n - len(rows))])
    prompt = np.maximum(np.rint(prompt_all[rows]), 1).astype(np.int64)
    if b.sharegpt_output_len is not None:
        output = np.full(n, b.sharegpt_output_len, dtype=np.int64)
    else:
        output = np.maximum(np.rint(output_all[rows]), 1).astype(np.int64)
    return prompt, output


def send_times(b: BenchServeConfig, rng: np.random.Generator, n: int) -> np.ndarray:
    """The client's scheduled send time of each of n requests (float64, non-decreasing).

    rate inf: all 0. burstiness inf: gaps of exactly 1/rate. Else gaps ~ Gamma(shape k = burstiness,
    scale 1 / (rate k)), mean 1/rate. rescaled: t_i = (g_1 + ... + g_i) x (n / rate) / (g_1 + ... + g_n),
    so the first request goes one gap after 0 and the last at n / rate; legacy: t_1 = 0 and
    t_i = g_1 + ... + g_(i-1)."""
    if b.request_rate == "inf" or n == 0:
        return np.zeros(n)
    rate = float(b.request_rate)
    if b.burstiness == "inf":
        gaps = np.full(n, 1.0 / rate)
    else:
        k = float(b.burstiness)
        gaps = rng.gamma(k, 1.0 / (rate * k), size=n)
    if b.rate_schedule == "legacy":
        return np.concatenate([np.zeros(1), np.cumsum(gaps[:-1])])
    times = np.cumsum(gaps)
    if times[-1] > 0:
        times = times * ((n / rate) / times[-1])
    return times
