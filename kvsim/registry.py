"""Every pluggable choice a scenario can name, each list written once: here (name -> one-line
description) or, where the names key the implementations, in the room that holds them (eviction key
functions in kvsim/kvcache/eviction.py, sparsity policies in kvsim/kvcache/sparsity/, tier media and
policies in kvsim/kvcache/tiers.py). The scenario
schema (kvsim/scenario.py) builds its choice fields from these; `kvsim policies` lists them.

Imports only the kvcache registries and the replica roles (kvsim/engine/fleet/roles.py, a leaf), never
the schema or the rest of the engine, so the schema can import it.
"""

from __future__ import annotations

from kvsim.engine.fleet.roles import ROLES
from kvsim.kvcache.eviction import EVICTION_POLICIES
from kvsim.kvcache.sparsity.policies import POLICIES as SPARSITY_POLICIES
from kvsim.kvcache.sparsity.policies import policy_names
from kvsim.kvcache.tiers import TIER_EVICTION, TIER_LOAD, TIER_MEDIA, TIER_STORE

LAYOUTS = {
    "paged": "PagedAttention blocks; a block is allocated when the last one fills",
    "contiguous:max": "one region per request of max_model_len slots (FasterTransformer / Orca Max)",
    "contiguous:pow2": "prompt + next power of two of the output (Orca Pow2)",
    "contiguous:oracle": "exactly prompt + output (Orca Oracle)",
}
PREFIX_CACHES = {
    "none": "no prefix reuse",
    "hash": "vLLM automatic prefix caching: full blocks keyed by chained hashes",
    "radix": "SGLang RadixAttention: radix tree over any-length prefixes, leaf eviction",
}
PREEMPTION = {
    "recompute": "free the blocks; prefill prompt + generated tokens again later",
    "swap": "move the blocks to CPU swap space and back",
}
SCHEDULER_POLICIES = {
    "vllm_v1": "vLLM V1: decodes first, charged to the token budget; prefills and decodes share an iteration",
    "vllm_v0": "vLLM V0: without chunked prefill, prefill-only iterations (whole budget), else decodes",
    "sarathi": "Sarathi-Serve: chunked prefill forced on, decodes first in one token budget (stall-free)",
    "orca": "Orca: whole prompts batched with decodes, the prefill budget not charged by decodes",
}
"""Scheduler variants (kvsim/engine/scheduler_policy.py holds each name's rules)."""
COST_MODELS = {
    "auto": "the default: kernels where the hardware profile has kernel tables "
            "(calibration/<profile>/kernels), roofline elsewhere (summary.json cost_model.selected: why)",
    "roofline": "memory- or compute-bound terms from datasheet numbers",
    "calibrated": "terms fitted to measured kernels (hardware profile `calibration`), roofline elsewhere",
    "kernels": "each op read off the device's measured kernel tables (calibration/<profile>/kernels), "
               "roofline per op elsewhere",
}
ROUTERS = {
    "round_robin": "replica i, i+1, ... in arrival order",
    "random": "a uniformly random replica (seeded by simulation.seed)",
    "least_loaded": "fewest waiting + running requests (router.load_metric: queue), or lowest KV usage (kv)",
    "power_of_two": "the less loaded of two random replicas (Mitzenmacher's power of two choices)",
    "session_affinity": "every request of a chat session or agent episode to the replica of its first",
    "prefix_aware": "longest cached prefix on the replica, traded against load: max overlap - weight x load",
    "store_aware": "prefix_aware that counts the shared store's prefix (loadable by every replica) too",
    "lora_affinity": "LoRA: a replica holding the request's adapter (GPU slot, else host memory), then load",
}
"""Routers (kvsim/engine/fleet/router.py implements each name): they see ReplicaViews, never mutate them."""
REPLICA_ROLES = {name: role.summary for name, role in ROLES.items()}
"""Replica roles (a class each in kvsim/engine/fleet/roles.py, which imports nothing of kvsim)."""
KV_TRANSFER_MODES = {
    "after_prefill": "the decode replica pulls the KV once it has reserved blocks (vLLM NixlConnector)",
    "layerwise": "the KV streams layer by layer during the last prefill iteration (Mooncake, DistServe)",
}


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


def all_policies() -> list[tuple[str, str, str]]:
    """(scenario key, name, one-line description) for every registered choice, in a stable order."""
    rows: list[tuple[str, str, str]] = []
    rows += [("kv.layout", k, v) for k, v in LAYOUTS.items()]
    rows += [("kv.prefix_cache", k, v) for k, v in PREFIX_CACHES.items()]
    rows += [("kv.eviction", k, _first_line(fn.__doc__)) for k, fn in EVICTION_POLICIES.items()]
    rows += [("kv.sparsity.policy", k, SPARSITY_POLICIES[k].summary) for k in policy_names()]
    rows += [("scheduler.preemption_mode", k, v) for k, v in PREEMPTION.items()]
    rows += [("scheduler.policy", k, v) for k, v in SCHEDULER_POLICIES.items()]
    rows += [("cost.model", k, v) for k, v in COST_MODELS.items()]
    rows += [("kv.tiers[].medium", k, v) for k, v in TIER_MEDIA.items()]
    rows += [("kv.tiers[].eviction", k, v) for k, v in TIER_EVICTION.items()]
    rows += [("kv.tier_store", k, v) for k, v in TIER_STORE.items()]
    rows += [("kv.tier_load", k, v) for k, v in TIER_LOAD.items()]
    rows += [("router.policy", k, v) for k, v in ROUTERS.items()]
    rows += [("cluster.pools[].role", k, v) for k, v in REPLICA_ROLES.items()]
    rows += [("cluster.kv_transfer.mode", k, v) for k, v in KV_TRANSFER_MODES.items()]
    return rows
