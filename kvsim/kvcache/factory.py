"""Build the KV manager a scenario's `kv` section asks for."""

from __future__ import annotations

from kvsim.kvcache.interface import KVManager
from kvsim.kvcache.paged import PagedKVManager


def build_kv_manager(kv_cfg, num_blocks: int, swap_capacity_blocks: int, max_model_len: int) -> KVManager:
    """kv_cfg is the scenario's KVConfig. One manager per replica."""
    return PagedKVManager(num_blocks, kv_cfg.block_size, swap_capacity_blocks=swap_capacity_blocks)
