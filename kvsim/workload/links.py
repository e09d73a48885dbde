"""Arrival times and follow-up links shared by generators that make one request per arrival."""

from __future__ import annotations

import numpy as np

from kvsim.workload.arrivals import arrival_times, closed_loop_counts, require_request_cap
from kvsim.workload.config import Arrival


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
