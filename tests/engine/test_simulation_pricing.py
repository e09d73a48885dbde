"""Pricing keys (kvsim/engine/simulation.py `_check_fleet`): a price per hardware profile names this run's
GPUs or another profile (for plan and sweeps across hardware); a name that is neither is an error, not a
price silently ignored."""

from __future__ import annotations

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.scenario import build_scenario


def _sim(prices):
    sc = build_scenario({"simulation": {"requests": 5}, "pricing": {"usd_per_gpu_hour": prices}})
    return Simulation(sc)


def test_a_typo_in_a_pricing_key_is_an_error_with_a_suggestion():
    with pytest.raises(KvsimError) as exc:
        _sim({"h100-sx": 2.5})
    assert str(exc.value) == ("pricing.usd_per_gpu_hour.h100-sx: no hardware profile and no GPU of this run "
                              "is named 'h100-sx' (did you mean 'h100-sxm'? this run's GPUs: h100-sxm)")


def test_this_runs_hardware_or_another_profile_is_accepted():
    _sim({"h100-sxm": 2.5})
    _sim({"a100-80gb": 1.2, "h200": 4.0})  # prices for a plan across hardware: this run keeps its own
