"""One run's per-request path: the open-loop arrivals, the front end's latency, routing and submission, the
request rows, and the follow-ups released when a request finishes (Simulation._run builds one RequestFlow
per run; request_flow.pxd makes it an extension type when compiled)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from heapq import heappush
from typing import TYPE_CHECKING

from simpy.core import NORMAL, URGENT
from simpy.events import Event

from kvsim.engine.clock import Clock, Tick
from kvsim.engine.fleet.cluster import Cluster
from kvsim.engine.fleet.deployment import refusal
from kvsim.engine.group import Group
from kvsim.metrics.recorder import append_values
from kvsim.workload.request import FollowUps, Request

if TYPE_CHECKING:
    from kvsim.engine.simulation import Simulation


class Due:
    """A request's dispatch after the front end's latency, in the clock's heap: what Clock.run (and simpy's
    step) reads of a processed timeout (callbacks, _ok, _value: the request), no more (a simpy Timeout
    object per request was most of the cost of that delay)."""

    __slots__ = ("callbacks", "_ok", "_value")

    def __init__(self, r: Request, callbacks: list) -> None:
        self.callbacks = callbacks
        self._ok = True
        self._value = r


class RequestFlow:
    """One run's per-request path (Simulation._run builds one): the open-loop arrivals, the front end's
    latency, routing and submission, the request rows, the follow-ups released when a request finishes.
    Its state is read from its own fields (C fields when compiled, kvsim/engine/request_flow.pxd), not from
    the Simulation's attributes: this runs a few times per request."""

    def __init__(self, sim: Simulation, env: Clock) -> None:
        self.sim = sim
        self.env = env
        self.seq_no = 0
        self.completed = 0
        self.total = sim.total_requests
        self.progress = sim.progress
        self.refusals = sim.refusals
        # read once per run, not per request: the front end's latency, the request rows, the callbacks
        self.overhead = sim.cost.request_overhead
        self.duration = sim.sc.simulation.duration_s
        self.rows = sim.recorder._requests
        self.plain_rows = sim._plain_rows
        self.dispatch_cb = self.dispatch_event
        self.arrive_cb = self.arrive
        # (the clock's heaps, of timeouts and of ticks, and its event counter: the same objects all run long)
        self.queue = env._queue
        self.ticks = env._ticks
        self.eid = env._eid
        self.gate = None
        self.due = None
        self.followups = {}
        self.table_followups = None
        self.open = iter(())
        self.held = None
        self.tick = None
        self.cluster = None
        self.only = None
        self.only_rule = None
        self.only_kv = None
        self.routed = None
        self.replicas = None
        self.max_model_len = None

    def start(self, cluster: Cluster, followups: dict[int, list[Request]] | FollowUps,
              open_loop: Iterable[Request]) -> None:
        """The cluster built, the follow-ups by parent rid, and the open-loop arrivals: a chain of
        callbacks on one reusable event (no process, no timeout object per arrival), the steps (and the
        event order) of a simpy process that waits `env.timeout(arrival_s - now)` for each arrival in turn
        and hands it on."""
        sim = self.sim
        env = self.env
        self.cluster = cluster
        self.only = cluster._only
        if self.only is not None:  # (its refusal rule and first KV manager: set by now, for the run)
            self.only_rule = self.only._refusal_rule
            self.only_kv = self.only.first_kv
        self.routed = cluster.routed
        self.replicas = cluster.replicas
        self.max_model_len = [d.max_model_len for d in cluster.deployment_of]
        self.gate = sim._gate
        self.due = sim._due
        self.followups = followups
        # (a RequestTable's: its pop called as a C method when compiled)
        self.table_followups = followups if isinstance(followups, FollowUps) else None
        self.open = iter(open_loop)
        self.held = None
        self.tick = Tick(env)
        start = Event(env)  # (as simpy's process start: urgent, now)
        start._ok = True
        start._value = None
        start.callbacks = [self.arrive_cb]
        env.schedule(start, URGENT)

    def end(self) -> None:
        """The run is over: let go of what it held."""
        self.followups = {}
        self.table_followups = None
        self.gate = None
        self.open = iter(())
        self.held = None

    def arrive(self, _event) -> None:
        """The time of the held request (if any) has come: hand it on, and the next ones due now; then
        wait for the first that is not."""
        env = self.env
        r = self.held
        if r is not None:
            self.held = None
            self.hand_on(r)
        for r in self.open:
            now = env._now
            t = r.arrival_s
            if t > now:
                self.held = r
                # (Tick.at, inline: the tick, processed before this call, is not scheduled; its time is
                # simpy's timeout time, not before now)
                tick = self.tick
                tick.callbacks = [self.arrive_cb]
                heappush(self.ticks, (now + (t - now), NORMAL, next(self.eid), tick))
                return
            self.hand_on(r)
        self.open = iter(())

    def hand_on(self, r: Request) -> None:
        """An open-loop arrival: to the engine after the front end's latency; with a client gate, to the
        gate, which sends it when a slot is free (send)."""
        gate = self.gate
        if gate is None:
            self.to_engine(r, self.overhead)
        else:
            self.due[r.rid] = self.env._now
            gate.arrive(r)

    def to_engine(self, r: Request, delay) -> None:
        """Dispatch r `delay` seconds from now (the front end's latency, after its arrival), at once if
        none is left."""
        if delay > 0:  # (env.timeout(delay, r), its callback dispatch_event)
            heappush(self.queue, (self.env._now + delay, NORMAL, next(self.eid), Due(r, [self.dispatch_cb])))
        else:
            self.dispatch(r)

    def dispatch_event(self, event: Due) -> None:
        """to_engine's timeout (its value: the request) is processed."""
        self.dispatch(event._value)

    def send(self, r: Request) -> None:
        """The client gate gave r a slot: it is sent now (its arrival_s), unless after duration_s."""
        dur = self.duration
        if dur is not None and self.env._now > dur:
            self.gate.done()
            return
        r.arrival_s = self.env.now
        self.to_engine(r, self.overhead)

    def dispatch(self, r: Request) -> None:
        """Route r (every request, a session's next turn too: each is a new request to the fleet)."""
        output = r.output_len
        prompt = r.prompt_len
        n = r.n
        beams = r.beam_width
        only = self.only
        if only is not None:  # (Cluster.route's one replica, inline, with its Deployment.reject_reason)
            replica = 0
            reason = refusal(only, self.only_rule, self.only_kv, r, prompt, output, n, beams)
            if reason is None:
                self.routed[0] += 1
        else:
            replica, reason = self.cluster.route(r)
        if reason is None:
            limit = self.max_model_len[replica] - prompt
            if output > limit:
                output = limit
            if n < beams:  # beam search runs beam_width sequences
                n = beams
            seq = self.seq_no
            self.seq_no = seq + n
            seqs = [seq] if n == 1 else list(range(seq, seq + n))
            self.replicas[replica].submit(Group(r, r.rid, seqs, output, prompt, n))  # (Cluster.submit)
        else:
            self.refusals[reason] = self.refusals.get(reason, 0) + 1
            self.record(r, replica, None)
            if self.gate is not None:
                self.gate.done()
            # the user goes on: the next turn follows think_s after the refusal
            for child in self.followups.pop(r.rid, ()):
                self.release(child, self.env.now + child.think_s)

    def release(self, r: Request, t) -> None:
        dur = self.duration
        if dur is not None and t > dur:
            return
        r.arrival_s = t
        env = self.env
        delay = t + self.overhead - env._now  # (to_engine, inline: once per follow-up)
        if delay > 0:
            heappush(self.queue, (env._now + delay, NORMAL, next(self.eid), Due(r, [self.dispatch_cb])))
        else:
            self.dispatch(r)

    def on_finish(self, g: Group) -> None:
        r = g.req
        self.record(r, g.replica, g)
        if self.gate is not None:
            self.gate.done()
        fu = self.table_followups
        children = self.followups.pop(r.rid, ()) if fu is None else fu.pop(r.rid, ())
        if children:
            finish_s = g.finish_s
            for child in children:
                self.release(child, finish_s + child.think_s)

    def record(self, r: Request, replica: int, g: Group | None) -> None:
        if g is None:
            nan = math.nan
            values = (r.rid, replica, r.arrival_s, r.prompt_len, r.output_len, r.n, nan, nan, nan, 0, 0, 1,
                      r.session)  # (RequestRow.refused)
        else:  # the row's values in REQUEST_COLUMNS order (RequestRow's fields), no row object
            values = (r.rid, replica, r.arrival_s, r.prompt_len, g.output, r.n, g.first_scheduled_s,
                      g.first_token_s, g.finish_s, g.preemptions, g.cached_tokens, 0, r.session)
        if self.plain_rows:  # (no registered request columns: no extra values to gather)
            append_values(self.rows, values, ())  # (Recorder.request_values)
        else:
            append_values(self.rows, values, tuple(self.sim._request_extra(r, replica, g)))
        self.completed += 1
        if self.progress is not None:
            self.progress(self.completed, self.total)
