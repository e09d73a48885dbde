"""Fuzz the input files: YAML-level abuse of the scenario file, trace files, model specs and Hugging Face
configs, hardware mappings and hardware profile folders."""

from __future__ import annotations

from harness import check
from hypothesis import given
from profile_settings import fuzz_settings
from strategies.hardware import hardware_cases
from strategies.models import model_cases
from strategies.traces import trace_cases
from strategies.yaml_abuse import yaml_cases


@fuzz_settings(40)
@given(yaml_cases())
def test_yaml_abuse(worker, case):
    check(case, worker)


@fuzz_settings(60)
@given(trace_cases())
def test_traces(worker, case):
    check(case, worker)


@fuzz_settings(120)
@given(model_cases())
def test_model_specs(worker, case):
    check(case, worker)


@fuzz_settings(60)
@given(hardware_cases())
def test_hardware_profiles(worker, case):
    check(case, worker)
