"""Each policy's retained set on small hand-built sequences, budgets, the registry and horizons."""

from __future__ import annotations

import typing

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.errors import KvsimError
from kvsim.kvcache.sparsity.config import POLICY_NAMES, AttentionConfig, SparsityConfig
from kvsim.kvcache.sparsity.keep import Keep, retained_mask
from kvsim.kvcache.sparsity.policies import build_policy, policy_names


def policy(name, sinks=4, groups=4, **kw):
    return build_policy(SparsityConfig(policy=name, attention=AttentionConfig(sink_tokens=sinks,
                                                                              layer_groups=groups), **kw))


def kept(pol, length, prompt, scores=None, group=0):
    keep = pol.keeps(length, prompt)[group]
    return np.nonzero(retained_mask(keep, length, pol.sink_tokens, scores))[0].tolist()


def test_streaming_keeps_sinks_and_window():
    pol = policy("streaming", budget_tokens=10)
    assert pol.keeps(20, 20)[0] == Keep(4, 6, 0)
    assert kept(pol, 20, 20) == [0, 1, 2, 3, 14, 15, 16, 17, 18, 19]
    assert kept(pol, 8, 8) == list(range(8))  # within budget: everything


def test_h2o_keeps_heavy_hitters_by_accumulated_attention():
    pol = policy("h2o", budget_tokens=10, recent_fraction=0.5)
    # attention of three decode steps over 20 positions: position 9 keeps drawing attention
    steps = np.full((3, 20), 0.02)
    steps[:, 9] = 0.3
    steps[1, 6] = 0.25
    scores = steps.sum(axis=0)  # accumulated: 9 -> 0.94, 6 -> 0.29
    assert pol.keeps(20, 20)[0] == Keep(4, 5, 1)
    assert kept(pol, 20, 20, scores) == [0, 1, 2, 3, 9, 15, 16, 17, 18, 19]
    pol2 = policy("h2o", budget_tokens=11, recent_fraction=0.5)
    assert kept(pol2, 20, 20, scores) == [0, 1, 2, 3, 6, 9, 15, 16, 17, 18, 19]


def test_snapkv_selects_from_the_observation_window_then_keeps_generated_tokens():
    pol = policy("snapkv", budget_tokens=8, observation_window=3, pool_kernel=1)
    # prompt of 20 tokens, 5 generated since: the last 3 prompt queries attend most to position 12
    obs = np.zeros((3, 25))
    obs[:, 12] = 0.5
    obs[0, 5] = 0.4
    assert pol.keeps(25, 20)[0] == Keep(4, 8, 1)
    assert kept(pol, 25, 20, obs.sum(axis=0)) == [0, 1, 2, 3, 12, *range(17, 25)]
    assert pol.keeps(30, 20)[0] == Keep(4, 13, 1)  # generated tokens are all kept
    assert kept(pol, 25, 7, obs.sum(axis=0)) == list(range(25))  # prompt within budget


def test_snapkv_pools_its_scores_into_runs():
    """pool_kernel 3 (default 7): position 12's score reaches 11..13, so the 3 outside tokens are the run
    11, 12, 13 instead of the best three single positions 12, 5, 8."""
    pol = policy("snapkv", budget_tokens=10, observation_window=3, pool_kernel=3)
    scores = np.zeros(25)
    scores[12], scores[5], scores[8] = 1.5, 0.4, 0.3
    assert pol.keeps(25, 20)[0] == Keep(4, 8, 3, 3)
    assert kept(pol, 25, 20, scores) == [0, 1, 2, 3, 11, 12, 13, *range(17, 25)]
    single = policy("snapkv", budget_tokens=10, observation_window=3, pool_kernel=1)
    assert kept(single, 25, 20, scores) == [0, 1, 2, 3, 5, 8, 12, *range(17, 25)]
    assert policy("snapkv").keeps(5000, 4000)[0].pool == 7  # the paper's kernel by default
    assert policy("pyramidkv").keeps(5000, 4000)[0].pool == 7


def test_scissorhands_drops_in_bursts():
    pol = policy("scissorhands", budget_tokens=10, drop_fraction=0.2)  # m = 2
    assert [pol.retained(n, 5) for n in range(5, 18)] == [5, 6, 7, 8, 9, 10, 8, 9, 10, 8, 9, 10, 8]
    assert [pol.retained(n, 15) for n in range(15, 19)] == [8, 9, 10, 8]
    # persistence counts: position 7 was important in every step of the history window
    persistence = np.zeros(14)
    persistence[7] = 5
    persistence[10] = 2
    assert pol.keeps(14, 5)[0] == Keep(4, 4, 0)  # R = 8 after a drop: sinks, then the window
    assert pol.keeps(13, 5)[0] == Keep(4, 5, 1)
    assert kept(pol, 13, 5, persistence) == [0, 1, 2, 3, 7, 8, 9, 10, 11, 12]


def test_pyramidkv_budgets_fall_with_depth():
    pol = policy("pyramidkv", budget_tokens=100, observation_window=10, pyramid_beta=4)
    # R = 90: last group 90 / 4 = 22.5, first 2 * 90 - 22.5 = 157.5, plus the window 10
    assert pol.group_budgets(200) == [167, 122, 77, 32]
    keeps = pol.keeps(210, 200)
    assert [k.total - 10 for k in keeps] == [167, 122, 77, 32]
    assert sum(k.total for k in keeps) / 4 <= 100 + 10
    scores = np.random.default_rng(1).random(210)
    sets = [set(kept(pol, 210, 200, scores, g)) for g in range(4)]
    assert sets[3] <= sets[2] <= sets[1] <= sets[0]  # deeper groups keep subsets
    assert pol.resident_tokens(keeps) == pytest.approx((177 + 132 + 87 + 42) / 4)


def test_infinigen_selects_what_h2o_keeps_and_prefetches_it():
    a, b = policy("infinigen", budget_tokens=64), policy("h2o", budget_tokens=64)
    assert a.keeps(500, 400) == b.keeps(500, 400)
    assert a.offload and a.prefetch and not b.offload and not b.prefetch


def test_fraction_budget():
    pol = policy("h2o", budget_fraction=0.25, min_tokens=64)
    assert pol.budget(1000) == 250 and pol.budget(100) == 64 and pol.budget(1001) == 251
    assert policy("h2o").budget(10**6) == 2048  # the default


def test_registry_matches_the_schema():
    literal = typing.get_args(SparsityConfig.model_fields["policy"].annotation)
    assert set(policy_names()) == set(POLICY_NAMES) == set(literal)
    bad = SparsityConfig.model_construct(policy="bogus", budget_tokens=None, budget_fraction=None,
                                         attention=AttentionConfig())
    with pytest.raises(KvsimError, match="kv.sparsity.policy: unknown policy 'bogus'"):
        build_policy(bad)


def test_config_errors():
    with pytest.raises(ValueError, match="at most one"):
        SparsityConfig(budget_tokens=10, budget_fraction=0.5)
    with pytest.raises(ValueError, match="must be 1"):
        AttentionConfig(sink_share=0.5)


NAMES = ["streaming", "h2o", "snapkv", "scissorhands", "pyramidkv", "infinigen"]


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(NAMES), prompt=st.integers(1, 5000), extra=st.integers(0, 3000),
       budget=st.integers(1, 3000), fraction=st.sampled_from([None, 0.1, 0.5]), sinks=st.integers(0, 8))
def test_budgets_never_exceeded(name, prompt, extra, budget, fraction, sinks):
    kw = {"budget_fraction": fraction} if fraction else {"budget_tokens": budget}
    pol = policy(name, sinks=sinks, **kw)
    length = prompt + extra
    keeps = pol.keeps(length, prompt)
    assert len(keeps) == pol.groups
    for g, k in enumerate(keeps):
        s = min(sinks, length)
        assert 0 <= k.sinks <= s and k.window >= 0 and k.outside >= 0
        assert k.window <= length - s and k.outside <= length - s - k.window
        if name in ("snapkv", "pyramidkv"):
            cap = pol.group_budgets(prompt)[g] if name == "pyramidkv" else pol.budget(prompt)
            assert k.total - extra <= max(cap, 0) or k.total == length
        else:
            assert k.total <= min(length, pol.budget(length))
            if length <= pol.budget(length) and name != "scissorhands":
                assert k.total == length
    if name == "pyramidkv" and prompt > pol.budget(prompt):
        assert pol.resident_tokens(keeps) <= pol.budget(prompt) + extra


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(NAMES), prompt=st.integers(1, 3000), extra=st.integers(0, 3000),
       budget=st.integers(1, 2000), ahead=st.integers(1, 80))
def test_horizon_predicts_resident_tokens(name, prompt, extra, budget, ahead):
    pol = policy(name, budget_tokens=budget)
    length = prompt + extra
    slope, until = pol.horizon(length, prompt)
    later = length + ahead
    if later < until:
        now = pol.resident_tokens(pol.keeps(length, prompt))
        assert pol.resident_tokens(pol.keeps(later, prompt)) == pytest.approx(now + slope * ahead)
