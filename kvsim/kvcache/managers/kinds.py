"""Layer-group kind -> the managers of its cache groups (kvsim/specs/kinds.py names the kinds).

As vLLM v1 maps each KVCacheSpec class to one manager class, `KIND_MANAGERS` maps each kind's name to
the tables of its token-paged pages, plain and under the hash prefix cache (None for a kind without
per-token KV), and to the manager of its fixed per-sequence state (taken where its cache groups have
state pages). `KVCoordinator` builds one of each per cache group through `for_group`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvsim.kvcache.managers.cached import CachedSlidingTables, CachedTables
from kvsim.kvcache.managers.sliding import SlidingTables
from kvsim.kvcache.managers.state_slots import StateSlots
from kvsim.kvcache.managers.token_tables import TokenTables


@dataclass(frozen=True, slots=True)
class KindManagers:
    """The manager classes of one layer-group kind's cache groups (see the module docstring)."""

    tables: type[TokenTables] | None
    cached: type[CachedTables] | None
    state: type[StateSlots] = StateSlots


_TOKENS = KindManagers(TokenTables, CachedTables)

KIND_MANAGERS: dict[str, KindManagers] = {
    "full": _TOKENS,
    "mla": _TOKENS,
    "sliding": KindManagers(SlidingTables, CachedSlidingTables),
    "state": KindManagers(None, None),
    "compressed": _TOKENS,  # blocks of lcm(ratios) tokens; its state cache in StateSlots
}
"""Kind name -> its managers: one entry per kind of kvsim.specs.kinds.KINDS."""
