"""kvsim/kvcache/interface.py: every KV manager the factory builds has every member of the KVManager
protocol (capabilities are members, never probed), and the neutral answers of managers without a feature."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvsim.kvcache.contiguous import ContiguousKVManager
from kvsim.kvcache.coordinator import KVCoordinator
from kvsim.kvcache.interface import KVManager
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.kvcache.radix import RadixKVManager
from kvsim.specs.catalog import get_model
from kvsim.specs.pages import plan_pages
from kvsim.workload.request import Request

MANAGERS = [PagedKVManager, PrefixHashKVManager, RadixKVManager, ContiguousKVManager, KVCoordinator]


def protocol_members() -> set[str]:
    names = set(getattr(KVManager, "__annotations__", {}))
    names |= {n for n, v in vars(KVManager).items()
              if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))}
    return names


def test_the_protocol_lists_the_capabilities():
    assert {"evictions", "refuse_reason", "reparent", "breakdown", "peek_hit", "token_states",
            "private_blocks", "windows", "last_grow_delta", "tiers"} <= protocol_members()


@pytest.mark.parametrize("cls", MANAGERS, ids=lambda c: c.__name__)
def test_every_manager_has_every_member(cls):
    slots = set()
    for k in cls.__mro__:
        slots |= set(getattr(k, "__slots__", ()))
    missing = sorted(n for n in protocol_members() if not hasattr(cls, n) and n not in slots
                     and n not in _instance_attributes(cls))
    assert not missing, f"{cls.__name__} lacks {missing}"


def _init_source(cls) -> str:
    """The source of cls.__init__, read from its module's .py file (inspect cannot read the functions of a
    compiled module: kvsim/native.py)."""
    path = Path(sys.modules[cls.__module__].__file__)
    text = path.with_name(path.name.split(".", 1)[0] + ".py").read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            init = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
            return ast.get_source_segment(text, init)
    raise LookupError(cls)


def _instance_attributes(cls) -> set[str]:
    """Attributes __init__ assigns (self.x = ...), for classes without __slots__."""
    src = _init_source(cls)
    return {line.split("self.", 1)[1].split("=")[0].split(":")[0].strip()
            for line in src.splitlines() if "self." in line and "=" in line.split("self.", 1)[1]}


def test_neutral_answers_of_a_plain_paged_manager():
    kv = PagedKVManager(10, 4)
    req = Request(0, 0.0, 6, 3)
    assert kv.evictions == 0 and kv.refuse_reason(req, 3) is None and kv.peek_hit(req, 6).tokens == 0
    kv.allocate(1, 6)
    kv.allocate(2, 3)
    kv.reparent(2, 1)  # beam: 2 continues from 1, sharing its two blocks
    assert kv.tables[2] == kv.tables[1] and kv.used_blocks == 2 and kv.private_blocks(2) == 0
    # 2 blocks of 4 slots in use, shared by both tables; 6 slots hold KV (shared ones once): internal
    # 8 - 6 = 2, free 40 - 8 = 32; unshared = the 2 + 2 table blocks the scheduler passes
    assert kv.breakdown(6, 4) == (0, 2 * 4 - 6, 0, 10 * 4 - 2 * 4, 4)


def test_coordinator_answers_the_same_members():
    model = get_model("gpt-oss-20b")
    plan = plan_pages(model.layer_groups("bf16", 1), 16)
    kv = KVCoordinator(plan, 64)
    req = Request(0, 0.0, 40, 3)
    assert kv.evictions == 0 and kv.refuse_reason(req, 3) is None
    kv.allocate(1, 40)
    kv.allocate(2, 1)
    kv.reparent(2, 1)
    assert kv.num_blocks_of(2) == kv.num_blocks_of(1) and kv.private_blocks(2) == 0
    kv.check_invariants()
    reservation, internal, external, free, unshared = kv.breakdown(0, 7)
    assert (reservation, external, unshared) == (0, 0, 7) and free == (64 - kv.used_blocks) * kv.block_size


def test_managers_without_tiers_answer_none():
    model = get_model("gpt-oss-20b")
    built = [PagedKVManager(10, 4), PrefixHashKVManager(10, 4), RadixKVManager(10, 4),
             KVCoordinator(plan_pages(model.layer_groups("bf16", 1), 16), 64)]
    assert [kv.tiers for kv in built] == [None] * 4
    assert ContiguousKVManager.tiers is None
    chain = SimpleNamespace(tiers=[])  # a TierChain's stand-in: the manager only keeps it
    assert PrefixHashKVManager(10, 4, tiers=chain).tiers is chain
