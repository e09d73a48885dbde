"""The benchmark client's --max-concurrency: a first-come first-served semaphore in front of the fleet.

`vllm bench serve` creates each request's task at its scheduled time and the task waits on an
asyncio.Semaphore(max_concurrency) before it sends (vllm/benchmarks/serve.py, `limited_request_func`): a
request goes out when it is due and a slot is free, the waiting ones in the order they became due, and
its slot frees when its response ends (or fails). The client's timing starts when it sends, so the wait
for a slot is in no latency the client reports. Requests drift apart as they finish at different times:
each finish lets the next one in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from kvsim.metrics.recorder import ColumnGroup
from kvsim.workload.request import Request

CLIENT_COLUMNS = ColumnGroup({"client_wait_s": "d"})
"""The request column of a run with a client gate: seconds from when the client's schedule made the
request due to when a slot let it go (vLLM's client_queue_time); NaN for a request never sent."""


class ClientGate:
    """At most `limit` requests in flight; `arrive(r)` when r is due, `done()` when one in flight ends.
    `send(r)` is called for each request as it gets a slot (it may call `done()` at once: a refusal)."""

    __slots__ = ("limit", "in_flight", "waiting", "send", "_sending")

    def __init__(self, limit: int, send: Callable[[Request], None]) -> None:
        if limit < 1:
            raise ValueError(f"client concurrency limit must be at least 1, got {limit}")
        self.limit = limit
        self.in_flight = 0
        self.waiting: deque[Request] = deque()
        self.send = send
        self._sending = False

    def arrive(self, r: Request) -> None:
        """r is due: sent now if a slot is free, else after the requests already waiting."""
        self.waiting.append(r)
        self._fill()

    def done(self) -> None:
        """A request in flight ended: its slot goes to the longest-waiting request."""
        if self.in_flight <= 0:
            raise RuntimeError("client gate: a request ended with none in flight")
        self.in_flight -= 1
        self._fill()

    def _fill(self) -> None:
        if self._sending:  # a send that ended at once (refused): the loop below goes on
            return
        self._sending = True
        try:
            while self.waiting and self.in_flight < self.limit:
                self.in_flight += 1
                self.send(self.waiting.popleft())
        finally:
            self._sending = False
