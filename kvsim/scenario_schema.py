"""`kvsim schema`: the JSON Schema of a scenario file, generated from the pydantic model (kvsim/scenario.py),
with every key's default (also for nested sections, from a default Scenario), its unit (`x-unit`, from
UNITS and the naming rules below) and its description (the field's docstring), and vLLM's engine-argument
names (kvsim/aliases.py) as `x-vllm-aliases`. Editors that read JSON Schema (VS Code's YAML extension, say)
complete and check scenario files with it.

Units by name: a key ending in `_s` is seconds, `_gb` GB (10^9 bytes), `_gib` GiB (2^30 bytes), `_gbps`
GB/s; UNITS names the others. A key with no unit (a name, a choice, a count of things it names) has none.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap
from typing import Any

from kvsim.aliases import ENGINE_ALIASES
from kvsim.scenario import Scenario
from kvsim.schema import Strict

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
    "num_prompts": "requests",
    "request_rate": "requests per second, or inf",
    "burstiness": "gamma shape of the gaps",
    "max_concurrency": "requests in flight",
    "random_input_len": "tokens",
    "random_output_len": "tokens",
    "random_prefix_len": "tokens",
    "sharegpt_output_len": "tokens",
    "num_special_tokens": "tokens",
    "random_range_ratio": "fraction",
    "metric_percentiles": "percent",
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
    models = {c.__name__: c for c in _subclasses(Strict)}
    for title, part in [("Scenario", schema), *defs.items()]:
        docs = field_docs(models[title]) if title in models else {}
        for name, prop in (part.get("properties") or {}).items():
            unit = unit_of(name)
            if unit is not None:
                prop["x-unit"] = unit
            if name in docs and "description" not in prop:
                prop["description"] = docs[name]
    _defaults(schema, Scenario().model_dump(mode="json"), defs, set())
    aliases: dict[str, list[str]] = {}
    for vllm, (key, _) in ENGINE_ALIASES.items():
        aliases.setdefault(key, []).append(vllm)
    schema["x-vllm-aliases"] = {k: sorted(v) for k, v in sorted(aliases.items())}
    return schema


def _subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def field_docs(cls: type) -> dict[str, str]:
    """A model's field docstrings (the string after a field's line), read from its source and its bases'
    here rather than by pydantic at every import (use_attribute_docstrings): only `kvsim schema` needs
    them."""
    out: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if issubclass(k, Strict) and k is not Strict]):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, nxt in zip(body, body[1:], strict=False):
            target = stmt.target if isinstance(stmt, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and isinstance(nxt, ast.Expr) and isinstance(
                    getattr(nxt, "value", None), ast.Constant) and isinstance(nxt.value.value, str):
                out[target.id] = inspect.cleandoc(nxt.value.value)
    return out


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
