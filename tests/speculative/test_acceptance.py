"""Acceptance rates and draws."""

from __future__ import annotations

import numpy as np
import pytest

from kvsim.speculative.acceptance import (
    AcceptanceDraws,
    expected_accepted,
    position_rates,
    rate_for_length,
    survival,
)
from kvsim.speculative.config import SpeculativeConfig


def test_rate_for_length_inverts_the_geometric_sum():
    """k = 2, p = 0.5: 1 + 0.5 + 0.25 = 1.75 tokens per step; the ends: 1 -> 0, k + 1 -> 1."""
    assert rate_for_length(1.75, 2) == pytest.approx(0.5, abs=1e-12)
    assert rate_for_length(1.0, 4) == 0.0 and rate_for_length(5.0, 4) == 1.0


def test_position_rates_of_each_form():
    def c(acc):
        return SpeculativeConfig(method="eagle", num_speculative_tokens=2, acceptance=acc)
    assert position_rates(c([0.9, 0.5])) == (0.9, 0.5)
    assert position_rates(c(0.6)) == (0.6, 0.6)
    assert position_rates(c({"mean_acceptance_length": 1.75})) == pytest.approx((0.5, 0.5))


def test_survival_and_expectation():
    """Rates (0.8, 0.6, 0.5): P(a >= i) = 0.8, 0.48, 0.24; E[a] = 1.52."""
    assert survival((0.8, 0.6, 0.5)).tolist() == pytest.approx([0.8, 0.48, 0.24])
    assert expected_accepted((0.8, 0.6, 0.5)) == pytest.approx(1.52)


def test_draws_are_seeded_and_match_the_rates():
    """Same seed, same draws; 200,000 draws of rates (0.8, 0.6, 0.5) land within 0.01 of P(a = 0..3) =
    0.2, 0.32, 0.24, 0.24."""
    a = AcceptanceDraws((0.8, 0.6, 0.5), np.random.default_rng(7)).accepted(200_000)
    b = AcceptanceDraws((0.8, 0.6, 0.5), np.random.default_rng(7)).accepted(200_000)
    assert (a == b).all()
    assert (np.bincount(a, minlength=4) / len(a)).tolist() == pytest.approx([0.2, 0.32, 0.24, 0.24], abs=0.01)


def test_plan_stops_when_the_output_is_reached():
    """Rates 1 (a = 2 every step): 10 tokens to go take cum 3, 6, 9, 12 -> 4 steps; rates 0 take 10."""
    assert AcceptanceDraws((1.0, 1.0), np.random.default_rng(0)).plan(10).tolist() == [3, 6, 9, 12]
    assert len(AcceptanceDraws((0.0, 0.0), np.random.default_rng(0)).plan(10)) == 10
