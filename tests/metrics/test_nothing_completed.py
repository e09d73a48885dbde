"""kvsim/metrics/nothing_completed.py: the line a run in which no request completed starts with."""

from __future__ import annotations

from kvsim.metrics.nothing_completed import nothing_completed


def test_nothing_completed_by_hand():
    assert nothing_completed({"requests": {"total": 3, "completed": 1}}, {}) is None
    assert nothing_completed({"requests": {"total": 0, "completed": 0}}, {}) is None
    line = nothing_completed({"requests": {"total": 4, "completed": 0}}, {"refusals": {"a": 1, "b": 3}})
    assert line.startswith("warning: 0 of 4 requests completed: 4 refused (1 a; 3 b); the latency figures "
                           "below are empty")
    assert "(none refused: the run ended first)" in nothing_completed(
        {"requests": {"total": 2, "completed": 0}}, {"refusals": {}})
    assert "the latency figures of the summary are empty" in nothing_completed(
        {"requests": {"total": 2, "completed": 0}}, {}, "figures of the summary")
