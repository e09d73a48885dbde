"""`kvsim policies`: every choice the schema accepts is listed once, with a description."""

from __future__ import annotations

from typing import get_args

from typer.testing import CliRunner

from kvsim import registry
from kvsim.cli import app
from kvsim.kvcache.sparsity.config import POLICY_NAMES, SparsityConfig
from kvsim.kvcache.sparsity.policies import policy_names
from kvsim.registry import all_policies
from kvsim.scenario import CostConfig, KVConfig, SchedulerConfig


def test_every_schema_choice_is_listed_with_a_description():
    rows = all_policies()
    by_key: dict[str, list[str]] = {}
    for key, name, text in rows:
        assert text, (key, name)
        by_key.setdefault(key, []).append(name)
    assert set(by_key["kv.eviction"]) == set(get_args(KVConfig.model_fields["eviction"].annotation))
    assert set(by_key["kv.layout"]) == set(get_args(KVConfig.model_fields["layout"].annotation))
    assert {"none", "streaming", "h2o", "snapkv", "scissorhands", "pyramidkv", "infinigen"} <= set(
        by_key["kv.sparsity.policy"])
    assert SparsityConfig().policy in by_key["kv.sparsity.policy"]
    assert len(rows) == len({(k, n) for k, n, _ in rows})


def test_the_schema_choices_are_the_registry_lists_in_order():
    """Each list is written once: the schema's Literal fields are built from the registry."""
    def choices(model, field):
        return list(get_args(model.model_fields[field].annotation))

    assert choices(KVConfig, "layout") == list(registry.LAYOUTS)
    assert choices(KVConfig, "prefix_cache") == list(registry.PREFIX_CACHES)
    assert choices(KVConfig, "eviction") == list(registry.EVICTION_POLICIES)
    assert choices(SchedulerConfig, "preemption_mode") == list(registry.PREEMPTION)
    assert choices(CostConfig, "model") == list(registry.COST_MODELS)
    assert choices(SparsityConfig, "policy") == list(POLICY_NAMES)
    assert set(policy_names()) == set(POLICY_NAMES)  # every name has its registered class


def test_policies_command_prints_the_table():
    result = CliRunner().invoke(app, ["policies"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name in ("contiguous:oracle", "radix", "h2o", "infinigen", "lfu"):
        assert name in result.output
