"""Arrival processes: open-loop arrival times and the closed-loop split of requests over users.

Open loop (poisson, gamma, fixed): the first request arrives at t = 0 and each later one a gap after the
previous. poisson: exponential gaps with mean 1/rate. gamma: gamma gaps with shape k = 1/cv^2 and scale
1/(rate k), so mean 1/rate and coefficient of variation cv (cv = 1 is Poisson). fixed: gaps of exactly
1/rate, so arrivals at 0, 1/rate, 2/rate, ...

Closed loop: `users` users all send their first request at t = 0; each later request of a user is a
follow-up of that user's previous one (the engine releases it `think_time_s` after the previous completes).
"""

from __future__ import annotations

import numpy as np

from kvsim.errors import KvsimError
from kvsim.schema import MAX_REQUESTS
from kvsim.workload.config import Arrival

_CHUNK_MIN = 256


def arrival_times(arrival: Arrival, rng: np.random.Generator, n_max: int | None,
                  duration_s: float | None) -> np.ndarray:
    """Open-loop arrival times (float64, non-decreasing, first at 0): at most n_max of them, none after
    duration_s (inf: no limit). At least one of the two limits must be set."""
    if arrival.process == "closed_loop":
        raise KvsimError("workload.arrival.process: closed_loop has no open-loop arrival times")
    if duration_s is not None and duration_s == float("inf"):
        duration_s = None
    if n_max is None and duration_s is None:
        raise KvsimError("simulation: set 'requests' or 'duration_s' to bound the arrivals")
    if n_max is not None and n_max <= 0:
        return np.zeros(0)
    if arrival.process == "fixed":
        n = n_max if n_max is not None else None
        if duration_s is not None:
            n_dur = int(np.floor(duration_s * arrival.rate + 1e-9)) + 1
            n = n_dur if n is None else min(n, n_dur)
        _check_count(n, arrival, duration_s)
        return np.arange(n, dtype=np.float64) / arrival.rate
    if duration_s is None:
        return _times_from_gaps(_gaps(arrival, rng, n_max - 1))
    # Draw in chunks until the arrivals pass duration_s (or n_max is reached).
    expected = min(int(duration_s * arrival.rate * 1.1) + _CHUNK_MIN, MAX_REQUESTS)
    chunk = expected if n_max is None else min(expected, n_max)
    parts: list[np.ndarray] = []
    last, count = 0.0, 1
    while True:
        if n_max is not None:
            chunk = min(chunk, n_max - count)
        if chunk <= 0:
            break
        gaps = _gaps(arrival, rng, chunk)
        times = last + np.cumsum(gaps)
        parts.append(times)
        last, count = float(times[-1]), count + chunk
        if last > duration_s:
            break
        _check_count(count, arrival, duration_s)
    times = np.concatenate([np.zeros(1), *parts])
    times = times[times <= duration_s]
    _check_count(len(times), arrival, duration_s)
    return times


def _check_count(n: int, arrival: Arrival, duration_s: float | None) -> None:
    """Without a request cap, the arrivals within duration_s must stay within MAX_REQUESTS."""
    if n > MAX_REQUESTS:
        raise KvsimError(f"simulation.duration_s: more than {MAX_REQUESTS:,} arrivals within "
                         f"{duration_s:g} s at workload.arrival.rate {arrival.rate:g}; set "
                         f"simulation.requests (at most {MAX_REQUESTS:,}) or a shorter duration_s")


def _gaps(arrival: Arrival, rng: np.random.Generator, n: int) -> np.ndarray:
    if arrival.process == "poisson":
        return rng.exponential(1.0 / arrival.rate, size=n)
    k = 1.0 / arrival.cv ** 2
    return rng.gamma(k, 1.0 / (arrival.rate * k), size=n)


def _times_from_gaps(gaps: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros(1), np.cumsum(gaps)])


def closed_loop_counts(n_requests: int, users: int) -> np.ndarray:
    """How many of n_requests each closed-loop user sends: as even as possible, the first users taking
    the remainder (n_requests // users, plus one for the first n_requests % users users). Users beyond
    n_requests send nothing."""
    base, extra = divmod(n_requests, users)
    counts = np.full(users, base, dtype=np.int64)
    counts[:extra] += 1
    return counts


def require_request_cap(max_requests: int | None) -> int:
    """Closed-loop streams are generated up front, so they need a total request count."""
    if max_requests is None:
        raise KvsimError("workload.arrival.process: closed_loop needs simulation.requests "
                         "(a cap on the total number of requests), not only duration_s")
    return max_requests
