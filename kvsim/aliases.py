"""vLLM's engine-argument names in a scenario, and "did you mean" for names that are not kvsim's.

A scenario may give vLLM's flat engine arguments (`vllm serve` flags) where their meaning is kvsim's:
at the top level, under an `engine:` map, or in the section they belong to (`kv: {kv_cache_dtype: fp8}`),
spelled with underscores or dashes (`kv-cache-dtype`). `normalize` moves each to its kvsim key before
validation (ENGINE_ALIASES: vLLM name -> kvsim dotted key, with a value conversion where the forms differ:
`enable_prefix_caching: true` is `kv.prefix_cache: hash`). Giving both names with different values is
an error naming both. vLLM arguments kvsim does not model are refused by name (NOT_MODELLED) rather than
as unknown keys. docs/scenario.md lists the table.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable
from typing import Any

from kvsim.errors import KvsimError, excerpt


def _prefix_cache(value: Any) -> Any:
    if value is True:
        return "hash"
    if value is False:
        return "none"
    raise ValueError(f"expected true or false, got {excerpt(value)}")


def _same(value: Any) -> Any:
    return value


def _json_section(value: Any) -> Any:
    """vLLM's CLI takes --speculative-config as a JSON string: a string is parsed, a mapping kept."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError(f"not a JSON object: {excerpt(value)}") from None
    return value


ENGINE_ALIASES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "kv_cache_dtype": ("kv.dtype", _same),
    "block_size": ("kv.block_size", _same),
    "gpu_memory_utilization": ("kv.gpu_memory_utilization", _same),
    "swap_space": ("kv.swap_space_gb", _same),
    "num_gpu_blocks_override": ("kv.num_gpu_blocks_override", _same),
    "enable_prefix_caching": ("kv.prefix_cache", _prefix_cache),
    "disable_hybrid_kv_cache_manager": ("kv.disable_hybrid_kv_cache_manager", _same),
    "max_num_seqs": ("scheduler.max_num_seqs", _same),
    "max_num_batched_tokens": ("scheduler.max_num_batched_tokens", _same),
    "max_model_len": ("scheduler.max_model_len", _same),
    "enable_chunked_prefill": ("scheduler.chunked_prefill", _same),
    "preemption_mode": ("scheduler.preemption_mode", _same),
    "tensor_parallel_size": ("parallelism.tensor_parallel_size", _same),
    "data_parallel_size": ("parallelism.replicas", _same),
    "speculative_config": ("speculative", _json_section),
    "enable_expert_parallel": ("parallelism.enable_expert_parallel", _same),
    "all2all_backend": ("parallelism.all2all_backend", _same),
    "enable_lora": ("lora.enabled", _same),
    "max_loras": ("lora.max_loras", _same),
    "max_lora_rank": ("lora.max_lora_rank", _same),
    "max_cpu_loras": ("lora.max_cpu_loras", _same),
}
"""vLLM engine argument -> (kvsim dotted key, value conversion). Same meaning and unit: vLLM's swap_space
is GiB per GPU, as kv.swap_space_gb is. enable_lora / max_loras / max_lora_rank / max_cpu_loras go into the
`lora` section (kvsim/lora/config.py; any of them turns LoRA on unless enable_lora is false)."""

NOT_MODELLED: dict[str, str] = {
    "pipeline_parallel_size": "pipeline parallelism",
    "enforce_eager": "eager launches: the cost model charges cost.eager_layer_overhead_s to prefill batches",
    "cpu_offload_gb": "weight offload to CPU",
    "kv_transfer_config": "vLLM's KV connector config (see cluster.kv_transfer)",
    "scheduling_policy": "priority scheduling (see scheduler.policy)",
}
"""vLLM engine arguments kvsim does not model: refused with what they are, not as unknown keys."""

SECTIONS: tuple[str, ...] = ("kv", "scheduler", "parallelism")
"""The scenario sections vLLM names may also be written in."""


def _flat(name: str) -> str:
    return name.replace("-", "_")


def normalize(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The scenario mapping with vLLM's names moved to kvsim's keys (module docstring): a new mapping when
    one moved (the sections it changes copied), else `data` itself."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    moves: list[tuple[str, str, Any]] = []  # (where it was written, vLLM name, value)
    if "engine" in data:
        engine = data.pop("engine")
        if not isinstance(engine, dict):
            raise KvsimError(f"{source}: engine: must map vLLM engine arguments to values, e.g. "
                             "{kv_cache_dtype: fp8}")
        for key, value in engine.items():
            moves.append((f"engine.{key}", _vllm_name(str(key), f"{source}: engine.{key}"), value))
    for key in list(data):
        name = _flat(str(key))
        if name in ENGINE_ALIASES or name in NOT_MODELLED:
            moves.append((str(key), _vllm_name(name, f"{source}: {key}"), data.pop(key)))
    for section in SECTIONS:
        if isinstance(data.get(section), dict):
            data[section] = dict(data[section])
            moves += [(f"{section}.{k}", n, v) for k, n, v in _section_moves(section, data[section], source)]
    for where, name, value in moves:
        key, convert = ENGINE_ALIASES[name]
        _place(data, where, key, _converted(convert, value, f"{source}: {where}"), source)
    return data


def normalize_section(section: str, part: dict[str, Any], where: str) -> dict[str, Any]:
    """One `kv` / `scheduler` mapping (a pool's, say) with vLLM's names of that section moved to kvsim's,
    in place; `where` names it in errors (e.g. 'scenario.yaml: cluster.pools.0.kv')."""
    for key, name, value in _section_moves(section, part, where):
        field = ENGINE_ALIASES[name][0].split(".", 1)[1]
        converted = _converted(ENGINE_ALIASES[name][1], value, f"{where}.{key}")
        if field in part and part[field] != converted:
            raise KvsimError(f"{where}.{key} (vLLM's name for {field}) and {field} are both given, with "
                             f"different values; give one")
        part[field] = converted
    return part


def _converted(convert: Callable[[Any], Any], value: Any, where: str) -> Any:
    try:
        return convert(value)
    except ValueError as exc:
        raise KvsimError(f"{where}: {exc}") from None


def _section_moves(section: str, part: dict[str, Any], source: str) -> list[tuple[str, str, Any]]:
    """(key as written, vLLM name, value) of the keys of `part` that are vLLM's names for other keys of the
    section, removed from it."""
    out = []
    for key in list(part):
        name = _flat(str(key))
        if name in NOT_MODELLED:
            raise KvsimError(f"{source}: {section}.{key}: a vLLM engine argument kvsim does not model "
                             f"({NOT_MODELLED[name]})")
        target = ENGINE_ALIASES.get(name)
        if section == "parallelism" and key == "data_parallel_size":
            continue  # (the schema's own second name for replicas: it refuses both at once)
        if target is not None and target[0].split(".")[0] == section and target[0] != f"{section}.{key}":
            out.append((str(key), name, part.pop(key)))
    return out


def _vllm_name(name: str, where: str) -> str:
    flat = _flat(name)
    if flat in NOT_MODELLED:
        raise KvsimError(f"{where}: a vLLM engine argument kvsim does not model ({NOT_MODELLED[flat]})")
    if flat not in ENGINE_ALIASES:
        hint = did_you_mean(flat, ENGINE_ALIASES)
        raise KvsimError(f"{where}: not a vLLM engine argument kvsim takes{hint} (engine: takes "
                         f"{', '.join(sorted(ENGINE_ALIASES))})")
    return flat


def _place(data: dict[str, Any], where: str, key: str, value: Any, source: str) -> None:
    if "." not in key:  # a whole section (speculative_config -> speculative)
        if key in data and data[key] != value:
            raise KvsimError(f"{source}: {where} (vLLM's name for {key}) and {key} are both given, with "
                             f"different values; give one")
        data[key] = value
        return
    section, field = key.split(".")
    part = data.get(section)
    if part is None:
        part = {}
    if isinstance(part, dict):
        part = data[section] = dict(part)
    else:
        raise KvsimError(f"{source}: {section}: must be a mapping (vLLM's {where} goes into it)")
    same = [f for f in (field, "data_parallel_size" if field == "replicas" else None) if f and f in part]
    for f in same:
        if part[f] != value:
            raise KvsimError(f"{source}: {where} (vLLM's name for {key}) and {section}.{f} are both given, "
                             f"with different values ({excerpt(value)} and {excerpt(part[f])}); give one")
    if not same:
        part[field] = value


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest of `choices` to `word`, or '' when none is close."""
    names = [str(c) for c in choices]
    close = difflib.get_close_matches(str(word), names, n=1, cutoff=0.6)
    if not close:
        lowered = {n.lower(): n for n in names}
        close = difflib.get_close_matches(str(word).lower(), list(lowered), n=1, cutoff=0.6)
        close = [lowered[c] for c in close]
    return f" (did you mean '{close[0]}'?)" if close else ""
