"""The summary figures the consistency checker (kvsim/metrics/consistency.py) does not recompute from the
tables, each with its reason (docs/metrics.md, "Consistency of the figures")."""

from __future__ import annotations

EXEMPT: dict[str, str] = {
    # configuration and model facts copied into the summary
    "kv.capacity_blocks": "configuration: the replica's KV pool (from the memory budget)",
    "kv.block_size": "configuration",
    "kv.bytes_per_token": "model fact",
    "kv.bytes_per_block": "model fact",
    "weight_bytes_per_gpu": "model fact",
    "replicas": "configuration: the engine's replica count",
    "cost.pools[].gpus": "configuration",
    "cost.pools[].usd_per_gpu_hour": "configuration (price)",
    "slo.*.threshold_s": "configuration (the objective)",
    "tiers.chunk_blocks": "configuration",
    "tiers.store_min_uses": "configuration",
    "tiers.per_tier.*.capacity_blocks": "configuration",
    "tiers.per_tier.*.capacity_bytes": "configuration",
    "fleet.pools[].*": "configuration (the pools as run)",
    "fleet.per_replica[].index": "configuration",
    "fleet.per_replica[].tensor_parallel_size": "configuration",
    "fleet.per_replica[].capacity_blocks": "configuration",
    "fleet.per_replica[].block_size": "configuration",
    "fleet.per_role.*.replicas": "configuration (replicas of the role)",
    "fleet.kv_transfer.latency_s": "configuration",
    "fleet.kv_transfer.bandwidth_bytes_per_s.*": "configuration",
    "bench_serve.max_concurrency": "configuration",
    "bench_serve.request_rate": "configuration",
    "bench_serve.metric_percentiles[]": "configuration",
    "sparsity.budget_tokens": "configuration",
    "sparsity.budget_fraction": "configuration",
    "sparsity.kv_heads": "configuration",
    "sparsity.pool_kernel": "configuration",
    "sparsity.host_pool_bytes": "configuration",
    # engine counters no table row carries
    "prefix_cache.evictions": "engine counter: evictions belong to no request or iteration row",
    "fleet.per_replica[].routed": "engine counter: the router's decisions (re-routed requests count again)",
    "tiers.per_tier.*.loads": "engine counter (checked: loaded_tokens / block size, where the replicas share "
                              "one block size)",
    "tiers.per_tier.*.stores": "engine counter: stores belong to no request row (checked: bytes_stored)",
    "tiers.per_tier.*.evictions": "engine counter",
    "tiers.per_tier.*.peak_blocks": "engine counter (checked: at least the timeline's tier_<medium>_blocks)",
    "tiers.links.*.bytes": "engine counter: link traffic includes loads of requests re-admitted",
    "tiers.links.*.busy_s": "engine counter",
    "tiers.links.*.transfers": "engine counter",
    "tiers.dropped_blocks": "engine counter",
    "fleet.kv_transfer.busy_s": "engine counter: NIC time, queueing overlaps are not in a request row",
    "sparsity.decode_kv_read_fraction": "engine counter: KV tokens read per decode step",
    "sparsity.recall_bytes": "engine counter",
    "sparsity.offload_bytes": "engine counter",
    "sparsity.host_bytes_max": "engine counter",
    "sparsity.compaction_copy_bytes": "engine counter",
    "sparsity.prefetch_bytes": "engine counter",
    "sparsity.host_evicted_bytes": "engine counter",
}
"""Figure path (a list index as `[]`, `*` any one key) -> why it is not recomputed from the tables."""
