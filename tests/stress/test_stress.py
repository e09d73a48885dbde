"""The random-configuration stress check (stress_runner.py): a sample of seeded configurations in check mode
(allocator invariants and the figures' consistency, kvsim/metrics/consistency.py) must all pass within
their budget. CI runs CI_SEEDS; KVSIM_STRESS=long runs LONG_SEEDS (200), as
`python tests/stress/stress_runner.py --configs 200` does."""

from __future__ import annotations

import os
from collections import Counter

import pytest
import stress_configs as configs
import stress_runner as runner

CI_SEEDS = list(range(30))
LONG_SEEDS = list(range(200))
SEEDS = LONG_SEEDS if os.environ.get("KVSIM_STRESS", "") == "long" else CI_SEEDS


def test_a_seed_gives_one_configuration():
    assert configs.draw(7) == configs.draw(7)
    assert configs.draw(7) != configs.draw(8)


def test_the_draws_cover_tiers_fleets_pd_and_layer_group_models():
    labels = [configs.draw(s)[1] for s in LONG_SEEDS]
    seen = {key: Counter(lab[key] for lab in labels) for key in labels[0]}
    assert {"single", "replicas", "pd", "ep"} <= set(seen["shape"])
    assert {"none", "hash", "radix"} <= set(seen["cache"])
    assert {"single", "n", "beam"} <= set(seen["sampling"])
    assert {"recompute", "swap"} <= set(seen["preemption"])
    assert {"vllm_v1", "vllm_v0", "sarathi", "orca"} <= set(seen["policy"])
    tiers = "+".join(seen["tiers"])
    assert all(m in tiers for m in ("cpu", "ssd", "remote", "remote(shared)"))
    assert set(configs.GROUP_MODELS) | {"stress-hybrid", "stress-sliding"} <= set(seen["model"])
    assert {"trace:azure", "trace:mooncake", "chat", "rag", "agentic", "synthetic"} <= set(seen["workload"])
    assert len(seen["sparsity"]) > 3
    pd_tiers = [lab for lab in labels if lab["shape"] == "pd" and lab["tiers"] != "-"]
    assert pd_tiers


def test_issue_26_features_each_take_about_a_fifth_of_the_draws():
    """Speculative decoding, LoRA and expert parallelism (stress_features.py): each in 15-25 % of the 200
    long-mode draws, with the variants the docs model; never speculative + LoRA, nor either with P/D."""
    draws = [configs.draw(s) for s in LONG_SEEDS]
    labels = [lab for _, lab in draws]
    for key in ("speculative", "lora", "ep"):
        share = sum(lab[key] != "-" for lab in labels) / len(labels)
        assert 0.15 <= share <= 0.25, (key, share)
    spec = [(sc, lab) for sc, lab in draws if "speculative" in sc]
    assert {"ngram", "eagle", "eagle3", "draft_model"} == {sc["speculative"]["method"] for sc, _ in spec}
    assert {1, 2, 3, 4, 5} == {sc["speculative"]["num_speculative_tokens"] for sc, _ in spec}
    assert {"none", "hash", "radix"} <= {lab["cache"] for _, lab in spec}
    assert {"recompute", "swap"} <= {lab["preemption"] for _, lab in spec}
    assert {"list", "rate", "length"} == {lab["speculative"].split(":")[2] for _, lab in spec}
    lora = [(sc, lab) for sc, lab in draws if "lora" in sc]
    assert {1, 2, 3, 4} == {sc["lora"]["max_loras"] for sc, _ in lora}
    assert any(lab["replicas"] > 1 and sc["router"]["policy"] == "lora_affinity" for sc, lab in lora)
    ep = [(sc, lab) for sc, lab in draws if sc.get("parallelism", {}).get("enable_expert_parallel")]
    assert {"gpt-oss-20b", "deepseek-v2-lite"} == {lab["model"] for _, lab in ep}
    assert {2, 4} == {sc["parallelism"]["data_parallel_size"] for sc, _ in ep}
    assert any("speculative" in sc for sc, _ in ep)
    for sc, lab in draws:
        assert not ("speculative" in sc and "lora" in sc)
        assert "cluster" not in sc or not ({"speculative", "lora"} & set(sc) or lab["ep"] != "-")


def test_random_configurations_pass_check_mode():
    results = runner.run_many(SEEDS, jobs=2, budget_s=runner.BUDGET_S)
    tally = runner.tally(results)
    bad = [runner._line(r) for r in results if r["cls"] != "ok"]
    if bad:
        pytest.fail(f"{tally}\n" + "\n".join(bad))
    assert tally["ok"] == len(SEEDS)


def test_a_stall_says_how_far_the_run_got():
    from types import SimpleNamespace

    sched = SimpleNamespace(iterations=7)
    sim = SimpleNamespace(env=SimpleNamespace(now=1.25), _completed=3, total_requests=40,
                          replicas=[SimpleNamespace(sched=sched), SimpleNamespace(sched=sched)])
    assert runner._progress(sim) == "simulated 1.25 s, 3 of 40 requests finished, 14 iterations"
    assert runner._progress(None) == "before the simulation started"
    out = runner.run_one(3, budget_s=1e-4)  # (the alarm fires long before any run could end)
    assert out["cls"] == "stall" and out["why"].startswith("past 0.0001 s: ")
