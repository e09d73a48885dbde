"""Arrival times and follow-up links shared by generators that make one request per arrival, and the
bounds on the size of a generated stream."""

from __future__ import annotations

import numpy as np

from kvsim.errors import KvsimError
from kvsim.schema import MAX_REQUESTS, MAX_SEGMENTS
from kvsim.workload.arrivals import arrival_times, closed_loop_counts, require_request_cap
from kvsim.workload.config import Arrival


def check_requests(count: int, key: str, limit: int | None = None) -> None:
    """A one-line error, naming the scenario key to lower, when a generator would make more than `limit`
    (default MAX_REQUESTS) requests, turns or steps before cutting the stream to simulation.requests."""
    limit = MAX_REQUESTS if limit is None else limit
    if count > limit:
        raise KvsimError(f"{key}: the workload draws {count:,} requests, more than the {limit:,} one run may "
                         "generate; lower it, simulation.requests or simulation.duration_s")


def check_segments(count: int, key: str) -> None:
    """A one-line error when the prompts of a stream would list more than MAX_SEGMENTS segments in all
    (memory grows with it)."""
    if count > MAX_SEGMENTS:
        raise KvsimError(f"{key}: the prompts would list {count:,} segments in all, more than the "
                         f"{MAX_SEGMENTS:,} one run may hold; lower it, simulation.requests or "
                         "simulation.duration_s")


def independent_stream(arrival: Arrival, rng: np.random.Generator, max_requests: int | None,
                       duration_s: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival_s, after, think_s) of requests that are independent of each other.

    Open loop: one request per arrival, after = -1. Closed loop: the requests are split over the users
    (`closed_loop_counts`) and listed user by user; a user's first request arrives at 0 and each later one
    is a follow-up of the user's previous request (after = its index, think = arrival.think_time_s,
    arrival_s = 0 as a placeholder).
    """
    if arrival.process == "closed_loop":
        n = require_request_cap(max_requests)
        counts = closed_loop_counts(n, arrival.users)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        first = np.zeros(n, dtype=bool)
        first[starts[counts > 0]] = True
        return (np.zeros(n), np.where(first, -1, np.arange(n) - 1),
                np.where(first, 0.0, arrival.think_time_s))
    times = arrival_times(arrival, rng, max_requests, duration_s)
    return times, np.full(len(times), -1), np.zeros(len(times))


def session_starts(arrival: Arrival, rng: np.random.Generator, max_requests: int | None,
                   duration_s: float | None) -> np.ndarray:
    """Start times of sessions (chat sessions, agent episodes): the arrival process's times when open
    loop; closed loop, at most max_requests sessions all ready at 0 (each user then runs them back to
    back)."""
    if arrival.process == "closed_loop":
        return np.zeros(require_request_cap(max_requests))
    return arrival_times(arrival, rng, max_requests, duration_s)
