"""The scenario schema (pydantic), YAML loading, `--set` overrides and one-line validation errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from kvsim.errors import KvsimError
from kvsim.kvcache.sparsity.config import SparsityConfig
from kvsim.workload.config import WorkloadConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Parallelism(_Strict):
    """tensor_parallel_size: GPUs one replica's weights and KV are split across. replicas: identical
    engine replicas behind a round-robin router."""

    tensor_parallel_size: int = Field(default=1, ge=1)
    replicas: int = Field(default=1, ge=1)


class KVConfig(_Strict):
    """KV cache: block_size tokens per block, KV dtype, the fraction of GPU memory the engine may use
    (gpu_memory_utilization, as in vLLM), CPU swap space per GPU in GiB (swap_space_gb, vLLM's name and
    unit), the activation reserve in GiB (default max(1 GiB, 5% of GPU memory)), the free-block watermark
    for admission, and the runtime invariant check mode."""

    block_size: int = Field(default=16, ge=1, le=4096)
    dtype: Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"] = "bf16"
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    swap_space_gb: float = Field(default=4.0, ge=0)
    activation_reserve_gib: float | None = Field(default=None, ge=0)
    watermark: float = Field(default=0.01, ge=0, lt=1)
    num_gpu_blocks_override: int | None = Field(default=None, ge=1)
    check_invariants: bool = False
    sparsity: SparsityConfig = Field(default_factory=SparsityConfig)
    """Token-level KV eviction or offload (StreamingLLM, H2O, ...). See docs/sparsity.md."""
    layout: Literal["paged", "contiguous:max", "contiguous:pow2", "contiguous:oracle"] = "paged"
    """paged (PagedAttention blocks) or a contiguous per-sequence reservation: max_model_len (max), prompt
    + next power of two of the output (pow2), prompt + output (oracle). See docs/layouts.md."""
    placement: Literal["first_fit", "best_fit"] = "first_fit"
    """Where a contiguous layout puts a new region: the lowest-addressed or the smallest hole that fits."""
    prefix_cache: Literal["none", "hash", "radix"] = "none"
    """Prefix caching (paged layout): none, hash (vLLM automatic prefix caching: chained block hashes) or
    radix (SGLang RadixAttention: radix tree, leaf eviction). See docs/prefix_cache.md."""
    eviction: Literal["lru", "lfu", "fifo", "length"] = "lru"
    """Which cached, unreferenced block (radix: leaf) goes first when the pool runs out; the registry is
    kvsim/kvcache/eviction.py. length: keep the blocks early in prompts longest."""


class SchedulerConfig(_Strict):
    """vLLM-style continuous batching limits and preemption mode."""

    max_num_seqs: int = Field(default=256, ge=1)
    max_num_batched_tokens: int = Field(default=8192, ge=1)
    chunked_prefill: bool = True
    preemption_mode: Literal["recompute", "swap"] = "recompute"
    max_model_len: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check(self) -> SchedulerConfig:
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError("max_num_batched_tokens must be >= max_num_seqs")
        return self


class CostConfig(_Strict):
    """Which cost model advances time, and the roofline's tunables."""

    model: Literal["roofline", "calibrated"] = "roofline"
    iteration_overhead_s: float = Field(default=0.003, ge=0)
    gemm_efficiency_max: float = Field(default=0.75, gt=0, le=1)
    gemm_efficiency_m_half: float = Field(default=64.0, gt=0)
    bandwidth_efficiency: float = Field(default=0.85, gt=0, le=1)
    attention_efficiency: float = Field(default=0.5, gt=0, le=1)


class Simulation(_Strict):
    """seed: the one RNG seed. requests: how many requests to generate; duration_s: stop admitting
    arrivals after this simulated time (whichever limit is hit first); each in-flight request still runs."""

    seed: int = Field(default=0, ge=0)
    requests: int | None = Field(default=2000, ge=1)
    duration_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> Simulation:
        if self.requests is None and self.duration_s is None:
            raise ValueError("set 'requests' or 'duration_s'")
        return self


class Scenario(_Strict):
    """Everything one simulated run needs. Every key has a default."""

    name: str = "default"
    model: str | dict[str, Any] = "llama-3-8b"
    hardware: str | dict[str, Any] = "h100-sxm"
    parallelism: Parallelism = Field(default_factory=Parallelism)
    kv: KVConfig = Field(default_factory=KVConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    cost: CostConfig = Field(default_factory=CostConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    simulation: Simulation = Field(default_factory=Simulation)
    _base_dir: str | None = PrivateAttr(default=None)

    @property
    def base_dir(self) -> str | None:
        """Folder of the scenario file: relative workload paths resolve against it first."""
        return self._base_dir


def _format_validation_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<root>"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    return f"{source}: {loc}: {msg}"


def parse_value(text: str) -> Any:
    """Parse a --set value as YAML (so 32 is an int, true a bool, [a, b] a list)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str = "--set") -> dict[str, Any]:
    """Apply `a.b.c=value` overrides to a nested dict (in place) and return it."""
    for item in overrides:
        if "=" not in item:
            raise KvsimError(f"{source} {item!r}: expected KEY=VALUE, e.g. kv.block_size=32")
        key, _, raw = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise KvsimError(f"{source} {item!r}: empty key")
        node = data
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                node[part] = nxt
            node = nxt
        node[parts[-1]] = parse_value(raw)
    return data


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, with a one-line error naming the file and line on failure."""
    p = Path(path)
    if not p.is_file():
        raise KvsimError(f"{p}: scenario file not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise KvsimError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise KvsimError(f"{p}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise KvsimError(f"{p}:{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KvsimError(f"{p}: top level must be a mapping of sections")
    return data


def build_scenario(data: dict[str, Any], source: str = "scenario") -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise KvsimError(_format_validation_error(err, source)) from None


def load_scenario(path: str | Path | None = None, overrides: list[str] | None = None,
                  seed: int | None = None) -> Scenario:
    """Load a scenario file (or the built-in default when path is None), apply overrides, validate."""
    data = load_yaml(path) if path is not None else {}
    source = str(path) if path is not None else "default scenario"
    if overrides:
        apply_overrides(data, overrides)
    if seed is not None:
        data.setdefault("simulation", {})
        if not isinstance(data["simulation"], dict):
            raise KvsimError(f"{source}: simulation: must be a mapping")
        data["simulation"]["seed"] = seed
    scenario = build_scenario(data, source)
    if path is not None:
        scenario = _resolve_paths(scenario, Path(path).parent)
        scenario._base_dir = str(Path(path).parent)
    return scenario


def _resolve_paths(scenario: Scenario, base: Path) -> Scenario:
    """Make relative file paths in the workload relative to the scenario file's folder when they exist
    there, else leave them relative to the working directory."""
    tr = scenario.workload.trace
    if tr is not None and not Path(tr.path).is_absolute():
        cand = base / tr.path
        if cand.exists():
            tr.path = str(cand)
    return scenario


def scenario_dict(scenario: Scenario) -> dict[str, Any]:
    """The resolved scenario as plain data (for summary.json)."""
    return scenario.model_dump(mode="json")
