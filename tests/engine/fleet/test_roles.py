"""Replica roles (kvsim/engine/fleet/roles.py): one class each, the registry the schema reads, the
traits the cluster, the deployment and the fleet report use."""

from __future__ import annotations

import pytest

from kvsim.engine.fleet.roles import ROLES, Decode, Mixed, Prefill, Role, role_report
from kvsim.registry import REPLICA_ROLES


def test_registry_names_every_role_class_once_with_its_summary():
    assert list(ROLES) == ["mixed", "prefill", "decode"]
    assert REPLICA_ROLES == {n: r.summary for n, r in ROLES.items()}
    assert {type(r) for r in ROLES.values()} == set(Role.__subclasses__()) == {Mixed, Prefill, Decode}
    for name, role in ROLES.items():
        assert role.name == name


def test_traits():
    m, p, d = ROLES["mixed"], ROLES["prefill"], ROLES["decode"]
    assert (m.front, m.sends_kv, m.receives_kv) == (True, False, False)
    assert (p.front, p.sends_kv, p.receives_kv) == (True, True, False)
    assert (d.front, d.sends_kv, d.receives_kv) == (False, False, True)


@pytest.mark.parametrize("name, prompt, output, held", [
    ("mixed", 100, 10, 109), ("mixed", 100, 0, 100), ("decode", 100, 10, 109), ("prefill", 100, 10, 100)])
def test_most_kv_a_sequence_holds(name, prompt, output, held):
    # the last output token's KV is never written; a prefill replica holds the prompt's only
    assert ROLES[name].max_held_tokens(prompt, output) == held


def test_role_report_is_what_the_fleet_section_reads():
    rep = role_report()
    assert rep["mixed"] == {"front": True, "hit_rate": True, "queue": None, "queue_of": None}
    assert rep["prefill"]["queue"] == ("arrival_s", "first_scheduled_s")
    assert rep["prefill"]["queue_of"] == "served"
    assert rep["decode"] == {"front": False, "hit_rate": False, "queue": ("prefill_done_s", "decode_admit_s"),
                             "queue_of": "handed"}
