"""The KV breakdown of a scheduler's state: gathers the figures a KV manager's `breakdown` takes (token
states, the sequences' block-table lengths, the head of the waiting queue) from the scheduler
(kvsim/kvcache/breakdown.py defines the parts)."""

from __future__ import annotations

from kvsim.engine.scheduler import Scheduler
from kvsim.kvcache.breakdown import check_breakdown


def breakdown_of(sched: Scheduler, token_states: int) -> tuple[int, int, int, int, int]:
    """The BREAKDOWN_COLUMNS values for the scheduler's current state (token_states as
    `sched.token_states()` reports them)."""
    waiting = sched.waiting
    if waiting:
        head = waiting[0]
        return sched.kv.breakdown(token_states, sched.unshared_blocks(), head.req, head.output)
    return sched.kv.breakdown(token_states, sched.unshared_blocks())


def check_scheduler_breakdown(sched: Scheduler) -> None:
    """Raise AssertionError unless the scheduler's breakdown is non-negative and sums to the capacity."""
    states = sched.token_states()
    check_breakdown(sched.kv, states, breakdown_of(sched, states))
