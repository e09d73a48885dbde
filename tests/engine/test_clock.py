"""kvsim/engine/clock.py: a timeout at an absolute time, ordered as simpy orders timeouts."""

from __future__ import annotations

import pytest

from kvsim.engine.clock import Clock, Tick


def test_timeout_at_fires_at_exactly_the_time_given():
    env = Clock()
    start, steps = 0.35904698872536694, [0.1234567, 0.2345678, 0.14260765]
    end = start
    for dt in steps:
        end += dt
    seen = []

    def proc():
        yield env.timeout(start)
        assert env.now == start
        assert not any(env.now + d == end for d in (end - env.now,))  # one delay would miss it
        yield env.timeout_at(end)
        seen.append(env.now)

    env.process(proc())
    env.run()
    assert seen == [end]


def test_timeout_at_orders_ties_by_creation_like_a_timeout():
    env = Clock()
    order = []
    env.timeout(2.0).callbacks.append(lambda _e: order.append("earlier timeout"))
    env.timeout_at(2.0).callbacks.append(lambda _e: order.append("at"))
    env.timeout(2.0).callbacks.append(lambda _e: order.append("later timeout"))
    env.run()
    assert order == ["earlier timeout", "at", "later timeout"]


def test_timeout_at_refuses_the_past():
    env = Clock()
    env.run(until=1.0)
    with pytest.raises(ValueError, match="before now"):
        env.timeout_at(0.5)


def test_a_tick_is_a_timeout_created_when_scheduled_again():
    """Tick.at(t): the same event, each time ordered as a timeout created then (ties by creation)."""
    env = Clock()
    tick = Tick(env)
    seen = []

    def ticker():
        for t in (1.0, 2.0, 2.0, 3.5):
            env.timeout(t - env.now).callbacks.append(lambda _e, t=t: seen.append(("timeout", t)))
            yield tick.at(t)
            seen.append(("tick", env.now))
            env.timeout(0).callbacks.append(lambda _e: seen.append(("after", env.now)))

    env.process(ticker())
    env.run()
    assert seen == [("timeout", 1.0), ("tick", 1.0), ("after", 1.0), ("timeout", 2.0), ("tick", 2.0),
                    ("after", 2.0), ("timeout", 2.0), ("tick", 2.0), ("after", 2.0), ("timeout", 3.5),
                    ("tick", 3.5), ("after", 3.5)]
    with pytest.raises(ValueError, match="before now"):
        tick.at(1.0)


def test_event_classes_stay_bound_to_the_instance():
    """As simpy.Environment binds them (BoundClass.bind_early): no descriptor call per timeout."""
    env = Clock()
    for name in ("timeout", "event", "process", "all_of", "any_of"):
        assert name in vars(env), name


def _story(env) -> list:
    """Processes, timeouts (ties included), an event succeeded by another process, a process waiting on
    another's end and a failed event handled by its process: what happened when, in order."""
    log = []
    wake = env.event()

    def sleeper():
        value = yield wake
        log.append(("woken", env.now, value))
        return "slept"

    def ticker(name, dts):
        for dt in dts:
            yield env.timeout(dt)
            log.append((name, env.now))
        if name == "a":
            wake.succeed(7)
        return name

    def failing():
        yield env.timeout(0.5)
        bad = env.event()
        bad.fail(ValueError("no"))
        try:
            yield bad
        except ValueError as exc:
            log.append(("caught", env.now, str(exc)))

    s = env.process(sleeper())
    a = env.process(ticker("a", [0.1, 0.2, 0.3]))
    env.process(ticker("b", [0.3, 0.3]))
    env.process(failing())

    def waiter():
        got = yield a
        log.append(("a done", env.now, got, (yield s)))

    env.process(waiter())
    env.run()
    log.append(("end", env.now))
    return log


def test_run_is_simpys_event_for_event():
    """Clock's run loop, timeouts and process resumption (this module's, compiled) against simpy's."""
    import simpy

    assert _story(Clock()) == _story(simpy.Environment())


def test_a_failed_process_crashes_run_as_in_simpy():
    env = Clock()

    def boom():
        yield env.timeout(1.0)
        raise KeyError("lost")

    env.process(boom())
    with pytest.raises(KeyError, match="lost"):
        env.run()



@pytest.mark.parametrize("until", [None, 10.0])
def test_ticks_and_other_events_run_as_one_heap_also_by_step_and_peek(until):
    """The ticks' heap and the others' are read as one (time, then creation): by run(), by step() (what
    run(until) calls) and by peek()."""
    env = Clock()
    tick = Tick(env)
    order = []
    env.timeout(1.0).callbacks.append(lambda _e: order.append("timeout 1"))
    tick.at(1.0).callbacks.append(lambda _e: order.append("tick 1"))
    env.timeout(0.5).callbacks.append(lambda _e: order.append("timeout 0.5"))
    assert env.peek() == 0.5
    env.timeout(0.25)
    Tick(env).at(0.125)
    assert env.peek() == 0.125
    env.run(until)
    assert order == ["timeout 0.5", "timeout 1", "tick 1"]
