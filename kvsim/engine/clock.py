"""The simulation's event loop: simpy's Environment plus a timeout at an absolute time."""

from __future__ import annotations

from heapq import heappush

import simpy
from simpy.core import NORMAL, BoundClass
from simpy.events import Event


class Clock(simpy.Environment):
    """simpy.Environment with `timeout_at(t)`: an event processed at exactly t.

    simpy schedules a timeout at `now + delay`, and some times are no such sum of the current time and
    any float (a replica that ran iterations back to back ends at t0 + dt1 + dt2 + ..., added one by one).
    An event at t is ordered with the others as a timeout created now: by time, then creation."""

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        # simpy binds its event classes (timeout, event, process, ...) to the instance once, but only those
        # of the instance's own class: bind the base class's too, or every env.timeout() re-binds
        for name, obj in simpy.Environment.__dict__.items():
            if type(obj) is BoundClass:
                setattr(self, name, getattr(self, name))

    def timeout_at(self, t: float) -> Event:
        """A triggered event processed at time t (not before now)."""
        if t < self._now:
            raise ValueError(f"timeout_at({t}) is before now ({self._now})")
        return _At(self, t)


class _At(Event):
    """A Timeout by absolute time (the fields simpy's Timeout sets, scheduled by time instead of delay)."""

    def __init__(self, env: Clock, t: float) -> None:
        self.env = env
        self.callbacks = []
        self._value = None
        self._ok = True
        heappush(env._queue, (t, NORMAL, next(env._eid), self))
