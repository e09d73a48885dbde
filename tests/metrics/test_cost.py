"""kvsim/metrics/cost.py and where its prices come from (hardware profiles, the scenario's `pricing`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.metrics.cost import cost_section
from kvsim.metrics.summary import build_summary
from kvsim.scenario import load_scenario
from kvsim.specs.hardware import spec_from_mapping

WORKLOADS = Path(__file__).parents[2] / "workloads"
POOLS = [{"pool": "a", "hardware": "h100-sxm", "gpus": 4, "usd_per_gpu_hour": 3.0, "source": "x"},
         {"pool": "b", "hardware": "a100-80gb", "gpus": 2, "usd_per_gpu_hour": 1.5, "source": "y"}]


def test_cost_by_hand():
    # 4 x $3 + 2 x $1.5 = $15 an hour; 1,000 output tokens/s = 3.6M an hour -> $15 / 3.6 per million
    c = cost_section(POOLS, {"output_tokens_per_s": 1000.0, "total_tokens_per_s": 4000.0})
    assert c["gpus"] == 6 and c["gpu_hours_per_day"] == 144
    assert c["usd_per_hour"] == 15.0 and c["usd_per_day"] == 360.0
    assert c["usd_per_million_output_tokens"] == pytest.approx(15 / 3.6)
    assert c["usd_per_million_tokens"] == pytest.approx(15 / 14.4)
    assert [p["pool"] for p in c["pools"]] == ["a", "b"]


def test_unknown_price_or_throughput_gives_none():
    unknown = [{**POOLS[0], "usd_per_gpu_hour": None}, POOLS[1]]
    c = cost_section(unknown, {"output_tokens_per_s": 1000.0, "total_tokens_per_s": 4000.0})
    assert c["usd_per_hour"] is None and c["usd_per_million_tokens"] is None and c["gpus"] == 6
    c = cost_section(POOLS, {"output_tokens_per_s": None, "total_tokens_per_s": 0.0})
    assert c["usd_per_hour"] == 15.0 and c["usd_per_million_output_tokens"] is None
    assert cost_section([], {}) is None


def _summary(*overrides: str) -> dict:
    res = Simulation(load_scenario(None, ["simulation.requests=30", *overrides])).run()
    return build_summary(res.requests, res.timeline, res.meta)


def test_prices_from_the_profile_and_from_the_scenario():
    s = _summary("parallelism.tensor_parallel_size=2")
    pool = s["cost"]["pools"][0]
    assert pool["usd_per_gpu_hour"] == 2.99 and pool["gpus"] == 2
    assert pool["source"].startswith("hardware profile h100-sxm: Lambda on-demand")
    assert s["cost"]["usd_per_hour"] == pytest.approx(5.98)
    s = _summary("pricing.usd_per_gpu_hour=2.0")
    assert s["cost"]["usd_per_hour"] == 2.0 and s["cost"]["pools"][0]["source"] == "pricing.usd_per_gpu_hour"
    s = _summary("pricing.usd_per_gpu_hour={a100-80gb: 9}")  # another profile's: this one keeps its own
    assert s["cost"]["usd_per_hour"] == 2.99
    assert s["scenario"]["pricing"] == {"usd_per_gpu_hour": {"a100-80gb": 9.0}}
    assert "pricing" not in _summary()["scenario"]


def test_cpu_profile_has_no_price():
    res = Simulation(load_scenario(WORKLOADS / "cpu_calibrated.yaml", ["simulation.requests=10"])).run()
    s = build_summary(res.requests, res.timeline, res.meta)
    assert s["cost"]["usd_per_hour"] is None and s["cost"]["pools"][0]["usd_per_gpu_hour"] is None


@pytest.mark.parametrize("value, needle", [(-1, "must be >= 0"), ("x", "cannot read"), (2e6, "out of range")])
def test_profile_price_is_checked(value, needle):
    base = {"memory_bytes": 1e9, "hbm_bandwidth": 1e12, "peak_flops": {"bf16": 1e14},
            "host_link_bandwidth": 1e10, "host_dram_bytes": 0, "ssd_bytes": 0, "ssd_bandwidth": 1e9,
            "interconnect_bandwidth": 1e10}
    with pytest.raises(KvsimError, match=f"usd_per_gpu_hour.*{needle}|{needle}"):
        spec_from_mapping({**base, "usd_per_gpu_hour": value}, "test.yaml")


def test_scenario_price_is_checked():
    with pytest.raises(KvsimError, match="pricing.usd_per_gpu_hour"):
        load_scenario(None, ["pricing.usd_per_gpu_hour=-3"])
