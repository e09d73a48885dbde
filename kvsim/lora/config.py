"""The `lora` section of a scenario (vLLM's multi-LoRA engine arguments), its adapters and the rules
within it. Imported into `Scenario` (kvsim/scenario.py) as one field; docs/lora.md explains every key."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from kvsim.schema import MAX_SECONDS, MAX_ZIPF_S, Strict

LORA_RANKS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The values vLLM's `max_lora_rank` accepts (vllm/config/lora.py `MaxLoRARanks`)."""
MAX_ADAPTERS = 100_000
"""Most adapters one scenario names (a fleet serving 'thousands' of fine-tunes fits)."""
MAX_LORAS = 1024
"""Most GPU adapter slots (max_loras) and host adapters (max_cpu_loras)."""
MAX_NAME = 128
KERNEL_OVERHEAD_S: dict[str, float] = {"v0": 1.1e-4, "v1": 2e-6}
"""lora.kernel_overhead_s when unset, per punica era (kvsim/lora/sizing.py PUNICA_ERAS; v0 under
scheduler.policy vllm_v0, else v1): seconds of one punica kernel (buffer zeroing, shrink or expand) of an
eagerly run step (prefill or mixed) that do not scale with its bytes or FLOPs. v0: fitted by least
squares on the LoRA slowdowns of vLLM PR #11267 (calibration/lora_published_check.py; leave-one-out and
held-out errors in docs/lora.md); it is several bare Triton launches and absorbs the rest of vLLM 0.6's
per-step LoRA host work. v1: an estimate (~2 us a small kernel, as kvsim/cost/roofline.py assumes), no
public V1 run with and without LoRA to fit it on."""
GRAPH_KERNEL_OVERHEAD_S = 2e-6
"""lora.graph_kernel_overhead_s's default: seconds of one punica kernel replayed in a CUDA graph (a
decode-only step of at most CUDA_GRAPH_MAX_SEQS sequences): the launch is gone, a small kernel's fixed
GPU time (~2 us, an estimate) is left. Not fitted: the published runs cannot tell it apart."""


class Adapter(Strict):
    """One adapter: `name` (what a trace's adapter column names), `rank` (at most lora.max_lora_rank)
    and `popularity`, a non-negative weight: the share of adapter requests that ask for it is its weight
    over the sum of all adapters' weights."""

    name: str = Field(min_length=1, max_length=MAX_NAME)
    rank: int = Field(default=16, ge=1, le=max(LORA_RANKS))
    popularity: float = Field(default=1.0, ge=0, le=1e12)


class AdapterGroup(Strict):
    """`count` adapters of one `rank`, named `{prefix}{i}` for i = 0 .. count-1, with popularity
    `uniform` (equal weights) or `zipf` (adapter i weighs (i + 1)^-zipf_s)."""

    count: int = Field(ge=1, le=MAX_ADAPTERS)
    rank: int = Field(default=16, ge=1, le=max(LORA_RANKS))
    popularity: Literal["uniform", "zipf"] = "uniform"
    zipf_s: float = Field(default=1.0, ge=0, le=MAX_ZIPF_S)
    prefix: str = Field(default="adapter-", max_length=MAX_NAME)


def _adapter_kind(value: Any) -> str:
    """'group' for a {count, ...} mapping (or an AdapterGroup, when serializing), else 'adapter'."""
    if isinstance(value, AdapterGroup):
        return "group"
    return "group" if isinstance(value, dict) and "count" in value else "adapter"


AdapterEntry = Annotated[Annotated[Adapter, Tag("adapter")] | Annotated[AdapterGroup, Tag("group")],
                         Discriminator(_adapter_kind)]


class LoraConfig(Strict):
    """Multi-LoRA serving (docs/lora.md). vLLM's names: `enable_lora` (-> `enabled`), `max_loras` (GPU
    adapter slots, and the most distinct adapters one batch may hold), `max_lora_rank` (every slot is
    sized for it), `max_cpu_loras` (adapters kept in host memory, LRU; default max_loras). `adapters`: a
    list of {name, rank, popularity} and / or groups {count, rank, popularity: uniform | zipf, zipf_s}.
    `base_fraction`: the share of requests (of sessions: a conversation keeps its first request's draw)
    that ask for the base model. `disk_bandwidth_gbps`: GB/s an adapter missing from host memory is read
    at (default: the hardware profile's ssd_bandwidth). `kernel_overhead_s`: seconds of one punica kernel
    (buffer zeroing, shrink or expand) that do not scale with its work, charged per kernel of an eager
    iteration (prefill or mixed) that runs adapter tokens (default: KERNEL_OVERHEAD_S of the engine's
    punica era); `graph_kernel_overhead_s`: the same for a decode-only iteration replayed as a CUDA
    graph (default GRAPH_KERNEL_OVERHEAD_S)."""

    enabled: bool = True
    max_loras: int = Field(default=1, ge=1, le=MAX_LORAS)
    max_lora_rank: int = Field(default=16, ge=1, le=max(LORA_RANKS))
    max_cpu_loras: int | None = Field(default=None, ge=1, le=MAX_ADAPTERS)
    adapters: list[AdapterEntry] = Field(default_factory=list, max_length=MAX_ADAPTERS)
    base_fraction: float = Field(default=0.0, ge=0, le=1)
    disk_bandwidth_gbps: float | None = Field(default=None, gt=1e-3, le=1e6)
    kernel_overhead_s: float | None = Field(default=None, ge=0, le=MAX_SECONDS)
    graph_kernel_overhead_s: float = Field(default=GRAPH_KERNEL_OVERHEAD_S, ge=0, le=MAX_SECONDS)

    @model_validator(mode="after")
    def _check(self) -> LoraConfig:
        if self.max_lora_rank not in LORA_RANKS:
            raise ValueError(f"max_lora_rank: {self.max_lora_rank} is not one of vLLM's ranks "
                             f"({', '.join(map(str, LORA_RANKS))})")
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(f"max_cpu_loras ({self.max_cpu_loras}) must be >= max_loras ({self.max_loras}), "
                             "as vLLM requires")
        total = 0
        names: set[str] = set()
        weight = 0.0
        for i, a in enumerate(self.adapters):
            if a.rank > self.max_lora_rank:
                raise ValueError(f"adapters.{i}.rank: {a.rank} exceeds max_lora_rank ({self.max_lora_rank})")
            if isinstance(a, AdapterGroup):
                total += a.count
                weight += 1.0
                if total > MAX_ADAPTERS:
                    break
                batch = [f"{a.prefix}{j}" for j in range(a.count)]
            else:
                total += 1
                weight += a.popularity
                batch = [a.name]
            for name in batch:
                if name in names:
                    raise ValueError(f"adapters.{i}: the name '{name}' names two adapters")
                names.add(name)
        if total > MAX_ADAPTERS:
            raise ValueError(f"adapters: {total} adapters in all, more than {MAX_ADAPTERS}")
        if self.adapters and weight <= 0 and self.base_fraction < 1:
            raise ValueError("adapters: every popularity is 0; give one a weight or set base_fraction: 1")
        return self

    @property
    def cpu_loras(self) -> int:
        """max_cpu_loras, or max_loras where it is unset (vLLM's default)."""
        return self.max_cpu_loras if self.max_cpu_loras is not None else self.max_loras
