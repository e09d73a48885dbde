"""Beam search as a sequence group: each decode step picks which beams survive and which fork.

A request with `beam_width` w > 1 runs as a group of w sequences (the beams). After the prompt's prefill
every beam forks from the prompt (the scheduler's n > 1 path). Before each later decode step the w new
beams choose their parents among the current w beams: parent indices are drawn uniformly with
replacement from the run's seeded generator (a neutral model of top-w selection, in which beams coalesce
the way lineages do in a Wright-Fisher population, so they share all but their last few tokens). A beam
no one picks is pruned (its blocks are freed); a beam picked k > 1 times continues itself and forks k - 1
times into the pruned beams' sequence ids. The scheduler then gives every beam room for its next token,
which copies a shared, partially filled last block first (copy-on-write).

The KV manager's `reparent(pruned, parent)` does the re-pointing: paged layouts free the pruned beam's
table and share the parent's (`fork`: refcount + 1); contiguous layouts overwrite the pruned beam's region
with a copy of its parent's KV. O(w) per beam group per step.
"""

from __future__ import annotations

import numpy as np


class BeamSearch:
    """Draws beam survival for every beam group of one scheduler."""

    __slots__ = ("kv", "rng", "steps", "forks", "_uniform", "_pos")

    BATCH = 4096  # uniforms drawn from the generator at a time

    def __init__(self, kv, rng: np.random.Generator) -> None:
        self.kv = kv
        self.rng = rng
        self.steps = 0
        self.forks = 0
        self._uniform: list[float] = []
        self._pos = 0

    def parents(self, width: int) -> list[int]:
        """Parent beam index of each of the next step's beams: floor(u * width) for the next `width` of the
        generator's uniforms (drawn BATCH at a time)."""
        pos = self._pos
        if pos + width > len(self._uniform):
            self._uniform = self.rng.random(max(self.BATCH, width)).tolist()
            pos = 0
        self._pos = pos + width
        return [int(u * width) for u in self._uniform[pos:pos + width]]

    def step(self, seqs: list[int]) -> None:
        """Apply one selection step to the beams `seqs` (all of equal length, KV current up to the last
        allocated token)."""
        self.steps += 1
        self.forks += apply_selection(self.kv, seqs, self.parents(len(seqs)))


def apply_selection(kv, seqs: list[int], parents: list[int]) -> int:
    """Make beam j's content parent[j]'s, keeping sequence ids: pruned beams' ids are reused for the extra
    children of beams chosen more than once. Returns the number of forks."""
    width = len(seqs)
    counts = [0] * width
    for p in parents:
        counts[p] += 1
    pruned = [seqs[i] for i in range(width) if counts[i] == 0]
    if not pruned:
        return 0
    slot = 0
    for i in range(width):
        for _ in range(counts[i] - 1):
            kv.reparent(pruned[slot], seqs[i])
            slot += 1
    return slot
