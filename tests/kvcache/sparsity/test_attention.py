"""The attention model: hand-computed weights, mass sums to one, closed form vs explicit positions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache.sparsity.attention import GOLDEN, AttentionModel, ZipfSums
from kvsim.kvcache.sparsity.config import AttentionConfig, SparsityConfig
from kvsim.kvcache.sparsity.keep import Keep, full_keep, retained_mask
from kvsim.kvcache.sparsity.policies import build_policy

HALF = 1 / math.log(2)  # tau giving q = e^(-1/tau) = 0.5


def tiny() -> AttentionModel:
    """One layer group, 2 sinks, shares 0.5 / 0.25 / 0.25 of 0.8, background 0.2, q = 0.5, half of the
    non-sink positions heavy, alpha = 1."""
    return AttentionModel(AttentionConfig(
        layer_groups=1, sink_tokens=2, sink_share=0.5, recent_share=0.25, heavy_share=0.25,
        background_first=0.2, background_last=0.2, recent_tau=HALF, recent_tau_last=HALF,
        heavy_fraction=0.5, heavy_alpha=1.0, heavy_alpha_last=1.0))


def test_token_weights_hand_computed():
    # L = 6: sinks 0.4 over positions 0, 1; N = 4 others.
    # recency 0.2 * q^d * (1 - q) / (1 - q^4), d = 3, 2, 1, 0: 0.2 * (1, 2, 4, 8) / 15
    # background 0.2 / 4 = 0.05 each; heavy hitters at non-sink indices 1 and 3 (positions 3 and 5):
    # u = frac(phi) = 0.618 (position 3), frac(2 phi) = 0.236 (position 5) -> position 5 rank 1 (weight 1),
    # position 3 rank 2 (weight 1/2): 0.2 * 2/3 and 0.2 * 1/3.
    w = tiny().token_weights(0, 6)
    want = [0.2, 0.2, 0.2 / 15 + 0.05, 0.4 / 15 + 0.05 + 0.2 / 3, 0.8 / 15 + 0.05, 1.6 / 15 + 0.05 + 0.4 / 3]
    assert w.tolist() == pytest.approx(want)
    assert GOLDEN == pytest.approx(0.6180339887)


@pytest.mark.parametrize("length", [1, 2, 3, 7, 64, 1000, 5000])
@pytest.mark.parametrize("sinks", [0, 4])
def test_mass_sums_to_one(length, sinks):
    model = AttentionModel(AttentionConfig(sink_tokens=sinks))
    for g in range(model.groups):
        assert model.token_weights(g, length).sum() == pytest.approx(1.0, abs=1e-12)
        assert model.kept_mass(g, length, full_keep(length, sinks)) == pytest.approx(1.0, abs=1e-12)
        if length > 10:
            assert model.token_weights(g, length, reread=(5, 5)).sum() == pytest.approx(1.0, abs=1e-12)


def test_reread_moves_mass_onto_the_segment():
    model = tiny()
    base = model.token_weights(0, 6)
    w = model.token_weights(0, 6, reread=(2, 2))
    rm = model.cfg.reread_mass
    assert w[2:4].sum() == pytest.approx((1 - rm) * base[2:4].sum() + rm)
    assert model.reread_step_mass(0.9, 0.25) == pytest.approx((1 - rm) * 0.9 + rm * 0.25)


def test_kept_mass_hand_computed():
    model = tiny()
    # Keep(2, 1, 0): sinks 0.4; recency 0.2 * (1 - q) / (1 - q^4) = 0.2 * 8/15; heavy 0.2 * w / N = 0.05;
    # background 0.2 * 1/4.
    assert model.kept_mass(0, 6, Keep(2, 1, 0)) == pytest.approx(0.4 + 1.6 / 15 + 0.05 + 0.05)
    # Keep(2, 1, 1): the outside token is a heavy hitter (1.5 of them outside), spread over 3 positions:
    # recency 0.2 * ((1 - 0.5) + (0.5 - 0.0625) / 3) / 0.9375; heavy 0.2 * (1/4 + 3/4 * Z(4/3) / Z(2)),
    # Z(4/3) = 1 + (1/3) * 1/2, Z(2) = 1.5; background 0.2 * 2/4.
    recency = 0.2 * (0.5 + 0.4375 / 3) / 0.9375
    heavy = 0.2 * (0.25 + 0.75 * (1 + 1 / 6) / 1.5)
    assert model.kept_mass(0, 6, Keep(2, 1, 1)) == pytest.approx(0.4 + recency + heavy + 0.1)
    assert model.kept_mass(0, 6, Keep(0, 0, 0)) == 0.0


def test_zipf_sums():
    z = ZipfSums(1.0)
    assert z(0) == 0 and z(1) == 1 and z(2) == 1.5 and z(2.5) == pytest.approx(1.5 + 0.5 / 3)
    exact = float(np.sum(1.0 / np.arange(1, 20001)))
    assert z(20000) == pytest.approx(exact, rel=1e-6)
    z2 = ZipfSums(1.6)
    assert z2(20000) == pytest.approx(float(np.sum(np.arange(1, 20001, dtype=float) ** -1.6)), rel=1e-6)


def test_deeper_layers_concentrate():
    model = AttentionModel(AttentionConfig())
    bgs = [model.parts(g, 1000)[3] for g in range(model.groups)]
    assert bgs == pytest.approx([0.3, 0.3 - 0.25 / 3, 0.3 - 0.5 / 3, 0.05])
    assert model.q == sorted(model.q, reverse=True)          # recency tau falls with depth
    assert model.alpha == pytest.approx([1.0, 1.2, 1.4, 1.6])


@pytest.mark.parametrize("policy", ["h2o", "snapkv", "scissorhands", "pyramidkv"])
@pytest.mark.parametrize("length,prompt,budget", [(4096, 4000, 512), (2000, 1500, 256), (8000, 7000, 2048)])
def test_closed_form_matches_explicit_positions(policy, length, prompt, budget):
    """The closed form agrees with summing the explicit weights over the positions the policy keeps
    when it ranks outside tokens by their weight (what H2O-style scores approximate)."""
    model = AttentionModel(AttentionConfig())
    pol = build_policy(SparsityConfig(policy=policy, budget_tokens=budget))
    for g, keep in enumerate(pol.keeps(length, prompt)):
        w = model.token_weights(g, length)
        explicit = float(w[retained_mask(keep, length, 4, w)].sum())
        # pooled selections (snapkv, pyramidkv): the closed form takes every selected run before the
        # recency tail, where the explicit top-k trades a few low-ranked runs for tail tokens
        tol = 0.04 if keep.pool > 1 else 0.015
        assert model.kept_mass(g, length, keep) == pytest.approx(explicit, abs=tol)


def test_pooling_trades_heavy_hitters_for_their_neighbours():
    """With a fixed budget, runs of 7 around heavy hitters cover fewer of them than single picks: less
    mass in this model (whose neighbours carry only background and recency)."""
    model = AttentionModel(AttentionConfig())
    keep = Keep(4, 100, 300)
    pooled = Keep(4, 100, 300, 7)
    assert model.kept_mass(0, 8000, pooled) < model.kept_mass(0, 8000, keep)


def test_more_budget_keeps_more_mass():
    model = AttentionModel(AttentionConfig())
    masses = [model.mean_kept_mass(5000, build_policy(SparsityConfig(policy="h2o", budget_tokens=b))
                                   .keeps(5000, 5000)) for b in (64, 256, 1024, 4096)]
    assert masses == sorted(masses) and masses[-1] < 1.0


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40000), st.integers(0, 8), st.integers(0, 3000), st.integers(0, 3000),
       st.integers(1, 6), st.integers(1, 6), st.sampled_from([0.001, 0.01, 0.05, 0.3]), st.booleans())
def test_mean_kept_mass_is_the_mean_of_kept_mass_exactly(length, sinks, window, outside, pool, groups, heavy,
                                                         same):
    cfg = AttentionConfig(layer_groups=groups, sink_tokens=sinks, heavy_fraction=heavy)
    m = AttentionModel(cfg)
    s = min(sinks, length)
    keep = Keep(s, min(window, length - s), outside, pool)
    keeps = [keep] * groups if same else [Keep(s, min(window + i, length - s), outside // (i + 1), pool)
                                          for i in range(groups)]
    expected = sum(m.kept_mass(g, length, k) for g, k in enumerate(keeps)) / groups
    assert m.mean_kept_mass(length, keeps) == expected
