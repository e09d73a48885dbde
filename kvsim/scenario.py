"""The scenario schema (pydantic), YAML loading, `--set` overrides, the cross-field rules and one-line
validation errors. Numbers and their bounds: kvsim/schema.py."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from kvsim import aliases, inputs
from kvsim.errors import KvsimError, excerpt
from kvsim.kvcache.sparsity.config import SparsityConfig
from kvsim.lora.config import LoraConfig
from kvsim.registry import (
    COST_MODELS,
    EVICTION_POLICIES,
    KV_TRANSFER_MODES,
    LAYOUTS,
    PREEMPTION,
    PREFIX_CACHES,
    REPLICA_ROLES,
    ROLES,
    ROUTERS,
    SCHEDULER_POLICIES,
    TIER_EVICTION,
    TIER_LOAD,
    TIER_MEDIA,
    TIER_STORE,
)
from kvsim.schema import MAX_COUNT, MAX_REQUESTS, MAX_SECONDS, MAX_TOKENS, Strict, check_slo
from kvsim.specs.dtypes import QUANTIZATION
from kvsim.specs.expert_parallel import ALL2ALL_BACKENDS, DEFAULT_ALL2ALL_BACKEND
from kvsim.specs.kv_precision import schema_kv_dtype
from kvsim.speculative.config import SpeculativeConfig
from kvsim.workload.config import WorkloadConfig

MAX_GIB = 1e6
"""Largest memory size in GiB (swap space, activation reserve): a PiB."""
MAX_GPU_BLOCKS = 2**30
"""Most KV blocks of all replicas together. Pools keep state only for blocks handed out
(kvsim/kvcache/block_pool.py), so the bound is on the ids, not on memory."""

# Choice fields take the names of the registries (kvsim/registry.py), in their order: a bad name is
# pydantic's one-line "Input should be 'a', 'b' or 'c'".
Layout = Literal[tuple(LAYOUTS)]
PrefixCache = Literal[tuple(PREFIX_CACHES)]
Eviction = Literal[tuple(EVICTION_POLICIES)]
Preemption = Literal[tuple(PREEMPTION)]
SchedulerPolicy = Literal[tuple(SCHEDULER_POLICIES)]
CostModelName = Literal[tuple(COST_MODELS)]
TierMedium = Literal[tuple(TIER_MEDIA)]
TierEviction = Literal[tuple(TIER_EVICTION)]
TierStore = Literal[tuple(TIER_STORE)]
TierLoad = Literal[tuple(TIER_LOAD)]
RouterName = Literal[tuple(ROUTERS)]
ReplicaRole = Literal[tuple(REPLICA_ROLES)]
Quantization = Literal[tuple(QUANTIZATION)]
TransferMode = Literal[tuple(KV_TRANSFER_MODES)]
All2AllBackend = Literal[tuple(ALL2ALL_BACKENDS)]
MAX_TIER_GB = 1e9
"""A tier of at most 10^9 GB (an exabyte)."""


def _one_of(data: Any, a: str, b: str) -> Any:
    """Two names for one key: refuse both at once."""
    if isinstance(data, dict) and a in data and b in data:
        raise ValueError(f"give {a} or {b} (the same number), not both")
    return data


class Parallelism(Strict):
    """tensor_parallel_size: GPUs one replica's weights and KV are split across. replicas (or vLLM's name,
    data_parallel_size): identical engine replicas behind the router (`router:`). Each at most 1024. For
    pools of different replicas use `cluster:`. enable_expert_parallel and the keys after it: vLLM's expert
    parallelism over tensor_parallel_size x data_parallel_size GPUs (docs/moe.md)."""


    tensor_parallel_size: int = Field(default=1, ge=1, le=1024)
    replicas: int = Field(default=1, ge=1, le=1024,
                          validation_alias=AliasChoices("replicas", "data_parallel_size"))
    enable_expert_parallel: bool = False
    """vLLM's --enable-expert-parallel: the routed experts split over EP = tensor_parallel_size x
    data_parallel_size GPUs, each DP rank (replica) an engine with its own scheduler and KV cache, the DP
    ranks stepping together through the MoE layers (docs/moe.md)."""
    expert_parallel_size: int | None = Field(default=None, ge=1, le=1024 * 1024)
    """The EP size vLLM derives (tensor_parallel_size x data_parallel_size); optional, checked."""
    all2all_backend: All2AllBackend = DEFAULT_ALL2ALL_BACKEND
    """vLLM's --all2all-backend: how the MoE dispatch and combine move tokens (docs/moe.md)."""
    expert_load_factor: float = Field(default=1.0, ge=1.0, le=1024.0)
    """Routing skew: the busiest EP rank's routed tokens over the mean (1: balanced; vLLM's EPLB logs
    balancedness = mean / max, so 1 / balancedness)."""

    @model_validator(mode="before")
    @classmethod
    def _one_name(cls, data: Any) -> Any:
        return _one_of(data, "replicas", "data_parallel_size")


MIN_LINK_GBPS = 1e-3
"""The slowest link a tier or KV transfer may name: 1 MB/s (a slower one is a typo whose transfers would
take longer than any run, e.g. 1e-300 GB/s: ~1e299 s a block)."""


class TierConfig(Strict):
    """One KV tier below the GPU (docs/tiers.md): its medium, capacity in GB (10^9 bytes), eviction
    policy, and optionally its link (bandwidth in GB/s, at least MIN_LINK_GBPS, latency in s; default: the
    hardware profile's host link for cpu, its SSD bandwidth for ssd, none for remote: a remote tier needs
    them). A cpu tier's link is the host link: its bandwidth and latency, where set, are the host link's
    for every tier's loads."""

    medium: TierMedium
    capacity_gb: float = Field(ge=0, le=MAX_TIER_GB)
    eviction: TierEviction = "lru"
    bandwidth_gbps: float | None = Field(default=None, ge=MIN_LINK_GBPS, le=1e6)
    latency_s: float = Field(default=0.0, ge=0, le=MAX_SECONDS)
    shared: bool = False
    """remote only: one store shared by every replica (the fleet issue builds on it)."""


class KVConfig(Strict):
    """KV cache: block_size tokens per block, KV dtype, the fraction of GPU memory the engine may use
    (gpu_memory_utilization, as in vLLM), CPU swap space per GPU in GiB (swap_space_gb, vLLM's name and
    unit), the activation reserve in GiB (default max(1 GiB, 5% of GPU memory)), the free-block watermark
    for admission, and the runtime invariant check mode."""

    block_size: int = Field(default=16, ge=1, le=4096)
    dtype: Annotated[str | dict[str, Any], BeforeValidator(schema_kv_dtype)] = "bf16"
    """KV precision (kvsim/specs/kv_precision.py, docs/specs.md): vLLM's kv_cache_dtype names (auto, fp8,
    fp8_e4m3, fp8_e5m2), fp32, fp16, bf16, int8, int4, nvfp4; a quantized format {bits, group_size,
    scale_bits}; or per-part {rope: ..., rest: ...}. Stored in canonical form."""
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    swap_space_gb: float = Field(default=4.0, ge=0, le=MAX_GIB)
    """At most 10^6 GiB."""
    activation_reserve_gib: float | None = Field(default=None, ge=0, le=MAX_GIB)
    """At most 10^6 GiB."""
    watermark: float = Field(default=0.01, ge=0, lt=1)
    num_gpu_blocks_override: int | None = Field(default=None, ge=1, le=MAX_GPU_BLOCKS)
    """Pool size in blocks instead of the computed capacity; all replicas together hold at most 2^24
    blocks."""
    check_invariants: bool = False
    disable_hybrid_kv_cache_manager: bool = False
    """vLLM's engine argument of that name: allocate sliding-window layers as full attention (every token
    kept; they still attend only their window). Default: the hybrid manager, per layer group."""
    sparsity: SparsityConfig = Field(default_factory=SparsityConfig)
    """Token-level KV eviction or offload (StreamingLLM, H2O, ...). See docs/sparsity.md."""
    layout: Layout = "paged"
    """paged (PagedAttention blocks) or a contiguous per-sequence reservation: max_model_len (max), prompt
    + next power of two of the output (pow2), prompt + output (oracle). See docs/layouts.md."""
    placement: Literal["first_fit", "best_fit", "buddy"] = "first_fit"
    """Where a contiguous layout puts a new region: the lowest-addressed or the smallest hole that fits, or
    a binary buddy allocator (regions rounded up to a power of two; the Orca baselines' allocator)."""
    prefix_cache: PrefixCache = "none"
    """Prefix caching (paged layout): none, hash (vLLM automatic prefix caching: chained block hashes) or
    radix (SGLang RadixAttention: radix tree, leaf eviction). See docs/prefix_cache.md."""
    eviction: Eviction = "lru"
    """Which cached, unreferenced block (radix: leaf) goes first when the pool runs out; the registry is
    kvsim/kvcache/eviction.py. length: keep the blocks early in prompts longest."""
    tiers: list[TierConfig] = Field(default_factory=list, max_length=3)
    """KV tiers below the GPU cache, top down: cpu, then ssd, then remote, each at most once
    (docs/tiers.md). Needs prefix_cache: hash."""
    tier_placement: Literal["exclusive", "inclusive"] = "exclusive"
    tier_store: TierStore = "write_back"
    tier_load: TierLoad = "blocking"
    tier_chunk_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    """Tokens per stored / matched chunk (LMCache: 256); a multiple of block_size; default one block."""
    tier_store_min_uses: int = Field(default=1, ge=1, le=MAX_COUNT)
    """Store filter: a block goes down only from its n-th offer on (2: blocks seen twice)."""


class SchedulerConfig(Strict):
    """vLLM-style continuous batching limits and preemption mode. Sequences at most 10^6, tokens at most
    10^9. `policy`: the scheduler variant (docs/engine.md "Scheduler policies"); left out of the resolved
    scenario when it is the default, vllm_v1."""

    max_num_seqs: int = Field(default=256, ge=1, le=MAX_COUNT)
    max_num_batched_tokens: int = Field(default=8192, ge=1, le=MAX_TOKENS)
    chunked_prefill: bool = True
    preemption_mode: Preemption = "recompute"
    max_model_len: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    policy: SchedulerPolicy = "vllm_v1"

    @model_validator(mode="after")
    def _check(self) -> SchedulerConfig:
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError("max_num_batched_tokens must be >= max_num_seqs")
        return self


class CostConfig(Strict):
    """Which cost model advances time (`auto`: kernels where the hardware has kernel tables, else roofline),
    and the roofline's tunables. The overhead defaults are the fitted ones of kvsim/cost/roofline.py
    (ITERATION_OVERHEAD_S, ...; docs/cost_model.md), tests check they agree; the kernel model has its own
    (KERNEL_DEFAULTS in kvsim/cost/kernels.py) for the keys a scenario leaves unset."""

    model: CostModelName = "auto"
    iteration_overhead_s: float | None = Field(default=None, ge=0, le=3600)
    """Fixed (CPU) seconds per iteration, whatever the batch, at most 3600. None (every overhead key): the
    chosen cost model's own fitted default (roofline: ITERATION_OVERHEAD_S ... in kvsim/cost/roofline.py;
    kernels: KERNEL_DEFAULTS in kvsim/cost/kernels.py): a scenario echoed with its defaults reruns alike."""
    layer_overhead_s: float | None = Field(default=None, ge=0, le=1)
    """Seconds per layer per iteration of a decode-only batch (CUDA graphs)."""
    eager_layer_overhead_s: float | None = Field(default=None, ge=0, le=1)
    """Seconds per layer per iteration of a batch with prefill tokens (eager launches)."""
    seq_overhead_s: float | None = Field(default=None, ge=0, le=1)
    """Seconds per sequence in the batch per iteration (sampling, scheduling)."""
    request_overhead_s: float | None = Field(default=None, ge=0, le=60)
    """Seconds from a request's arrival until the engine may schedule it (the serving front end), once per
    request: in every TTFT and E2E latency, in no iteration. Set 0 for offline LLM.generate runs."""
    gemm_efficiency_max: float = Field(default=0.75, gt=0, le=1)
    gemm_efficiency_m_half: float = Field(default=64.0, gt=0, le=MAX_TOKENS)
    bandwidth_efficiency: float = Field(default=0.85, gt=0, le=1)
    attention_efficiency: float = Field(default=0.5, gt=0, le=1)


UsdPerHour = Annotated[float, Field(ge=0, le=1e6)]


class Pricing(Strict):
    """What a GPU-hour costs (kvsim/metrics/cost.py): one price for every GPU of the run, or a price per
    hardware profile name; a GPU without one takes its profile's `usd_per_gpu_hour`."""

    usd_per_gpu_hour: UsdPerHour | dict[str, UsdPerHour] | None = None

    def price(self, hardware: str, profile_price: float) -> tuple[float, str]:
        """(USD per GPU-hour, where it comes from) for a GPU of `hardware`."""
        p = self.usd_per_gpu_hour
        if isinstance(p, dict) and hardware in p:
            return p[hardware], f"pricing.usd_per_gpu_hour.{hardware}"
        if isinstance(p, (int, float)):
            return float(p), "pricing.usd_per_gpu_hour"
        return profile_price, f"hardware profile {hardware}"


class RouterConfig(Strict):
    """Which replica a request goes to (docs/fleet.md): `policy` for mixed or prefill replicas, and
    `decode_policy` for the decode replica a prefill hands its KV to (P/D). load_weight: what a unit of
    load costs prefix_aware / store_aware against a whole prompt's overlap; load_metric: queue (waiting +
    running requests) or kv (KV usage); store_weight: what a token in the shared store counts
    (store_aware)."""

    policy: RouterName = "round_robin"
    decode_policy: RouterName = "least_loaded"
    load_weight: float = Field(default=1.0, ge=0, le=1e6)
    load_metric: Literal["queue", "kv"] = "queue"
    store_weight: float = Field(default=0.5, ge=0, le=1)


DEFAULT_ROUTER = RouterConfig()
"""The routers of a scenario without `router` (kvsim/engine/cluster.py), and build_router's defaults."""


class PoolConfig(Strict):
    """One pool of identical replicas: `data_parallel_size` replicas (vLLM's name) of `role`, each on
    `tensor_parallel_size` GPUs of `hardware` (defaults: the scenario's), with `kv` and `scheduler` keys
    overriding the scenario's for this pool only."""

    name: str | None = Field(default=None, min_length=1, max_length=64)
    role: ReplicaRole = "mixed"
    data_parallel_size: int = Field(default=1, ge=1, le=1024, validation_alias=AliasChoices(
        "data_parallel_size", "replicas"))
    hardware: str | dict[str, Any] | None = None
    tensor_parallel_size: int | None = Field(default=None, ge=1, le=1024)
    kv: dict[str, Any] = Field(default_factory=dict)
    scheduler: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _one_name(cls, data: Any) -> Any:
        return _one_of(data, "data_parallel_size", "replicas")


class KVTransferConfig(Strict):
    """How a prefill replica's KV reaches a decode replica (docs/fleet.md): `mode` after_prefill or
    layerwise; `link` nvlink (both in one node: the profile's interconnect bandwidth) or network (RDMA:
    the profile's network bandwidth per GPU); `bandwidth_gbps` per GPU (GB/s) overrides the profile;
    `latency_s` per transfer."""

    mode: TransferMode = "after_prefill"
    link: Literal["network", "nvlink"] = "network"
    bandwidth_gbps: float | None = Field(default=None, ge=MIN_LINK_GBPS, le=1e6)
    latency_s: float = Field(default=1e-5, ge=0, le=MAX_SECONDS)


class ClusterConfig(Strict):
    """A fleet of replica pools (heterogeneous hardware, parallelism, KV settings; prefill / decode
    roles) and the KV link between prefill and decode replicas."""

    pools: list[PoolConfig] = Field(min_length=1, max_length=64)
    kv_transfer: KVTransferConfig = Field(default_factory=KVTransferConfig)


class Simulation(Strict):
    """seed: the one RNG seed. requests: how many requests to generate; duration_s: stop admitting
    arrivals after this simulated time (whichever limit is hit first); each in-flight request still runs."""

    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    requests: int | None = Field(default=2000, ge=1, le=MAX_REQUESTS)
    """At most 10^7: the request list is built up front."""
    duration_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    """At most 10^9 s; without `requests`, its arrivals count against the 10^7 request bound."""
    exact_stepping: bool = False
    """Reference mode: every iteration goes through the event loop and the scheduler's general path.
    By default a replica runs consecutive iterations that nothing else can observe (no other event before
    they end, no request finishing) without the event loop, and decode-only iterations by a short path;
    the outputs are the same byte for byte (tests/engine/test_exact_stepping.py). Not echoed in
    summary.json's scenario: it changes how, not what, kvsim computes."""

    @model_validator(mode="after")
    def _check(self) -> Simulation:
        if self.requests is None and self.duration_s is None:
            raise ValueError("set 'requests' or 'duration_s'")
        return self


class Scenario(Strict):
    """Everything one simulated run needs. Every key has a default."""

    name: str = Field(default="default", max_length=256)
    model: str | dict[str, Any] = "llama-3-8b"
    quantization: Quantization | None = None
    """The weights' format, vLLM's `--quantization` by the format it stores: none, fp8, fp8_block (FP8
    with 128 x 128 block scales), nvfp4 or mxfp4; unset: the model's own (its config's
    quantization_config or dtype). Sets the weight bytes (so the KV capacity) and the GEMMs' precision;
    the KV dtype is kv.dtype's."""
    hardware: str | dict[str, Any] = "h100-sxm"
    parallelism: Parallelism = Field(default_factory=Parallelism)
    kv: KVConfig = Field(default_factory=KVConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    cost: CostConfig = Field(default_factory=CostConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    simulation: Simulation = Field(default_factory=Simulation)
    slo: dict[str, Any] | None = None
    """Service-level objectives, metric -> {pNN: seconds}, e.g. {ttft_s: {p99: 2.0}, tpot_s: {p90: 0.05}}
    (checked by kvsim/schema.py, evaluated by kvsim/metrics/slo.py): requests get `meets_slo`, the
    summary `slo` and `goodput`."""
    pricing: Pricing | None = None
    """GPU-hour prices overriding the hardware profiles' (summary `cost`)."""
    router: RouterConfig | None = None
    """Default: round_robin (and least_loaded for decode replicas)."""
    cluster: ClusterConfig | None = None
    """Pools of replicas; without it, parallelism.replicas mixed replicas of the scenario's hardware."""
    speculative: SpeculativeConfig | None = None
    """Speculative decoding (vLLM's speculative_config: ngram, eagle, eagle3, mtp, draft_model). See
    docs/speculative.md."""
    lora: LoraConfig | None = None
    """Multi-LoRA serving (vLLM's enable_lora, max_loras, max_lora_rank, max_cpu_loras; docs/lora.md)."""
    _base_dir: str | None = PrivateAttr(default=None)

    @field_validator("slo", mode="before")
    @classmethod
    def _check_slo(cls, value: Any) -> Any:
        return None if value is None else check_slo(value)

    @property
    def base_dir(self) -> str | None:
        """Folder of the scenario file: relative workload paths resolve against it first."""
        return self._base_dir


def _subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


_MODEL_NAMES = frozenset(c.__name__ for c in _subclasses(Strict))
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "none", "constrained-float", "constrained-int"})


def _format_validation_error(err: ValidationError, source: str, model: type = None) -> str:
    first = err.errors(include_url=False)[0]
    loc = ".".join(_loc_part(p) for p in first["loc"] if not _union_tag(p)) or "<root>"
    msg = first["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if first["type"] == "extra_forbidden":
        *parents, key = first["loc"]  # (the last part is the user's key, whatever it looks like)
        names = _key_names(model or Scenario, [p for p in parents if not _union_tag(p)])
        msg = "unknown key" + aliases.did_you_mean(str(key), names)
    elif first["type"] == "literal_error":
        expected = re.findall(r"'([^']*)'", str((first.get("ctx") or {}).get("expected", "")))
        got = first.get("input")
        if isinstance(got, str) and expected:
            msg += aliases.did_you_mean(got, expected)
    return f"{source}: {loc}: {_one_line(msg)}"


def _key_names(model: type, path: list[Any]) -> list[str]:
    """The keys a mapping at `path` (loc parts below `model`) takes: its fields and their other names, and
    at the top level and in the kv / scheduler / parallelism sections vLLM's names (kvsim/aliases.py)."""
    for part in path:
        if isinstance(part, int):
            continue
        info = getattr(model, "model_fields", {}).get(part)
        inner = None if info is None else _model_in(info.annotation)
        if inner is None:
            return []
        model = inner
    names: list[str] = []
    for name, info in getattr(model, "model_fields", {}).items():
        names.append(name)
        alias = info.validation_alias
        names += [str(c) for c in getattr(alias, "choices", ()) if isinstance(c, str)]
    if model is Scenario:
        names += ["engine", *aliases.ENGINE_ALIASES]
    else:
        section = next((k for k, f in Scenario.model_fields.items() if _model_in(f.annotation) is model),
                       None)
        if section in aliases.SECTIONS:
            names += [n for n, (key, _) in aliases.ENGINE_ALIASES.items() if key.startswith(section + ".")]
    return names


def _model_in(annotation: Any) -> type | None:
    """The schema model an annotation holds (through Optional, list, Annotated), or None."""
    if isinstance(annotation, type) and issubclass(annotation, Strict):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _union_tag(part: Any) -> bool:
    """Whether a loc part names a member of a union field (pydantic puts 'LengthDist', 'float',
    'function-after[...]' there) rather than a key of the user's input."""
    if not isinstance(part, str):
        return False
    return part in _UNION_TAGS or "[" in part or part in _MODEL_NAMES


def _loc_part(part: Any) -> str:
    return _key_text(str(part), ".")


def _key_text(text: str, special: str = "") -> str:
    """A key as typed when short and plain, else quoted (a key, too, is user input)."""
    plain = 0 < len(text) <= 60 and text.isprintable() and not any(
        c.isspace() or c in special or c in ":'\"" for c in text)
    return text if plain else excerpt(text)


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def yaml_text(value: Any) -> str:
    """value as one line of YAML that parse_value reads back as value (a quoted '123' stays a string)."""
    return yaml.safe_dump(value, default_flow_style=True, width=2**31).removesuffix("\n...\n").strip()


def set_items(values: Iterable[tuple[str, Any]]) -> list[str]:
    """--set items (KEY=VALUE) that give each dotted key its value, as apply_overrides reads them; a value
    YAML cannot write (a Python object, a mapping nested past the recursion limit) is a one-line error."""
    items = []
    for k, v in values:
        try:
            items.append(f"{k}={yaml_text(v)}")
        except (yaml.YAMLError, RecursionError, TypeError, ValueError):
            where = k if isinstance(k, str) and k.isprintable() and len(k) <= 60 else excerpt(str(k))
            raise KvsimError(f"{where}: a Python {type(v).__name__} is not a scenario value (numbers, "
                             "strings, booleans, None, lists and mappings of them)") from None
    return items


def parse_value(text: str, source: str = "--set") -> Any:
    """Parse a --set value as YAML (so 32 is an int, true a bool, [a, b] a list), with the bounds of
    kvsim.inputs (finite numbers, depth, alias expansion, no duplicate keys): a value that breaks one is a
    one-line error naming `source`. Text that is not YAML at all stays text (the schema then says what it
    expected)."""
    if inputs.max_nesting(text) > inputs.MAX_DEPTH:  # flow style: refused before the parser recurses
        raise KvsimError(f"{source}: nesting deeper than {inputs.MAX_DEPTH} levels")
    try:
        return inputs.parse_yaml(text, source)
    except KvsimError as exc:
        if not _is_yaml(text):
            return text
        msg = str(exc)
        for prefix in (f"{source}:1: ", f"{source}: "):
            msg = msg.removeprefix(prefix)
        raise KvsimError(f"{source}: {msg}") from None


def _is_yaml(text: str) -> bool:
    """Whether text is well-formed YAML (composing builds no aliases' copies, so it is linear in text)."""
    try:
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError:  # a character YAML does not allow
        return False
    try:
        loader.get_single_node()
        return True
    except yaml.YAMLError:
        return False
    except RecursionError:
        return True
    finally:
        loader.dispose()


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str = "--set") -> dict[str, Any]:
    """Apply `a.b.c=value` overrides to a nested dict (in place) and return it. Missing (or null) mappings
    on the way are created; a list is entered by index (workload.mix.0.weight); any other value on the
    way is an error, as is an empty part (a..b)."""
    for item in overrides:
        if "=" not in item:
            raise KvsimError(f"{source} {excerpt(item)}: expected KEY=VALUE, e.g. kv.block_size=32")
        key, _, raw = item.partition("=")
        parts = key.strip().split(".")
        if not any(parts):
            raise KvsimError(f"{source} {excerpt(item)}: empty key")
        if not all(parts):
            raise KvsimError(f"{source} {excerpt(item)}: empty part in key {excerpt(key.strip())}")
        node: Any = data
        for i, part in enumerate(parts):
            where = f"{source} {excerpt(item)}: {_key_text('.'.join(parts[:i + 1]))}"
            if i == len(parts) - 1:
                _drop_second_name(node, parts)
                _assign(node, part, parse_value(raw, f"{source} {excerpt(item)}"), where)
            else:
                node = _step(node, part, where)
    return data


def set_key(data: dict[str, Any], key: str, value: Any, source: str = "override") -> None:
    """Set dotted `key` of a nested scenario dict to a Python value (mappings on the way created, list
    items entered by index, as for --set); a one-line error naming the key otherwise."""
    parts = key.split(".")
    if not all(parts):
        raise KvsimError(f"{source} {excerpt(key)}: empty part in key")
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        node = _step(node, part, f"{source} {excerpt(key)}: {_key_text('.'.join(parts[:i + 1]))}")
    _drop_second_name(node, parts)
    _assign(node, parts[-1], value, f"{source} {excerpt(key)}")


SECOND_NAMES = {"replicas": "data_parallel_size", "data_parallel_size": "replicas"}
"""Keys with two names in one mapping (parallelism, a cluster pool): an override of either replaces the
value under whichever name the scenario used (kvsim plan's parallelism.replicas on a scenario that says
data_parallel_size), rather than giving both."""


def _drop_second_name(node: Any, parts: list[str]) -> None:
    """Before `parts` (a dotted key) is set in `node`: remove the key's other name from it."""
    other = SECOND_NAMES.get(parts[-1])
    in_section = parts[:-1] == ["parallelism"] or (len(parts) == 4 and parts[:2] == ["cluster", "pools"])
    if other is not None and in_section and isinstance(node, dict):
        node.pop(other, None)


def _step(node: dict | list, part: str, where: str) -> dict | list:
    """The child `part` of node, creating a mapping when it is missing or null."""
    if isinstance(node, list):
        nxt = node[_index(node, part, where)]
    else:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
    if not isinstance(nxt, (dict, list)):
        raise KvsimError(f"{where}: is {excerpt(nxt)}, not a mapping")
    return nxt


def _assign(node: dict | list, part: str, value: Any, where: str) -> None:
    if isinstance(node, list):
        node[_index(node, part, where)] = value
    else:
        node[part] = value


def _index(node: list, part: str, where: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise KvsimError(f"{where}: a list of {len(node)} items takes an index 0..{len(node) - 1}")
    return int(part)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, with a one-line error naming the file and line on failure (bounded reading:
    kvsim/inputs.py)."""
    p = Path(path)
    data = inputs.parse_yaml(inputs.read_text(p, "scenario file"), str(p))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KvsimError(f"{p}: top level must be a mapping of sections")
    return data


def build_scenario(data: dict[str, Any], source: str = "scenario") -> Scenario:
    """Validate a scenario dict: vLLM's engine-argument names moved to kvsim's keys (kvsim/aliases.py), the
    schema, then the rules across sections (`cross_check`)."""
    data = aliases.normalize(data, source)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as err:
        raise KvsimError(_format_validation_error(err, source)) from None
    problem = cross_check(scenario)
    if problem is not None:
        raise KvsimError(f"{source}: {problem}")
    pool_scenarios(scenario, source)  # each pool's keys, checked now
    return scenario


def cross_check(sc: Scenario) -> str | None:
    """The first rule across sections the scenario breaks, as 'dotted.key: message', or None. These
    combinations would otherwise fail only when the run starts, or stall it."""
    kv = sc.kv
    rule = _tier_rule(kv) or _cluster_rule(sc) or _expert_parallel_rule(sc) or _lora_rule(sc)
    if rule:
        return rule
    if kv.prefix_cache != "none" and kv.layout != "paged":
        return f"kv.prefix_cache: '{kv.prefix_cache}' needs kv.layout: paged (got '{kv.layout}')"
    if kv.sparsity.enabled and kv.layout != "paged":
        return f"kv.sparsity.policy: '{kv.sparsity.policy}' needs kv.layout: paged (got '{kv.layout}')"
    if kv.sparsity.enabled and sc.scheduler.policy == "vllm_v0" and not sc.scheduler.chunked_prefill:
        return (f"kv.sparsity.policy: '{kv.sparsity.policy}' is not modelled with scheduler.policy: vllm_v0 "
                "without chunked prefill (prefill-only iterations); set scheduler.chunked_prefill: true")
    rule = _speculative_rule(sc)
    if rule:
        return rule
    for key, wl in _workloads(sc.workload):
        seqs = max(wl.n, wl.beam_width)
        field = "n" if wl.n >= wl.beam_width else "beam_width"
        if seqs > sc.scheduler.max_num_seqs:
            return (f"{key}.{field}: {seqs} sequences per request exceed scheduler.max_num_seqs "
                    f"({sc.scheduler.max_num_seqs}); a request's sequences are scheduled together")
        if kv.sparsity.enabled and seqs > 1:
            return (f"kv.sparsity.policy: '{kv.sparsity.policy}' does not model parallel sampling or beam "
                    "search (set workload.n and workload.beam_width to 1)")
    return None


def _speculative_rule(sc: Scenario) -> str | None:
    """What speculative decoding is not modelled with (docs/speculative.md), one line each."""
    if sc.speculative is None or not sc.speculative.enabled:
        return None
    kv, what = sc.kv, "speculative: speculative decoding is not modelled with"
    if sc.scheduler.policy != "vllm_v1":
        return f"{what} scheduler.policy: {sc.scheduler.policy} (vLLM V1's scheduler only; use vllm_v1)"
    if kv.layout != "paged":
        return f"{what} kv.layout: {kv.layout} (use kv.layout: paged)"
    if kv.sparsity.enabled:
        return f"{what} kv.sparsity.policy: {kv.sparsity.policy} (set kv.sparsity.policy: none)"
    if sc.cluster is not None and any(p.role != "mixed" for p in sc.cluster.pools):
        return f"{what} prefill / decode pools (cluster.pools roles other than mixed)"
    for key, wl in _workloads(sc.workload):
        if max(wl.n, wl.beam_width) > 1:
            return f"{what} parallel sampling or beam search ({key}.n, {key}.beam_width: set them to 1)"
        if wl.kind == "bench_serve":
            return (f"{what} {key}.kind: bench_serve (its ITL figures count one token per sequence and "
                    "iteration)")
    if lora_config(sc) is not None:
        return f"{what} lora (LoRA adapters' cost over the verify tokens; remove one of the sections)"
    return None


def _expert_parallel_rule(sc: Scenario) -> str | None:
    """The expert-parallel keys' rules that need the scenario alone (the model's: Deployment)."""
    par = sc.parallelism
    if not par.enable_expert_parallel:
        # (vLLM ignores all2all_backend; values, not the keys set: a dumped scenario has every default)
        for key, unset in (("expert_parallel_size", None), ("expert_load_factor", 1.0)):
            if getattr(par, key) != unset:
                return f"parallelism.{key}: needs parallelism.enable_expert_parallel: true"
        return None

    if sc.cluster is not None:
        return "parallelism.enable_expert_parallel: not modelled with cluster: pools"
    ep = par.tensor_parallel_size * par.replicas
    if par.expert_parallel_size is not None and par.expert_parallel_size != ep:
        return (f"parallelism.expert_parallel_size: {par.expert_parallel_size}, but vLLM derives EP ="
                f" tensor_parallel_size x data_parallel_size = {ep}; give {ep} or leave it out")
    if par.expert_load_factor > ep:
        return (f"parallelism.expert_load_factor: {par.expert_load_factor:g} exceeds EP = {ep} (the busiest"
                " rank receives at most every routed token)")
    return None


def _tier_rule(kv: KVConfig) -> str | None:
    if not kv.tiers:
        return None
    media = [t.medium for t in kv.tiers]
    order = list(TIER_MEDIA)
    for i, t in enumerate(kv.tiers):
        if t.medium in media[:i]:
            return f"kv.tiers.{i}.medium: '{t.medium}' appears twice (one tier per medium)"
        if i and order.index(t.medium) < order.index(media[i - 1]):
            return (f"kv.tiers.{i}.medium: '{t.medium}' after '{media[i - 1]}'; tiers go top down: "
                    + " -> ".join(order))
        if t.medium == "remote" and t.bandwidth_gbps is None:
            return f"kv.tiers.{i}.bandwidth_gbps: a remote tier needs its network bandwidth"
        if t.shared and t.medium != "remote":
            return f"kv.tiers.{i}.shared: only a remote tier is shared"
    if kv.prefix_cache != "hash":
        return (f"kv.tiers: tiers hold prefix-cache blocks by hash; set kv.prefix_cache: hash "
                f"(got '{kv.prefix_cache}')")
    if kv.tier_chunk_tokens is not None and kv.tier_chunk_tokens % kv.block_size:
        return (f"kv.tier_chunk_tokens: {kv.tier_chunk_tokens} is not a multiple of kv.block_size "
                f"({kv.block_size})")
    return None


def lora_config(sc: Scenario) -> LoraConfig | None:
    """The scenario's `lora` section when LoRA is on (set, and not `enabled: false`), else None."""
    lo = sc.lora
    return lo if lo is not None and lo.enabled else None


def _lora_rule(sc: Scenario) -> str | None:
    """What multi-LoRA serving is not modelled with (docs/lora.md)."""
    if lora_config(sc) is None:
        return None
    if sc.cluster is not None and any(ROLES[p.role].sends_kv or ROLES[p.role].receives_kv
                                      for p in sc.cluster.pools):
        return ("lora: LoRA adapters are not modelled with disaggregated prefill / decode (the adapter "
                "would have to be on both replicas); use role mixed pools")
    if sc.kv.layout != "paged":
        return f"lora: LoRA adapters are modelled with kv.layout: paged only (got '{sc.kv.layout}')"
    if sc.kv.sparsity.enabled:
        return (f"lora: LoRA adapters are not modelled with kv.sparsity.policy '{sc.kv.sparsity.policy}' "
                "(set one of them off)")
    return None


def _cluster_rule(sc: Scenario) -> str | None:
    """The fleet's rules: replicas set once, roles that make a fleet, what P/D does not model."""
    cl = sc.cluster
    if cl is None:
        return None
    if sc.parallelism.replicas != 1:
        return ("parallelism.replicas: with cluster: set each pool's replicas "
                "(cluster.pools[].data_parallel_size)")
    roles = [p.role for p in cl.pools]
    names = [p.name or f"pool{i}" for i, p in enumerate(cl.pools)]
    for i, n in enumerate(names):
        if n in names[:i]:
            return f"cluster.pools.{i}.name: '{n}' names two pools"
    if sum(p.data_parallel_size for p in cl.pools) > 1024:
        return "cluster.pools: more than 1024 replicas in all"
    kinds = [ROLES[r] for r in roles]
    if any(k.sends_kv or k.receives_kv for k in kinds):
        for i, k in enumerate(kinds):
            if not (k.sends_kv or k.receives_kv):
                return (f"cluster.pools.{i}.role: {k.name} replicas next to prefill / decode "
                        "pools are not modelled (give every pool role prefill or decode)")
        if not any(k.sends_kv for k in kinds):  # (every pool is decode: nothing prefills for them)
            i = next(i for i, k in enumerate(kinds) if k.receives_kv)
            return (f"cluster.pools.{i}.role: decode pool '{names[i]}' has no prefill pool feeding it "
                    "(disaggregated serving needs a pool of role prefill too; role mixed prefills and "
                    "decodes on one replica)")
        if not any(k.receives_kv for k in kinds):
            i = next(i for i, k in enumerate(kinds) if k.sends_kv)
            return (f"cluster.pools.{i}.role: prefill pool '{names[i]}' has no decode pool to hand its KV "
                    "to (disaggregated serving needs a pool of role decode too; role mixed prefills and "
                    "decodes on one replica)")
    return None


def pool_scenarios(sc: Scenario, source: str = "scenario") -> list[tuple[str, str, int, Scenario]]:
    """(name, role, replicas, the scenario one replica of the pool runs) per pool: the cluster's pools
    with their hardware, tensor parallelism and kv / scheduler keys applied, or the one pool of
    parallelism.replicas mixed replicas. A pool's bad key is a one-line error naming it."""
    if sc.cluster is None:
        return [("default", "mixed", sc.parallelism.replicas, sc)]
    out = []
    for i, p in enumerate(sc.cluster.pools):
        where = f"cluster.pools.{i}"
        own_kv = aliases.normalize_section("kv", dict(p.kv), f"{source}: {where}.kv")
        own_sched = aliases.normalize_section("scheduler", dict(p.scheduler), f"{source}: {where}.scheduler")
        kv = _validate_part(KVConfig, {**sc.kv.model_dump(), **own_kv}, source, f"{where}.kv")
        sched = _validate_part(SchedulerConfig, {**sc.scheduler.model_dump(), **own_sched}, source,
                               f"{where}.scheduler")
        par = Parallelism(tensor_parallel_size=p.tensor_parallel_size or sc.parallelism.tensor_parallel_size,
                          replicas=1)
        one = sc.model_copy(update={"kv": kv, "scheduler": sched, "parallelism": par,
                                    "hardware": p.hardware if p.hardware is not None else sc.hardware,
                                    "cluster": None})
        one._base_dir = sc._base_dir
        problem = cross_check(one)
        if problem is not None:
            if problem.startswith(("kv.", "scheduler.")):
                problem = f"{where}.{problem}"
            raise KvsimError(f"{source}: {problem}")
        out.append((p.name or f"pool{i}", p.role, p.data_parallel_size, one))
    return out


def _validate_part(model: type, data: dict, source: str, where: str):
    """model validated from data; an error reads 'source: where.key: message'."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        msg = _format_validation_error(err, "", model).removeprefix(": ")
        raise KvsimError(f"{source}: {where}.{msg}") from None


def _workloads(wl: WorkloadConfig) -> list[tuple[str, WorkloadConfig]]:
    """The workload and, for kind mix, each component, with its dotted key."""
    return [("workload", wl), *((f"workload.mix.{i}", c) for i, c in enumerate(wl.mix))]


def load_scenario(path: str | Path | None = None, overrides: list[str] | None = None,
                  seed: int | None = None) -> Scenario:
    """Load a scenario file (or the built-in default when path is None), apply overrides, validate."""
    data = load_yaml(path) if path is not None else {}
    source = str(path) if path is not None else "default scenario"
    data = aliases.normalize(data, source)  # (the file's vLLM names first: an override of kvsim's key wins)
    if overrides:
        apply_overrides(data, overrides)
    if seed is not None:
        data.setdefault("simulation", {})
        if not isinstance(data["simulation"], dict):
            raise KvsimError(f"{source}: simulation: must be a mapping")
        data["simulation"]["seed"] = seed
    return scenario_at(data, source, Path(path).parent if path is not None else None)


def scenario_at(data: dict[str, Any], source: str, base_dir: str | Path | None) -> Scenario:
    """build_scenario, then (given the folder the scenario comes from) relative workload paths resolved
    against that folder where they exist there, and the folder kept as `base_dir`."""
    scenario = build_scenario(data, source)
    if base_dir is not None:
        scenario = _resolve_paths(scenario, Path(base_dir))
        scenario._base_dir = str(base_dir)
    return scenario


def _resolve_paths(scenario: Scenario, base: Path) -> Scenario:
    """Make relative file paths in the workload relative to the scenario file's folder when they exist
    there, else leave them relative to the working directory."""
    tr = scenario.workload.trace
    if tr is not None and not Path(tr.path).is_absolute():
        cand = base / tr.path
        if _exists(cand):
            tr.path = str(cand)
    return scenario


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long, say: the reader reports it
        return False


def scenario_dict(scenario: Scenario) -> dict[str, Any]:
    """The resolved scenario as plain data (for summary.json); `router`, `cluster`, `slo`, `pricing`, `lora`,
    `speculative`, the expert-parallel keys of `parallelism`, `workload.length_pairs` and
    `workload.bench_serve` only when set, `scheduler.policy` only when not the default, never
    `simulation.exact_stepping` (the same results either way)."""
    data = scenario.model_dump(mode="json")
    for key in ("router", "cluster", "slo", "pricing", "lora"):
        if data[key] is None:
            del data[key]
    if data["scheduler"]["policy"] == "vllm_v1":
        del data["scheduler"]["policy"]
    del data["simulation"]["exact_stepping"]
    if data["speculative"] is None:  # (speculative decoding only when set)
        del data["speculative"]
    par = data["parallelism"]
    if not par["enable_expert_parallel"]:  # (the expert-parallel keys only with expert parallelism)
        for key in ("enable_expert_parallel", "expert_parallel_size", "all2all_backend",
                    "expert_load_factor"):
            del par[key]
    for workload in (data["workload"], *data["workload"]["mix"]):
        if workload["length_pairs"] is None:
            del workload["length_pairs"]
        if workload["bench_serve"] is None:
            del workload["bench_serve"]
    return data
