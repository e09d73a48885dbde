"""`kvsim schema`: the JSON Schema of a scenario file, generated from the pydantic model (kvsim/scenario.py),
with every key's default (also for nested sections, from a default Scenario), its unit (`x-unit`, from
UNITS and the naming rules below) and its description (the field's docstring), and vLLM's engine-argument
names (kvsim/aliases.py) as `x-vllm-aliases`. Editors that read JSON Schema (VS Code's YAML extension, say)
complete and check scenario files with it.

Units by name: a key ending in `_s` is seconds, `_gb` GB (10^9 bytes), `_gib` GiB (2^30 bytes), `_gbps`
GB/s; UNITS names the others. A key with no unit (a name, a choice, a count of things it names) has none.
"""

from __future__ import annotations

import copy
from typing import Any

from kvsim.aliases import ENGINE_ALIASES
from kvsim.scenario import Scenario

UNITS: dict[str, str] = {
    "swap_space_gb": "GiB (2^30 bytes) per GPU, vLLM's unit of swap_space",
    "activation_reserve_gib": "GiB (2^30 bytes) per GPU",
    "rate": "arrivals per second: requests for synthetic and rag, sessions for chat, episodes for agentic",
    "block_size": "tokens per KV block",
    "gpu_memory_utilization": "fraction of GPU memory",
    "watermark": "fraction of KV blocks",
    "max_num_seqs": "sequences",
    "max_num_batched_tokens": "tokens per iteration",
    "max_model_len": "tokens",
    "max_context": "tokens",
    "tier_chunk_tokens": "tokens",
    "num_gpu_blocks_override": "KV blocks",
    "tensor_parallel_size": "GPUs per replica",
    "replicas": "replicas",
    "data_parallel_size": "replicas",
    "requests": "requests",
    "users": "users",
    "usd_per_gpu_hour": "USD per GPU-hour",
    "hash_block_tokens": "tokens per hash id",
    "time_scale": "factor",
    "weight": "share of the arrival rate",
    "abandon_prob": "probability",
    "fork_prob": "probability",
    "gemm_efficiency_max": "fraction of peak FLOP/s",
    "bandwidth_efficiency": "fraction of peak bandwidth",
    "attention_efficiency": "fraction of peak FLOP/s",
    "gemm_efficiency_m_half": "tokens",
    "load_weight": "per unit of load, against one prompt token of overlap",
    "store_weight": "per token in the shared store, against one token in a replica's cache",
}


def unit_of(name: str) -> str | None:
    """A key's unit (module docstring), or None."""
    if name in UNITS:
        return UNITS[name]
    for suffix, unit in (("_gbps", "GB/s"), ("_gib", "GiB (2^30 bytes)"), ("_gb", "GB (10^9 bytes)"),
                         ("_s", "seconds")):
        if name.endswith(suffix):
            return unit
    return None


def json_schema() -> dict[str, Any]:
    """The scenario's JSON Schema (module docstring)."""
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kvsim scenario"
    defs = schema.get("$defs", {})
    for part in [schema, *defs.values()]:
        for name, prop in (part.get("properties") or {}).items():
            unit = unit_of(name)
            if unit is not None:
                prop["x-unit"] = unit
    _defaults(schema, Scenario().model_dump(mode="json"), defs, set())
    aliases: dict[str, list[str]] = {}
    for vllm, (key, _) in ENGINE_ALIASES.items():
        aliases.setdefault(key, []).append(vllm)
    schema["x-vllm-aliases"] = {k: sorted(v) for k, v in sorted(aliases.items())}
    return schema


def _defaults(part: dict[str, Any], values: Any, defs: dict[str, Any], seen: set[str]) -> None:
    """Give each property the default scenario's value where the generated schema has no default (sections
    and distributions built by a default factory), then the keys of the sections it refers to."""
    if not isinstance(values, dict):
        return
    for name, prop in (part.get("properties") or {}).items():
        if name not in values:
            continue
        if "default" not in prop:
            prop["default"] = copy.deepcopy(values[name])
        ref = str(prop.get("$ref", "")).rsplit("/", 1)[-1]
        if ref in defs and ref not in seen:
            seen.add(ref)
            _defaults(defs[ref], values[name], defs, seen)
