"""The simulation's event loop: simpy's Environment plus a timeout at an absolute time, with its per-event
work (the loop, a timeout, resuming a process) in this module, compiled with the hot paths."""

from __future__ import annotations

from heapq import heappop, heappush

import simpy
from simpy.core import NORMAL, BoundClass, EventPriority, Infinity, StopSimulation
from simpy.events import Event
from simpy.events import Process as _SimpyProcess
from simpy.events import Timeout as _SimpyTimeout


class Timeout(_SimpyTimeout):
    """simpy's Timeout, the same fields and scheduling (by `now + delay`), built here."""

    def __init__(self, env: Clock, delay: float, value=None) -> None:
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        self.env = env
        self.callbacks = []
        self._value = value
        self._delay = delay
        self._ok = True
        heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), self))


class Process(_SimpyProcess):
    """simpy's Process with its `_resume` (the same steps) here."""

    def _resume(self, event: Event) -> None:
        env = self.env
        env._active_proc = self
        generator = self._generator
        while True:
            try:
                if event._ok:
                    event = generator.send(event._value)
                else:  # the process handles the failed event (or fails itself), with its own copy
                    event._defused = True
                    exc = type(event._value)(*event._value.args)
                    exc.__cause__ = event._value
                    event = generator.throw(exc)
            except StopIteration as e:
                event = None
                self._ok = True
                self._value = e.args[0] if len(e.args) else None
                env.schedule(self)
                break
            except BaseException as e:
                event = None
                self._ok = False
                self._value = e
                env.schedule(self)
                break
            try:
                callbacks = event.callbacks
            except AttributeError:
                raise RuntimeError(f'Invalid yield value "{event}"') from None
            if callbacks is not None:  # not triggered yet: resume this process when it is
                callbacks.append(self._resume)
                break
        self._target = event
        env._active_proc = None


class Clock(simpy.Environment):
    """simpy.Environment with `timeout_at(t)`: an event processed at exactly t.

    simpy schedules a timeout at `now + delay`, and some times are no such sum of the current time and
    any float (a replica that ran iterations back to back ends at t0 + dt1 + dt2 + ..., added one by one).
    An event at t is ordered with the others as a timeout created now: by time, then creation.

    `run()` to the end, timeouts and processes are simpy's, step for step (the same event order, the same
    times), with their per-event work here."""

    process = BoundClass(Process)
    timeout = BoundClass(Timeout)

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        # simpy binds its event classes (timeout, event, process, ...) to the instance once, but only those
        # of the instance's own class: bind the base class's too, or every env.timeout() re-binds
        for name, obj in simpy.Environment.__dict__.items():
            if type(obj) is BoundClass:
                setattr(self, name, getattr(self, name))
        self._ticks: list = []
        """The scheduled Ticks' entries, a heap of their own (a few, each scheduled again and again, where
        the other heap may hold thousands of timeouts): the two are read as one, by the same key (time,
        priority, creation), so the order is that of a single heap."""

    def timeout_at(self, t: float) -> Event:
        """A triggered event processed at time t (not before now)."""
        if t < self._now:
            raise ValueError(f"timeout_at({t}) is before now ({self._now})")
        return _At(self, t)

    def schedule(self, event: Event, priority=NORMAL, delay: float = 0) -> None:
        heappush(self._queue, (self._now + delay, priority, next(self._eid), event))

    def peek(self) -> float:
        queue = self._queue
        ticks = self._ticks
        t = queue[0][0] if queue else Infinity
        return ticks[0][0] if ticks and ticks[0][0] < t else t

    def step(self) -> None:
        """simpy's step(), of the next event of either heap."""
        queue = self._queue
        ticks = self._ticks
        if ticks and (not queue or ticks[0] < queue[0]):
            heappush(queue, heappop(ticks))  # (the first of all: simpy's step takes it from the queue)
        super().step()

    def run(self, until=None):
        """simpy's run(); to the end (until None), its step() loop inline."""
        if until is not None:
            return super().run(until)
        queue = self._queue
        ticks = self._ticks
        while True:
            if ticks and (not queue or ticks[0] < queue[0]):
                self._now, _, _, event = heappop(ticks)
            elif queue:
                self._now, _, _, event = heappop(queue)
            else:
                break
            callbacks, event.callbacks = event.callbacks, None
            i = 0
            try:
                for callback in callbacks:
                    i += 1
                    callback(event)
            except StopSimulation as exc:  # (as simpy's step(): the rest of the callbacks run on resuming)
                event.callbacks = callbacks[i:]
                self.schedule(event, EventPriority(-1))
                return exc.args[0]
            if not event._ok and not hasattr(event, "_defused"):
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
        return None


class Tick(Event):
    """One process's reusable timeout (a replica's iteration end): `at(t)` schedules it again, as a
    timeout created then (by time, then creation), in the clock's heap of ticks. The process waits on it
    before it is scheduled again, so it is in the heap at most once; no object is made per iteration."""

    def __init__(self, env: Clock) -> None:
        self.env = env
        self.callbacks = None
        self._value = None
        self._ok = True

    def at(self, t: float) -> Tick:
        """This event, scheduled at time t (now + a delay, or a sum of delays: not before now)."""
        env = self.env
        if t < env._now:
            raise ValueError(f"Tick.at({t}) is before now ({env._now})")
        if self.callbacks is not None:
            raise RuntimeError("Tick.at: the tick is already scheduled (in the ticks heap at most once)")
        self.callbacks = []
        heappush(env._ticks, (t, NORMAL, next(env._eid), self))
        return self


class _At(Event):
    """A Timeout by absolute time (the fields simpy's Timeout sets, scheduled by time instead of delay)."""

    def __init__(self, env: Clock, t: float) -> None:
        self.env = env
        self.callbacks = []
        self._value = None
        self._ok = True
        heappush(env._queue, (t, NORMAL, next(env._eid), self))
