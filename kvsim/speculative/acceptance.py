"""Acceptance of draft tokens: the per-position rates a `speculative.acceptance` gives, and the seeded draws
of each verify step's accepted length.

A verify step proposes k drafts; draft i is accepted with the conditional rate p_i when drafts 1..i-1
were, so the accepted length a (0..k) has survival P(a >= i) = p_1 p_2 ... p_i and E[a] = sum_i P(a >= i).
vLLM's "mean acceptance length" is 1 + E[a] (the bonus token the target samples itself included).
"""

from __future__ import annotations

import numpy as np

from kvsim.speculative.config import SpeculativeConfig


def rate_for_length(length: float, k: int) -> float:
    """The one rate p with 1 + p + p^2 + ... + p^k = length (vLLM's mean acceptance length of k drafts,
    every position accepted with the same conditional rate), by bisection (the sum rises with p);
    length in [1, k + 1]."""
    target = length - 1.0
    if target <= 0.0:
        return 0.0
    if target >= k:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if sum(mid ** i for i in range(1, k + 1)) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def position_rates(cfg: SpeculativeConfig) -> tuple[float, ...]:
    """The k conditional rates p_1..p_k of a `speculative` section: the list as given, one rate
    repeated, or the rate of a mean acceptance length (rate_for_length)."""
    k = cfg.num_speculative_tokens
    acc = cfg.acceptance
    if isinstance(acc, list):
        return tuple(float(p) for p in acc)
    if isinstance(acc, float | int):
        return (float(acc),) * k
    return (rate_for_length(acc.mean_acceptance_length, k),) * k


def survival(rates: tuple[float, ...]) -> np.ndarray:
    """P(a >= i) for i = 1..k: the running products of the conditional rates (non-increasing)."""
    return np.cumprod(np.asarray(rates, dtype=np.float64))


def expected_accepted(rates: tuple[float, ...]) -> float:
    """E[a], the mean accepted drafts per verify step: the sum of the survival."""
    return float(survival(rates).sum())


class AcceptanceDraws:
    """Accepted lengths drawn from one numpy Generator (seeded from the scenario's seed): `plan(remaining)`
    draws a sequence's verify steps until it has emitted `remaining` tokens (each step emits a + 1, the
    last step cut at the output length)."""

    __slots__ = ("k", "rng", "_neg_survival")

    def __init__(self, rates: tuple[float, ...], rng: np.random.Generator) -> None:
        self.k = len(rates)
        self.rng = rng
        self._neg_survival = -survival(rates)

    def accepted(self, steps: int) -> np.ndarray:
        """`steps` accepted lengths: with u uniform in [0, 1), a = #{i : u < P(a >= i)} (inverse CDF over
        the non-increasing survival)."""
        u = self.rng.random(steps)
        return np.searchsorted(self._neg_survival, -u, side="left").astype(np.int64)

    def plan(self, remaining: int) -> np.ndarray:
        """The cumulative tokens emitted after each verify step of a sequence with `remaining` output
        tokens to go (cum[j] = sum of a_i + 1 over steps 0..j), cut where it first reaches `remaining`:
        its length is the number of steps; the last entry may exceed `remaining` (the drafts accepted
        past the output length are counted as accepted but emit nothing). remaining >= 1."""
        a = self.accepted(remaining)  # at most `remaining` steps: each emits at least one token
        cum = np.cumsum(a + 1)
        steps = int(np.searchsorted(cum, remaining, side="left")) + 1
        return cum[:steps]
