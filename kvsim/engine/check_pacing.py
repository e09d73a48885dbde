"""Check mode's pacing (`kv.check_invariants: true`): when a replica runs the KV manager's full invariant
check, which reads the whole KV state (every block with state, every table entry, every tier key), so that
checking costs a bounded factor of the run whatever the pool and tier sizes.

Each iteration earns `credit` entries; a full check runs once the iterations since the last one have
earned as many entries as that check read (its cost, `KVManager.check_invariants`'s return), and after
the first iteration. A state of at most `credit` entries is so checked after every iteration, a larger
one every ceil(cost / credit) iterations: at most ~`credit` entries read per iteration on average. The
replica's cheap checks (O(1) counts) run after every iteration, and every replica's full check once more
when the run has ended (`Simulation.run` calls `Replica.full_check`). Deterministic: the pacing counts
entries, never time.
"""

from __future__ import annotations

CHECK_CREDIT = 256
"""Entries of KV state a full check may read per iteration, on average: check mode then costs about x1.7 to
x2.3 the CPU time of the run without it (benchmarks/bench_check_mode.py; docs/engine.md)."""


class CheckPacing:
    """Decides after which iterations the full check runs (module docstring). `due()` once per iteration;
    `done(cost)` after each full check, with the entries it read."""

    __slots__ = ("credit", "earned", "cost", "iterations", "full_checks")

    def __init__(self, credit: int | None = None) -> None:
        self.credit = CHECK_CREDIT if credit is None else credit
        self.earned = 0
        self.cost = 0
        """Entries the last full check read (0 before the first: the first iteration is checked)."""
        self.iterations = 0
        self.full_checks = 0

    def due(self) -> bool:
        """One more iteration: whether the full check runs after it."""
        self.iterations += 1
        self.earned += self.credit
        return self.earned >= self.cost

    def done(self, cost: int) -> None:
        """A full check ran and read `cost` entries."""
        self.cost = cost
        self.earned = 0
        self.full_checks += 1
