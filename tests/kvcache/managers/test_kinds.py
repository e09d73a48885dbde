"""The kind -> managers map (kvsim/kvcache/managers/kinds.py): each kind's cache groups get its classes."""

from kvsim.kvcache.block_pool import BlockPool
from kvsim.kvcache.coordinator import KVCoordinator
from kvsim.kvcache.managers.cached import CachedSlidingTables, CachedTables
from kvsim.kvcache.managers.kinds import KIND_MANAGERS
from kvsim.kvcache.managers.sliding import SlidingTables
from kvsim.kvcache.managers.state_slots import StateSlots
from kvsim.kvcache.managers.token_tables import TokenTables
from kvsim.kvcache.prefix_hash import HashCachePool
from kvsim.specs.kinds import KINDS
from kvsim.specs.layers import CompressedPart, LayerGroup
from kvsim.specs.pages import plan_pages


def test_every_kind_has_managers_and_for_group_builds_them():
    assert set(KIND_MANAGERS) == set(KINDS)
    assert KIND_MANAGERS["sliding"].tables is SlidingTables and KIND_MANAGERS["full"].cached is CachedTables
    plan = plan_pages((LayerGroup("full", (0,), 256.0), LayerGroup("sliding", (1,), 256.0, window=32)), 16)
    full, sliding = plan.groups
    pool = BlockPool(8, 16)
    assert type(TokenTables.for_group(pool, 16, full, None)) is TokenTables
    s = SlidingTables.for_group(pool, 16, sliding, None)
    assert type(s) is SlidingTables and s.window == 32
    cache = HashCachePool(8, 16, "lru")
    c = CachedSlidingTables.for_group(cache, 16, sliding, 1)
    assert (type(c), c.gi, c.window) == (CachedSlidingTables, 1, 32)
    assert CachedTables.for_group(cache, 16, full, 0).gi == 0


def test_the_coordinator_builds_each_cache_group_from_the_map():
    groups = (LayerGroup("full", (0,), 256.0), LayerGroup("sliding", (1,), 256.0, window=32),
              LayerGroup("compressed", (2,), state_bytes=100.0, window=8,
                         parts=(CompressedPart("hca", 16, 20.0),)),
              LayerGroup("state", (3,), state_bytes=1000.0))
    kv = KVCoordinator(plan_pages(groups, 16), 64)
    assert [type(m) for m in kv.tokens] == [TokenTables, SlidingTables, TokenTables]
    assert [type(m) for m in kv.states] == [StateSlots, StateSlots]  # the compressed state cache, the state
    assert [index for _, _, index in kv._weights] == [-1, kv.windows.index(31), -1, -2, -2]
    cached = KVCoordinator(plan_pages(groups[:2], 16), 64, prefix_cache="hash")
    assert [type(m) for m in cached.tokens] == [CachedTables, CachedSlidingTables]
