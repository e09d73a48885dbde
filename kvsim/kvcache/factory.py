"""Build the KV manager a scenario's `kv` section asks for."""

from __future__ import annotations

from kvsim.kvcache.contiguous import build_contiguous
from kvsim.kvcache.coordinator import KVCoordinator
from kvsim.kvcache.hashing import ContentMemo
from kvsim.kvcache.interface import KVManager
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.kvcache.radix import RadixKVManager
from kvsim.kvcache.tiers import Tier, TierChain
from kvsim.specs.pages import PagePlan


def build_tier_chain(kv_cfg, bytes_per_block: float, shared: dict[str, Tier] | None = None) -> TierChain:
    """The tiers of `kv.tiers` (each capacity_gb x 10^9 bytes // bytes per block, in GPU blocks). A tier
    marked `shared` is the fleet's one store: taken from `shared` by medium, or built and put there."""
    tiers = []
    for t in kv_cfg.tiers:
        if t.shared and shared is not None and t.medium in shared:
            tiers.append(shared[t.medium])
            continue
        tier = Tier(t.medium, int(t.capacity_gb * 1e9 // bytes_per_block), t.eviction, shared=t.shared)
        if t.shared and shared is not None:
            shared[t.medium] = tier
        tiers.append(tier)
    chunk = (kv_cfg.tier_chunk_tokens or kv_cfg.block_size) // kv_cfg.block_size
    return TierChain(tiers, exclusive=kv_cfg.tier_placement == "exclusive", chunk_blocks=chunk,
                     min_uses=kv_cfg.tier_store_min_uses)


def build_kv_manager(kv_cfg, num_blocks: int, swap_capacity_blocks: int, max_model_len: int,
                     plan: PagePlan | None = None, bytes_per_block: float = 0.0,
                     shared_tiers: dict[str, Tier] | None = None,
                     memos: dict[tuple[int, bool], ContentMemo] | None = None) -> KVManager:
    """kv_cfg is the scenario's KVConfig, its rules across keys already checked (a prefix cache or
    sparsity needs kv.layout: paged: kvsim/scenario.py cross_check; what layer groups and KV tiers do not
    combine with: kvsim/engine/deployment.py Deployment._check_layer_groups / _check_tiers). A page plan of
    one full or MLA group (or none) gets the classic managers; any other plan the KVCoordinator over its
    cache groups. `kv.tiers` (hash prefix cache, one group) put a TierChain below the GPU cache; its shared
    tiers come from `shared_tiers` (one store for the fleet); `memos` holds one ContentMemo per (block size,
    chained) for every replica of a fleet (a router peeks at each replica's cache for the same request: its
    keys are computed once). One manager per replica."""
    prefix = kv_cfg.prefix_cache
    if plan is not None and not plan.single:
        return KVCoordinator(plan, num_blocks, swap_capacity_blocks, prefix, kv_cfg.eviction)
    if kv_cfg.layout.startswith("contiguous:"):
        return build_contiguous(kv_cfg, num_blocks, max_model_len)
    if prefix == "hash":
        tiers = build_tier_chain(kv_cfg, bytes_per_block, shared_tiers) if kv_cfg.tiers else None
        return PrefixHashKVManager(num_blocks, kv_cfg.block_size, swap_capacity_blocks, kv_cfg.eviction,
                                   tiers=tiers, write_through=kv_cfg.tier_store == "write_through",
                                   memo=_memo(memos, kv_cfg.block_size, True))
    if prefix == "radix":
        return RadixKVManager(num_blocks, kv_cfg.block_size, swap_capacity_blocks, kv_cfg.eviction,
                              memo=_memo(memos, kv_cfg.block_size, False))
    return PagedKVManager(num_blocks, kv_cfg.block_size, swap_capacity_blocks=swap_capacity_blocks)


FLEET_MEMO_SIZE = 256
"""Requests a fleet's shared ContentMemo keeps (waiting heads of every replica, the one being routed)."""


def _memo(memos: dict | None, block_size: int, chained: bool) -> ContentMemo | None:
    if memos is None:
        return None
    key = (block_size, chained)
    if key not in memos:
        memos[key] = ContentMemo(block_size, chained, size=FLEET_MEMO_SIZE)
    return memos[key]
