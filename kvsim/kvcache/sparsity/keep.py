"""What a token-level policy keeps of one sequence in one layer group, as three counts (no token arrays).

Positions 0..L-1 of a context of L tokens split into the sink region [0, s) with s = min(sink_tokens, L),
a kept recent suffix (the window) [L - window, L), and the outside region [s, L - window) between them.
A `Keep` retains the first `sinks` sink positions, the whole window, and `outside` positions of the outside
region chosen by importance score. `retained_mask` turns a Keep into explicit positions for a hand-built
score array (tests, small examples); the engine only ever uses the counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True, frozen=True)
class Keep:
    """Retained set of one sequence in one layer group: sink count, recent window, outside count."""

    sinks: int
    window: int
    outside: int

    @property
    def total(self) -> int:
        return self.sinks + self.window + self.outside


def full_keep(length: int, sink_tokens: int) -> Keep:
    """Everything kept."""
    s = min(sink_tokens, length)
    return Keep(s, length - s, 0)


def outside_size(keep: Keep, length: int, sink_tokens: int) -> int:
    """Positions in the outside region [s, L - window)."""
    return max(0, length - min(sink_tokens, length) - keep.window)


def split_outside(keep: Keep, length: int, sink_tokens: int, heavy_fraction: float) -> tuple[float, float]:
    """(spread, adjacent): the kept outside tokens that are heavy hitters, spread evenly over the outside
    region, and the rest, which (having the next-highest scores) form the recency tail right before the
    window. The outside region holds H * n_out / N heavy hitters, H = floor(heavy_fraction * N), N = L - s."""
    s = min(sink_tokens, length)
    n = length - s
    n_out = max(0, n - keep.window)
    o = min(keep.outside, n_out)
    if o <= 0 or n <= 0:
        return 0.0, 0.0
    heavy = int(heavy_fraction * n + 1e-9) * n_out / n
    spread = min(float(o), heavy)
    return spread, o - spread


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def kept_in_range(keep: Keep, length: int, sink_tokens: int, start: int, end: int,
                  heavy_fraction: float) -> float:
    """Expected retained positions among [start, end): kept sinks and the window exactly, the recency
    tail of `split_outside` exactly, the spread heavy hitters at their density over the rest."""
    s = min(sink_tokens, length)
    w0 = length - keep.window
    spread, adjacent = split_outside(keep, length, sink_tokens, heavy_fraction)
    t0 = w0 - adjacent
    kept = _overlap(0, keep.sinks, start, end) + _overlap(t0, length, start, end)
    if spread > 0 and t0 > s:
        kept += _overlap(s, t0, start, end) * min(1.0, spread / (t0 - s))
    return kept


def retained_mask(keep: Keep, length: int, sink_tokens: int, scores: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask over positions 0..L-1 of what `keep` retains. The `outside` positions are the
    highest-scoring ones of the outside region (ties go to the more recent position)."""
    mask = np.zeros(length, dtype=bool)
    s = min(sink_tokens, length)
    mask[: keep.sinks] = True
    w0 = length - keep.window
    mask[w0:] = True
    if keep.outside > 0:
        if scores is None:
            raise ValueError("scores are needed to choose outside positions")
        region = np.arange(s, w0)
        order = np.lexsort((-region, -np.asarray(scores, dtype=float)[s:w0]))
        mask[region[order[: keep.outside]]] = True
    return mask
