"""summary.json's `speculative` section on runs small enough to count by hand (check mode on: the
consistency checker recomputes the verify-step figures from the request columns)."""

from __future__ import annotations

import pytest

import kvsim


def run(**spec):
    sc = {"model": "llama-3-8b", "hardware": "h100-sxm",
          "workload": {"kind": "synthetic", "prompt_len": {"dist": "fixed", "value": 64},
                       "output_len": {"dist": "fixed", "value": 10}},
          "simulation": {"requests": 3, "seed": 0}, "kv": {"check_invariants": True},
          "speculative": {"num_speculative_tokens": 2, **spec}}
    return kvsim.run(sc)


def test_every_draft_accepted():
    """ngram, k = 2, rate 1: each request's 9 decode tokens take 3 steps of 3 (2 drafts + the target's):
    9 steps, 18 drafts proposed and accepted, none rejected; vLLM's mean acceptance length 3; no draft
    memory (ngram)."""
    res = run(method="ngram", acceptance=1.0)
    sp = res.summary["speculative"]
    assert (sp["verify_steps"], sp["drafts_proposed"], sp["drafts_accepted"], sp["rejected_kv_slots"]) == (
        9, 18, 18, 0)
    assert sp["mean_accepted_length"] == 2.0 and sp["mean_acceptance_length"] == 3.0
    assert sp["acceptance_rate"] == 1.0 and sp["tokens_per_step"] == 3.0
    assert sp["position_acceptance"] == [1.0, 1.0]
    assert sp["kv_capacity_tokens_lost"] == 0 and sp["draft_weight_bytes"] == 0 and sp["lookahead_slots"] == 0
    assert res.requests["spec_steps"].tolist() == [3, 3, 3]
    assert res.requests["spec_accepted_drafts"].tolist() == [6, 6, 6]


def test_first_draft_only():
    """eagle, rates (1, 0): each step accepts exactly draft 1 and emits 2 tokens: 9 tokens take 5 steps
    (2, 4, 6, 8, 10: the last emits 1 of its 2, its accepted draft still counted): 15 steps, 30 proposed,
    15 accepted, 15 rejected slots; 27 tokens / 15 steps = 1.8 per step; per position: draft 1 always,
    draft 2 never. The EAGLE head's weights and its one layer of KV per token shrink the pool."""
    res = run(method="eagle", acceptance=[1.0, 0.0])
    sp = res.summary["speculative"]
    assert (sp["verify_steps"], sp["drafts_proposed"], sp["drafts_accepted"], sp["rejected_kv_slots"]) == (
        15, 30, 15, 15)
    assert sp["mean_acceptance_length"] == 2.0 and sp["acceptance_rate"] == 0.5
    assert sp["tokens_per_step"] == pytest.approx(1.8)
    assert sp["position_acceptance"] == [1.0, 0.0] and sp["position_conditional_rates"] == [1.0, 0.0]
    lost = sp["kv_capacity_tokens_without_draft"] - sp["kv_capacity_tokens"]
    assert lost == sp["kv_capacity_tokens_lost"] > 0
    assert sp["kv_capacity_tokens"] == res.summary["kv"]["capacity_tokens"]
    assert sp["draft_kv_bytes_per_token"] == 4096 and sp["lookahead_slots"] == 2
    busy = res.timeline[res.timeline["iteration"] >= 0]
    assert sp["step_s_mean"] == pytest.approx(busy["dt_s"].mean())
    assert 0 < sp["step_s_mean_without_speculation"] < sp["step_s_mean"]  # (fewer, longer iterations)


def test_speculation_shortens_tpot():
    """The same requests decode in fewer, slightly longer iterations: TPOT falls."""
    base = kvsim.run({"model": "llama-3-8b", "hardware": "h100-sxm",
                      "workload": {"kind": "synthetic", "prompt_len": {"dist": "fixed", "value": 64},
                                   "output_len": {"dist": "fixed", "value": 10}},
                      "simulation": {"requests": 3, "seed": 0}})
    spec = run(method="eagle3", acceptance=0.8)
    assert spec.summary["latency"]["tpot_s"]["mean"] < base.summary["latency"]["tpot_s"]["mean"]
    assert "speculative" not in base.summary
