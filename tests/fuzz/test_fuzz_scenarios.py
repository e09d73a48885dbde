"""Fuzz the scenario schema: small valid scenarios must run; mutated ones (in the file or by --set) and
cross-field nonsense must keep the contract (a valid run or one "error: " line, exit 2)."""

from __future__ import annotations

from harness import check
from hypothesis import given
from profile_settings import fuzz_settings
from strategies.cross import cross_cases
from strategies.mutations import broken_cases, override_cases
from strategies.scenarios import valid_cases


@fuzz_settings(20)
@given(valid_cases())
def test_valid_scenarios_run(worker, case):
    check(case, worker)


@fuzz_settings(100)
@given(broken_cases())
def test_broken_scenarios(worker, case):
    check(case, worker)


@fuzz_settings(80)
@given(override_cases())
def test_set_overrides(worker, case):
    check(case, worker)


@fuzz_settings(30)
@given(cross_cases())
def test_cross_field_rules(worker, case):
    check(case, worker)
