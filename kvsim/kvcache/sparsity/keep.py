"""What a token-level policy keeps of one sequence in one layer group, as three counts (no token arrays).

Positions 0..L-1 of a context of L tokens split into the sink region [0, s) with s = min(sink_tokens, L),
a kept recent suffix (the window) [L - window, L), and the outside region [s, L - window) between them.
A `Keep` retains the first `sinks` sink positions, the whole window, and `outside` positions of the outside
region chosen by importance score. A Keep with `pool` > 1 (SnapKV's clustering) chooses its outside
positions by the scores max-pooled over `pool` neighbours, so they come in runs around the heavy hitters.
`retained_mask` turns a Keep into explicit positions for a hand-built score array (tests, small examples);
the engine only ever uses the counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True, frozen=True)
class Keep:
    """Retained set of one sequence in one layer group: sink count, recent window, outside count, and the
    max-pool width its outside selection was clustered with (1: none)."""

    sinks: int
    window: int
    outside: int
    pool: int = 1

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
    """(spread, adjacent): the kept outside tokens around heavy hitters, spread evenly over the outside
    region, and the rest, which (having the next-highest scores) form the recency tail right before the
    window. The outside region holds H * n_out / N heavy hitters, H = floor(heavy_fraction * N), N = L - s.
    Without pooling the spread tokens are the best heavy hitters themselves; with pool k > 1 each selected
    heavy hitter brings its k-wide neighbourhood (max-pooled scores), so spread = k x hitters, hitters =
    min(heavy, outside / k) (`spread_hitters`)."""
    s = min(sink_tokens, length)
    n = length - s
    n_out = max(0, n - keep.window)
    o = min(keep.outside, n_out)
    if o <= 0 or n <= 0:
        return 0.0, 0.0
    heavy = int(heavy_fraction * n + 1e-9) * n_out / n
    k = keep.pool
    if k <= 1:
        spread = min(float(o), heavy)
    else:
        spread = min(float(o), heavy * k, float(n_out))
    return spread, o - spread


def spread_hitters(keep: Keep, spread: float) -> float:
    """Heavy hitters among `spread` kept tokens (split_outside): one per pooled run of `keep.pool`."""
    return spread / keep.pool if keep.pool > 1 else spread


def max_pool(scores: np.ndarray, kernel: int) -> np.ndarray:
    """1-D max-pool with stride 1 and `kernel // 2` positions on each side (SnapKV's
    F.max_pool1d(..., kernel, padding=kernel // 2, stride=1); an even kernel reaches one more to the left),
    truncated at the array's ends."""
    a = np.asarray(scores, dtype=float)
    if kernel <= 1 or len(a) == 0:
        return a.copy()
    left, right = kernel // 2, kernel - 1 - kernel // 2
    padded = np.concatenate((np.full(left, -np.inf), a, np.full(right, -np.inf)))
    win = np.lib.stride_tricks.sliding_window_view(padded, kernel)
    return win.max(axis=1)


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
    highest-scoring ones of the outside region (ties go to the more recent position); with `keep.pool`
    > 1 the scores are first max-pooled over the outside region (`max_pool`)."""
    mask = np.zeros(length, dtype=bool)
    s = min(sink_tokens, length)
    mask[: keep.sinks] = True
    w0 = length - keep.window
    mask[w0:] = True
    if keep.outside > 0:
        if scores is None:
            raise ValueError("scores are needed to choose outside positions")
        region = np.arange(s, w0)
        sc = np.asarray(scores, dtype=float)[s:w0]
        if keep.pool > 1:
            sc = max_pool(sc, keep.pool)
        order = np.lexsort((-region, -sc))
        mask[region[order[: keep.outside]]] = True
    return mask
