"""A key with two names in one mapping (parallelism.replicas / data_parallel_size, a cluster pool's
data_parallel_size / replicas): an override under either name replaces the scenario's value under the other
(kvsim/scenario.py SECOND_NAMES), on every path that sets keys: --set, kvsim plan's knob, kvsim compare's and
kvsim sweep's axes, and the Python API's overrides."""

from __future__ import annotations

import pytest

import kvsim
from kvsim.errors import KvsimError
from kvsim.scenario import apply_overrides, load_scenario, set_key
from kvsim.sweep.compare import check_variants, grid, parse_vary
from kvsim.sweep.grid import load_sweep
from kvsim.sweep.plan import run_plan
from kvsim.sweep.probe import Probe, Prober

DP = """model: llama-3-8b
hardware: h100-sxm
parallelism: {tensor_parallel_size: 1, data_parallel_size: 2}
workload:
  kind: synthetic
  arrival: {process: poisson, rate: 4.0}
  prompt_len: {dist: fixed, value: 200}
  output_len: {dist: fixed, value: 20}
slo: {ttft_s: {p99: 5}}
simulation: {seed: 0, requests: 20}
"""


@pytest.fixture
def dp_yaml(tmp_path):
    p = tmp_path / "dp.yaml"
    p.write_text(DP)
    return p


def test_set_replaces_the_other_name(dp_yaml):
    assert load_scenario(dp_yaml).parallelism.replicas == 2
    assert load_scenario(dp_yaml, ["parallelism.replicas=3"]).parallelism.replicas == 3
    data = {"parallelism": {"replicas": 2}}
    apply_overrides(data, ["parallelism.data_parallel_size=5"])
    assert data == {"parallelism": {"data_parallel_size": 5}}
    set_key(data, "parallelism.replicas", 6)
    assert data == {"parallelism": {"replicas": 6}}


def test_a_pools_second_name_too():
    data = {"cluster": {"pools": [{"role": "prefill", "replicas": 2}]}}
    set_key(data, "cluster.pools.0.data_parallel_size", 4)
    assert data["cluster"]["pools"][0] == {"role": "prefill", "data_parallel_size": 4}


def test_a_file_that_gives_both_names_is_still_refused(tmp_path):
    p = tmp_path / "both.yaml"
    p.write_text(DP.replace("data_parallel_size: 2", "data_parallel_size: 2, replicas: 2"))
    with pytest.raises(KvsimError, match="give replicas or data_parallel_size"):
        load_scenario(p)


def test_plan_min_replicas_on_a_data_parallel_scenario(dp_yaml, monkeypatch):
    """The planner's knob parallelism.replicas replaces the file's data_parallel_size: every probe loads
    (stand-in probe: holds from 3 replicas, so 1, 2, 4 then 3)."""
    loaded = []

    def fake(self, value, knob, requests_per_s, on_attempt=None):
        loaded.append(load_scenario(self.path, [*self.overrides, *knob]).parallelism.replicas)
        holds = value >= 3
        b = 0.5 if holds else 9.0
        return Probe(value, "holds" if holds else "unstable", "stand-in",
                     {"ttft_s": {"bound_s": b, "holds": holds, "margin_s": 5 - b, "threshold_s": 5,
                                 "percentile": "p99", "mean_s": b}}, requests_per_s=requests_per_s)

    monkeypatch.setattr(Prober, "probe", fake)
    plan = run_plan(str(dp_yaml), [], None, "min_replicas")
    assert plan.answer == 3 and loaded == [1, 2, 4, 3]


def test_plan_runs_a_data_parallel_scenario(dp_yaml):
    """The real prober (4 req/s of 200 + 20 tokens holds a 5 s p99 TTFT on one replica)."""
    plan = run_plan(str(dp_yaml), ["simulation.requests=100"], None, "min_replicas")
    assert plan.answer == 1


def test_compare_over_replicas(dp_yaml):
    variants = grid(parse_vary(["parallelism.replicas=1,3"]))
    check_variants(str(dp_yaml), [], None, variants)  # (raised "not both" before)
    assert [load_scenario(dp_yaml, v.overrides).parallelism.replicas for v in variants] == [1, 3]


def test_sweep_over_replicas(dp_yaml, tmp_path):
    sw = tmp_path / "sweep.yaml"
    sw.write_text(f"scenario: {dp_yaml.name}\ngrid: {{parallelism.replicas: [1, 4]}}\n")
    tasks = load_sweep(sw).tasks
    assert [load_scenario(dp_yaml, list(t.overrides)).parallelism.replicas for t in tasks] == [1, 4]


def test_api_overrides(dp_yaml):
    r = kvsim.run(str(dp_yaml), parallelism__replicas=3)
    assert r.scenario.parallelism.replicas == 3
    r = kvsim.run(str(dp_yaml), {"parallelism.data_parallel_size": 1})
    assert r.scenario.parallelism.replicas == 1
