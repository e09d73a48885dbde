"""kvsim/metrics/steady.py on hand-made request frames: the backlog's batch means, the window (last fresh
arrival, warm-ups), the trend and the status."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kvsim.metrics import steady as st


def frame(arrival, finish, session=None, rejected=None):
    n = len(arrival)
    return pd.DataFrame({"arrival_s": np.asarray(arrival, float), "finish_s": np.asarray(finish, float),
                         "session": np.full(n, -1) if session is None else np.asarray(session),
                         "rejected": np.zeros(n, int) if rejected is None else np.asarray(rejected),
                         "output_len": np.full(n, 2), "ttft_s": np.full(n, 0.1), "tpot_s": np.full(n, 0.01),
                         "e2e_s": np.asarray(finish, float) - np.asarray(arrival, float),
                         "queue_s": np.zeros(n)})


def test_backlog_batch_means_are_exact():
    """Arrivals at 0, 1, 2, 3 each leaving 0.5 s later: one request in the system half of every second."""
    b = st._Backlog(np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.5, 1.5, 2.5, 3.5]))
    assert b.means(0.0, 4.0, 4) == pytest.approx([0.5, 0.5, 0.5, 0.5])
    assert b.means(0.0, 1.0, 2) == pytest.approx([1.0, 0.0])
    # nobody leaves: n(t) = floor(t) + 1 on [0, 4): means 1, 2, 3, 4
    grow = st._Backlog(np.array([0.0, 1.0, 2.0, 3.0]), np.array([]))
    assert grow.means(0.0, 4.0, 4) == pytest.approx([1.0, 2.0, 3.0, 4.0])


def test_trend_of_a_steadily_growing_backlog():
    """One arrival a second, none leaving: the backlog grows by the window's arrivals (t infinite)."""
    a = np.arange(100, dtype=float)
    tr = st._Backlog(a, np.array([])).trend(0.0, 100.0, 100)
    assert tr.growth == pytest.approx(100.0)  # slope 10 per batch of 10 s, times 10 batches
    assert (tr.first, tr.last) == pytest.approx((5.5, 95.5))
    assert tr.growth_fraction == pytest.approx(1.0) and math.isinf(tr.t)


def test_needed_requests_by_percentile():
    assert st.needed_requests({"ttft_s": {"p99": 2.0}}) == 1000
    assert st.needed_requests({"ttft_s": {"p50": 2.0}}) == st.MIN_WINDOW_REQUESTS
    assert st.needed_requests({"ttft_s": {"p99.9": 2.0}, "tpot_s": {"p90": 0.1}}) == 10_000
    assert st.needed_requests({"ttft_s": {"p100": 2.0}}) == 10_000  # as p99.9, not unbounded


def test_window_ends_at_the_last_fresh_arrival():
    """Session 0 arrives at 0 and 10, session 1 at 5 and 20, a standalone request at 7: the last request
    that starts something is at 7."""
    df = frame([0, 10, 5, 20, 7], [1, 11, 6, 21, 8], session=[0, 0, 1, 1, -1])
    assert st._last_fresh_arrival(df, df["arrival_s"].to_numpy()) == 7.0


def test_session_ramp_leaves_out_the_requests_own_latency():
    """A session's turns at 0 and 10, the first taking 4 s: it spans 10 s, 6 s of it the user's think time."""
    df = frame([0, 10], [4, 12], session=[3, 3])
    assert st._session_ramp(df, 100.0) == pytest.approx(6.0)


def test_stable_and_unstable_runs():
    rng = np.random.default_rng(0)
    a = np.sort(rng.uniform(0, 1000, 5000))
    stable = st.steady_state(frame(a, a + 0.5), 1000)
    assert stable.status == "stable" and abs(stable.backlog.growth_fraction) < 0.01
    assert stable.window.start_s == pytest.approx(0.1 * a.max()) and stable.window.end_s == a.max()
    assert stable.window.offered_requests_per_s == pytest.approx(5.0, rel=0.05)
    # a server that completes one request per 0.25 s against 5 arrivals per second: the queue grows
    finish = np.maximum.accumulate(a) + 0.0
    done = np.empty_like(a)
    t = 0.0
    for i, x in enumerate(a):
        t = max(t, x) + 0.25
        done[i] = t
    del finish
    unstable = st.steady_state(frame(a, done), 1000)
    assert unstable.status == "unstable" and unstable.backlog.growth_fraction > 0.1


def test_a_short_run_is_short():
    a = np.sort(np.random.default_rng(1).uniform(0, 1000, 300))
    s = st.steady_state(frame(a, a + 0.5), 1000)
    assert s.status == "short" and "needs 1,000" in s.reason
    chat = frame([0, 90, 1, 95], [1, 91, 2, 96], session=[0, 0, 1, 1])  # sessions span 90 of 1 s of starts
    ramp = st.steady_state(chat, 1)
    assert ramp.reason.startswith("ramp-up") and ramp.cause == "ramp"


def test_refused_requests_leave_at_once():
    a = np.arange(10, dtype=float)
    df = frame(a, np.full(10, np.nan), rejected=np.ones(10, int))
    b = st.steady_state(df, 1)
    assert b.backlog.first == 0.0 and b.backlog.last == 0.0
