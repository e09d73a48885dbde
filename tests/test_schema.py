"""The shared schema base (kvsim/schema.py): no booleans as numbers, finite floats, an upper bound on every
number, integral floats read as integers; checked over every model of the scenario schema."""

from __future__ import annotations

import math
import re

import annotated_types
import pytest
from pydantic import BaseModel, ValidationError

from kvsim.scenario import KVConfig, Scenario
from kvsim.schema import Objective, Strict, _number_field, _types, check_slo, objectives
from kvsim.workload.config import Arrival, LengthDist

UNBOUNDED = {("TraceConfig", "limit")}  # only caps how many rows are read


def models() -> list[type[BaseModel]]:
    """Every schema model reachable from Scenario."""
    seen: list[type[BaseModel]] = []
    todo: list[type[BaseModel]] = [Scenario]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.append(m)
        for info in m.model_fields.values():
            todo += [t for t in _types(info.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
    return seen


def number_fields() -> list[tuple[type[BaseModel], str]]:
    return [(m, name) for m in models() for name in m.model_fields if _number_field(m, name)]


def errors_at(model: type[BaseModel], name: str, value) -> list[str]:
    with pytest.raises(ValidationError) as info:
        model.model_validate({name: value})
    return [e["msg"] for e in info.value.errors() if e["loc"][:1] == (name,)]


def test_every_model_is_strict():
    assert all(issubclass(m, Strict) for m in models())
    assert len(number_fields()) > 60


@pytest.mark.parametrize(("model", "name"), number_fields(), ids=lambda x: getattr(x, "__name__", x))
def test_numbers_refuse_booleans(model, name):
    msgs = errors_at(model, name, True)
    assert any("boolean" in m for m in msgs), msgs


@pytest.mark.parametrize(("model", "name"), number_fields(), ids=lambda x: getattr(x, "__name__", x))
def test_numbers_refuse_inf_and_nan(model, name):
    for value in (math.inf, -math.inf, math.nan, "1e999"):
        assert errors_at(model, name, value), (name, value)


@pytest.mark.parametrize(("model", "name"), number_fields(), ids=lambda x: getattr(x, "__name__", x))
def test_numbers_have_an_upper_bound(model, name):
    if (model.__name__, name) in UNBOUNDED:
        return
    info = model.model_fields[name]
    bounds = [m for m in info.metadata if isinstance(m, (annotated_types.Le, annotated_types.Lt))]
    nested = any(isinstance(m, (annotated_types.Le, annotated_types.Lt)) for t in _types(info.annotation)
                 for m in getattr(t, "metadata", ()))
    assert bounds or nested, f"{model.__name__}.{name} has no upper bound"


def test_integral_floats_are_integers_fractions_are_not():
    assert KVConfig(block_size=16.0).block_size == 16
    assert isinstance(KVConfig(block_size=16.0).block_size, int)
    with pytest.raises(ValidationError, match="fractional part"):
        KVConfig(block_size=16.5)


def test_booleans_stay_booleans_where_the_field_is_one():
    assert KVConfig(check_invariants=True).check_invariants is True


def test_bounds_hold_at_the_edge():
    assert Arrival(rate=1e6).rate == 1e6
    with pytest.raises(ValidationError, match="less than or equal to 1000000"):
        Arrival(rate=1.0000001e6)
    assert LengthDist(dist="fixed", value=10**9).value == 10**9
    with pytest.raises(ValidationError, match="less than or equal to 1000000000"):
        LengthDist(dist="fixed", value=10**9 + 1)


def test_objective_parse_str_and_holds():
    o = Objective.parse("ttft_s", {"p99.9": "1e1"})  # (YAML reads 1e1 as text)
    assert o == Objective("ttft_s", "p99.9", 10.0) and isinstance(o.threshold_s, float)
    assert str(o) == "ttft_s p99.9 <= 10 s" and o.quantile == 99.9
    assert o.holds(10.0) and o.holds(0.5) and not o.holds(10.01) and not o.holds(None)
    with pytest.raises(AttributeError):
        o.threshold_s = 1.0  # frozen
    bad = [("ttft", {"p99": 1}, "unknown metric"), ("e2e_s", {"p99": 1, "p50": 2}, "one"),
           ("e2e_s", {"q99": 1}, "not a percentile"), ("e2e_s", {"p99": 0}, "(0, 1e+09]"),
           ("e2e_s", {"p99": True}, "got True")]
    for metric, target, msg in bad:
        with pytest.raises(ValueError, match=re.escape(msg)):
            Objective.parse(metric, target)


def test_objectives_of_a_checked_slo_in_order():
    slo = check_slo({"tpot_s": {"p90": 0.05}, "ttft_s": {"p99": 2}})
    assert slo == {"tpot_s": {"p90": 0.05}, "ttft_s": {"p99": 2.0}}
    assert objectives(slo) == [Objective("tpot_s", "p90", 0.05), Objective("ttft_s", "p99", 2.0)]
