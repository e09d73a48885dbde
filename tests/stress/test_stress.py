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
    assert {"single", "replicas", "pd"} <= set(seen["shape"])
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
