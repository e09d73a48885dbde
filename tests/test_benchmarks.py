"""The speed suite's scenarios (benchmarks/scenarios.py) load and validate; nothing here times anything."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kvsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def _scenarios():
    path = ROOT / "benchmarks" / "scenarios.py"
    spec = importlib.util.spec_from_file_location("kvsim_bench_scenarios", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


SCENARIOS = _scenarios()


def test_names_are_unique_and_ratios_name_scenarios():
    names = [s.name for s in SCENARIOS.SCENARIOS]
    assert len(names) == len(set(names))
    for slow, base, _ in SCENARIOS.RATIOS:
        assert slow in names and base in names


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("bench", SCENARIOS.SCENARIOS, ids=lambda s: s.name)
def test_scenario_loads(bench, quick):
    missing = bench.missing()
    if missing:
        pytest.skip(f"missing {', '.join(map(str, missing))}")
    sc = load_scenario(bench.path, bench.all_overrides(quick))
    assert sc.simulation.requests == bench.request_count(quick)
    if quick:
        assert bench.request_count(True) == max(1, bench.requests // SCENARIOS.QUICK_DIVISOR)


def test_codellama_spec_is_the_34b_shape():
    from kvsim.specs.catalog import get_model

    m = get_model(SCENARIOS.CODELLAMA_34B)
    assert (m.num_layers, m.hidden_size, m.num_kv_heads, m.head_dim) == (48, 8192, 8, 128)
