"""Build the KV manager a scenario's `kv` section asks for."""

from __future__ import annotations

from kvsim.errors import KvsimError
from kvsim.kvcache.contiguous import build_contiguous
from kvsim.kvcache.interface import KVManager
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.kvcache.radix import RadixKVManager


def build_kv_manager(kv_cfg, num_blocks: int, swap_capacity_blocks: int, max_model_len: int) -> KVManager:
    """kv_cfg is the scenario's KVConfig. One manager per replica."""
    layout = getattr(kv_cfg, "layout", "paged")
    prefix = getattr(kv_cfg, "prefix_cache", "none")
    if layout.startswith("contiguous:"):
        if prefix != "none":
            raise KvsimError(f"kv.prefix_cache: '{prefix}' needs kv.layout: paged (got '{layout}')")
        return build_contiguous(kv_cfg, num_blocks, max_model_len)
    if prefix == "hash":
        return PrefixHashKVManager(num_blocks, kv_cfg.block_size, swap_capacity_blocks, kv_cfg.eviction)
    if prefix == "radix":
        return RadixKVManager(num_blocks, kv_cfg.block_size, swap_capacity_blocks, kv_cfg.eviction)
    return PagedKVManager(num_blocks, kv_cfg.block_size, swap_capacity_blocks=swap_capacity_blocks)
