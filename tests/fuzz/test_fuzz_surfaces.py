"""Fuzz the newer surfaces (issue 25): kvsim plan and sweep, the Python API (in the worker's API mode),
fleets, KV tiers, layer-group models and DeepSeek-V4 specs, KV precision formats, SLO and pricing keys;
plus the fixed cases of surfaces_regressions.py. Each surface is its own category in the tally."""

from __future__ import annotations

import pytest
from harness import check
from hypothesis import given
from profile_settings import fuzz_settings
from strategies.api_calls import api_cases
from strategies.fleets import fleet_cases
from strategies.kv_slo_pricing import kvdtype_cases, pricing_cases, slo_cases
from strategies.layer_models import dsv4_cases, layer_cases
from strategies.plan_args import plan_cases
from strategies.sweep_files import sweep_cases
from strategies.tiers import tier_cases
from surfaces_regressions import SURFACE_REGRESSIONS


@fuzz_settings(40)
@given(plan_cases())
def test_plan_command_lines(worker, case):
    check(case, worker)


@fuzz_settings(40)
@given(sweep_cases())
def test_sweep_files(worker, case):
    check(case, worker)


@fuzz_settings(60)
@given(api_cases())
def test_python_api_calls(worker, case):
    check(case, worker)


@fuzz_settings(35)
@given(fleet_cases())
def test_fleets(worker, case):
    check(case, worker)


@fuzz_settings(30)
@given(tier_cases())
def test_kv_tiers(worker, case):
    check(case, worker)


@fuzz_settings(40)
@given(layer_cases())
def test_layer_group_models(worker, case):
    check(case, worker)


@fuzz_settings(20)
@given(dsv4_cases())
def test_deepseek_v4_specs(worker, case):
    check(case, worker)


@fuzz_settings(30)
@given(kvdtype_cases())
def test_kv_precision(worker, case):
    check(case, worker)


@fuzz_settings(25)
@given(slo_cases())
def test_slo_keys(worker, case):
    check(case, worker)


@fuzz_settings(20)
@given(pricing_cases())
def test_pricing_keys(worker, case):
    check(case, worker)


@pytest.mark.parametrize("case", list(SURFACE_REGRESSIONS.values()), ids=list(SURFACE_REGRESSIONS))
def test_surface_regression(worker, case):
    check(case, worker)
