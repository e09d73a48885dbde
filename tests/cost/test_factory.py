"""Which cost model a scenario gets (kvsim/cost/factory.py): `auto` by the profile's kernel tables, and the
overhead keys' None meaning "the chosen model's own fitted terms"."""

from __future__ import annotations

import pytest

from kvsim.cost import roofline
from kvsim.cost.factory import build_cost_model
from kvsim.cost.kernels import KERNEL_DEFAULTS, KernelCost
from kvsim.cost.roofline import RooflineCost
from kvsim.errors import KvsimError
from kvsim.scenario import build_scenario
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware


def _build(**sections):
    sc = build_scenario({"model": "llama-3-8b", **sections})
    model, hw = get_model(sc.model), load_hardware(sc.hardware)
    return build_cost_model(sc, model, hw, 16 * model.kv_bytes_per_token("bf16", 1))


def test_auto_is_the_default_and_takes_the_kernel_tables_where_the_profile_has_them():
    cost = _build(hardware="h200")
    assert isinstance(cost, KernelCost)
    d = cost.describe()
    assert d["model"] == "kernels"
    assert d["selected"] == "cost.model auto: kernels (hardware profile 'h200' has kernel tables)"
    for key, value in KERNEL_DEFAULTS.items():
        assert d[key] == value


def test_auto_falls_back_to_the_roofline_and_says_why():
    cost = _build(hardware="mi300x")
    assert type(cost) is RooflineCost
    d = cost.describe()
    assert d["selected"] == ("cost.model auto: roofline (hardware profile 'mi300x' has no kernel tables: "
                             "calibration/mi300x/kernels)")
    got = (d["iteration_overhead_s"], d["layer_overhead_s"], d["seq_overhead_s"], d["request_overhead_s"])
    assert got == (roofline.ITERATION_OVERHEAD_S, roofline.LAYER_OVERHEAD_S, roofline.SEQ_OVERHEAD_S,
        roofline.REQUEST_OVERHEAD_S)


def test_a_model_named_outright_is_not_marked_as_selected():
    d = _build(hardware="h200", cost={"model": "roofline"}).describe()
    assert d["model"] == "roofline" and "selected" not in d
    with pytest.raises(KvsimError, match="cost.model: kernels: hardware profile 'mi300x' has no kernel"):
        _build(hardware="mi300x", cost={"model": "kernels"})


@pytest.mark.parametrize("model", ["roofline", "kernels"])
def test_an_overhead_set_in_the_scenario_is_used_by_either_model(model):
    d = _build(hardware="h200", cost={"model": model, "layer_overhead_s": 1e-4,
                                      "request_overhead_s": 0.02}).describe()
    assert (d["layer_overhead_s"], d["request_overhead_s"]) == (1e-4, 0.02)


def test_the_scenarios_efficiency_defaults_are_the_roofline_constants():
    from kvsim.scenario import CostConfig

    c = CostConfig()
    got = (c.gemm_efficiency_max, c.gemm_efficiency_m_half, c.bandwidth_efficiency, c.attention_efficiency)
    assert got == (roofline.GEMM_EFFICIENCY_MAX, roofline.GEMM_EFFICIENCY_M_HALF,
                   roofline.BANDWIDTH_EFFICIENCY, roofline.ATTENTION_EFFICIENCY)
