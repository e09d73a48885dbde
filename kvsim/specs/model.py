"""A transformer's architecture as far as serving cost needs it: KV bytes per token and per layer group,
weight bytes, FLOPs per token and per attended (query, key) pair, all per GPU under tensor parallelism.
The layer groups are built in kvsim/specs/groups.py, the FLOP and byte counts per step in
kvsim/specs/compute.py."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from kvsim.errors import KvsimError, excerpt
from kvsim.specs import compute, groups
from kvsim.specs.dtypes import DTYPE_BYTES, normalize_dtype
from kvsim.specs.kv_precision import KVPrecision, kv_precision
from kvsim.specs.layers import LayerGroup

ATTENTION_KINDS = ("mha", "gqa", "mqa", "mla")
LAYER_KINDS = ("full", "mla", "sliding", "state", "compressed", "none")
"""What one layer keeps: full attention KV (`mla`: an MLA model's latent, same as `full` there), a
sliding window, a recurrent state (Mamba-2, Gated DeltaNet), DeepSeek-V4 compressed entries, or nothing
(an MLP-only layer of a hybrid, Nemotron-H's `-`)."""
SSM_KINDS = ("mamba2", "gdn")
"""State-layer families: Mamba-2 (Nemotron-H, Bamba, ...) and Gated DeltaNet (Qwen3-Next)."""

MAX_DIM = 2**31
"""Largest layer count, width, head count, vocabulary, window or context length accepted (real models are
below 2**20 in each; the bound keeps every product of them a finite float)."""
MAX_PARAMS = 10**15
"""Largest num_params / active_params accepted (a thousand times the largest published models)."""

POSITIVE_DIMS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
                 "intermediate_size", "vocab_size", "max_position_embeddings")
"""Integer fields that must be >= 1 (and <= MAX_DIM)."""
OPTIONAL_DIMS = ("kv_lora_rank", "qk_rope_head_dim", "sliding_window_layers", "ssm_num_heads", "ssm_head_dim",
                 "ssm_state_size", "ssm_groups", "ssm_conv_kernel", "index_head_dim", "index_num_heads",
                 "index_topk", "num_experts", "experts_per_token", "moe_intermediate_size",
                 "num_shared_experts", "shared_expert_intermediate_size")
"""Integer fields that may be 0 (and are <= MAX_DIM)."""
COUNTS = ("num_params", "active_params")
"""Integer fields that must be >= 1 (and <= MAX_PARAMS)."""
SEQUENCES = ("layer_types", "compress_ratios")
"""Per-layer fields (a list in YAML / inline specs, a tuple here), one entry per layer."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One decoder-only model.

    num_params counts every parameter, both embedding matrices included (once when tied);
    active_params counts those used per token in the same way (= num_params for dense models,
    fewer for mixture-of-experts). attention is "mha" | "gqa" | "mqa" | "mla".

    MLA (DeepSeek-V2/V3) caches one latent of kv_lora_rank + qk_rope_head_dim values per layer and
    token instead of K and V; head_dim is then the per-head value dim (= qk_nope_head_dim in every
    DeepSeek MLA model).

    Which layer is which (`layer_kinds`): `layer_types` gives one of LAYER_KINDS per layer; without it,
    `compress_ratios` decides (ratio > 0: compressed, 0: sliding), else the first `sliding_window_layers`
    layers are sliding and the rest full (the older form; with layer_types, sliding_window_layers is the
    count of sliding layers). Sliding layers keep the last `sliding_window` tokens.

    State layers (`ssm_*`): Mamba-2 (ssm_kind mamba2: ssm_num_heads heads of ssm_head_dim, state size
    ssm_state_size, ssm_groups B/C groups, conv kernel ssm_conv_kernel) or Gated DeltaNet (gdn:
    ssm_num_heads value heads of ssm_head_dim, ssm_groups key heads of ssm_state_size dims); the state is
    kept at ssm_dtype ('auto': the activation dtype, as vLLM's mamba_cache_dtype auto).

    DeepSeek-V4 compressed attention (`compress_ratios`, one per layer): a layer with ratio m keeps one
    entry of kv_lora_rank + qk_rope_head_dim values per m tokens, and every layer the last sliding_window
    tokens uncompressed; layers at the smallest ratio (CSA) also keep index_head_dim indexer keys per
    entry and attend to the index_topk entries the indexer (index_num_heads heads) picks; larger ratios
    (HCA) attend to every entry.

    Mixture of experts (`num_experts` > 0): each MoE layer (`moe_layers`, the layer indices; empty: every
    layer) routes each token to `experts_per_token` (top-k) of `num_experts` routed experts of
    `moe_intermediate_size`, plus `num_shared_experts` shared experts every token runs, together one MLP
    of `shared_expert_intermediate_size` (their summed width); the other layers have the dense MLP of
    intermediate_size. The parameter counts stay num_params / active_params: one routed expert's
    parameters are derived from them (`expert_params`), never re-counted. A MoE spec without these
    fields (only active_params < num_params) is costed as before: every expert's weights streamed.

    Checked on construction (KvsimError, one line): every shape an integer (never a bool or a float)
    with 1 <= value <= MAX_DIM (the OPTIONAL_DIMS may be 0); 1 <= active_params <= num_params <=
    MAX_PARAMS; for mha / gqa / mqa num_kv_heads divides num_attention_heads, mha has as many KV heads
    as heads and mqa one; per-layer fields have num_layers entries and agree with each other; each
    layer kind has what it needs (a window, the state shapes, a compress ratio); experts: both or neither
    of num_experts and experts_per_token, 1 <= experts_per_token <= num_experts, moe_intermediate_size
    >= 1, shared experts with a width, moe_layers distinct increasing indices < num_layers; name, attention,
    weight_dtype, ssm_kind, ssm_dtype and source are strings, tie_word_embeddings a bool.
    """

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    num_params: int
    active_params: int
    attention: str
    max_position_embeddings: int
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    sliding_window: int | None = None
    sliding_window_layers: int = 0
    layer_types: tuple[str, ...] = ()
    ssm_kind: str = ""
    ssm_num_heads: int = 0
    ssm_head_dim: int = 0
    ssm_state_size: int = 0
    ssm_groups: int = 0
    ssm_conv_kernel: int = 0
    ssm_dtype: str = "auto"
    compress_ratios: tuple[int, ...] = ()
    index_head_dim: int = 0
    index_num_heads: int = 0
    index_topk: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    moe_layers: tuple[int, ...] = ()
    weight_dtype: str = "bf16"
    tie_word_embeddings: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise KvsimError(f"model: name must be a string, got {excerpt(self.name)}")
        who = _label(self.name)
        for f in POSITIVE_DIMS:
            _require_int(who, f, getattr(self, f), 1, MAX_DIM)
        for f in OPTIONAL_DIMS:
            _require_int(who, f, getattr(self, f), 0, MAX_DIM)
        for f in COUNTS:
            _require_int(who, f, getattr(self, f), 1, MAX_PARAMS)
        for f in ("attention", "weight_dtype", "source", "ssm_kind", "ssm_dtype"):
            if not isinstance(getattr(self, f), str):
                raise KvsimError(f"{who}: {f} must be a string, got {excerpt(getattr(self, f))}")
        if not isinstance(self.tie_word_embeddings, bool):
            raise KvsimError(f"{who}: tie_word_embeddings must be true or false,"
                             f" got {excerpt(self.tie_word_embeddings)}")
        if self.attention not in ATTENTION_KINDS:
            raise KvsimError(f"{who}: attention must be one of {', '.join(ATTENTION_KINDS)},"
                             f" got {excerpt(self.attention)}")
        self._check_heads(who)
        if self.active_params > self.num_params:
            raise KvsimError(f"{who}: active_params exceeds num_params")
        if self.sliding_window is not None:
            _require_int(who, "sliding_window", self.sliding_window, 1, MAX_DIM)
        if self.sliding_window_layers > self.num_layers:
            raise KvsimError(f"{who}: sliding_window_layers ({self.sliding_window_layers})"
                             f" exceeds num_layers ({self.num_layers})")
        if self.sliding_window_layers and self.sliding_window is None:
            raise KvsimError(f"{who}: sliding_window_layers set without sliding_window")
        for f, dtype in (("weight_dtype", self.weight_dtype), ("ssm_dtype", self.ssm_dtype)):
            if f == "ssm_dtype" and dtype == "auto":
                continue
            try:
                canonical = normalize_dtype(dtype)
            except KvsimError as exc:
                raise KvsimError(f"{who}: {f}: {exc}") from None
            if canonical != dtype:
                object.__setattr__(self, f, canonical)
        self._check_layers(who)
        self._check_experts(who)

    def _check_experts(self, who: str) -> None:
        """The mixture-of-experts fields (class docstring)."""
        e, k = self.num_experts, self.experts_per_token
        if bool(e) != bool(k):
            raise KvsimError(f"{who}: num_experts ({e}) and experts_per_token ({k}) go together"
                             " (both or neither)")
        if k > e:
            raise KvsimError(f"{who}: experts_per_token ({k}) exceeds num_experts ({e})")
        if e and self.moe_intermediate_size < 1:
            raise KvsimError(f"{who}: num_experts needs moe_intermediate_size >= 1")
        if bool(self.num_shared_experts) != bool(self.shared_expert_intermediate_size):
            raise KvsimError(f"{who}: num_shared_experts ({self.num_shared_experts}) and"
                             f" shared_expert_intermediate_size ({self.shared_expert_intermediate_size})"
                             " go together (both or neither)")
        layers = self.moe_layers
        if isinstance(layers, list):
            layers = tuple(layers)
            object.__setattr__(self, "moe_layers", layers)
        if not isinstance(layers, tuple):
            raise KvsimError(f"{who}: moe_layers must be a list of layer indices, got {excerpt(layers)}")
        if layers and not e:
            raise KvsimError(f"{who}: moe_layers set without num_experts")
        last = -1
        for i, layer in enumerate(layers):
            if isinstance(layer, bool) or not isinstance(layer, int) or not last < layer < self.num_layers:
                raise KvsimError(f"{who}: moe_layers[{i}] must be a layer index above the one before it and"
                                 f" below num_layers ({self.num_layers}), got {excerpt(layer)}")
            last = layer

    def _check_heads(self, who: str) -> None:
        heads, kv = self.num_attention_heads, self.num_kv_heads
        if self.attention == "mla":
            if self.kv_lora_rank < 1:
                raise KvsimError(f"{who}: attention 'mla' needs kv_lora_rank >= 1")
            if kv > heads:
                raise KvsimError(f"{who}: num_kv_heads ({kv}) exceeds num_attention_heads ({heads})")
            return
        if kv > heads:
            raise KvsimError(f"{who}: num_kv_heads ({kv}) exceeds num_attention_heads ({heads})")
        if heads % kv:
            raise KvsimError(f"{who}: num_kv_heads ({kv}) must divide num_attention_heads ({heads})"
                             f" for {self.attention} attention")
        if self.attention == "mha" and kv != heads:
            raise KvsimError(f"{who}: mha attention needs num_kv_heads = num_attention_heads ({heads}),"
                             f" got {kv} (use gqa)")
        if self.attention == "mqa" and kv != 1:
            raise KvsimError(f"{who}: mqa attention needs num_kv_heads = 1, got {kv} (use gqa)")

    def _check_layers(self, who: str) -> None:
        """The per-layer fields: lengths, entries, and what each layer kind needs."""
        for f in SEQUENCES:
            value = getattr(self, f)
            if isinstance(value, list):
                value = tuple(value)
                object.__setattr__(self, f, value)
            if not isinstance(value, tuple):
                raise KvsimError(f"{who}: {f} must be a list (one entry per layer), got {excerpt(value)}")
            if value and len(value) != self.num_layers:
                raise KvsimError(f"{who}: {f} has {len(value)} entries, num_layers is {self.num_layers}")
        for i, kind in enumerate(self.layer_types):
            if kind not in LAYER_KINDS:
                raise KvsimError(f"{who}: layer_types[{i}] must be one of {', '.join(LAYER_KINDS)},"
                                 f" got {excerpt(kind)}")
        for i, ratio in enumerate(self.compress_ratios):
            if isinstance(ratio, bool) or not isinstance(ratio, int) or not 0 <= ratio <= MAX_DIM:
                raise KvsimError(f"{who}: compress_ratios[{i}] must be an integer >= 0 <= 2**31,"
                                 f" got {excerpt(ratio)}")
        if self.compress_ratios and self.layer_types:
            for i, (kind, ratio) in enumerate(zip(self.layer_types, self.compress_ratios, strict=True)):
                if (kind == "compressed") != (ratio > 0):
                    raise KvsimError(f"{who}: layer {i} is {kind} but its compress ratio is {ratio}"
                                     " (a layer is compressed exactly when its ratio is > 0)")
        by_kind = self.layers_by_kind()
        if self.layer_types or self.compress_ratios:
            sliding = len(by_kind.get("sliding", ()))
            if self.sliding_window_layers not in (0, sliding):
                raise KvsimError(f"{who}: sliding_window_layers ({self.sliding_window_layers}) differs from"
                                 f" the {sliding} sliding layers of layer_types")
            object.__setattr__(self, "sliding_window_layers", sliding)
        present = set(by_kind)
        if self.layer_types and present <= {"none"}:
            raise KvsimError(f"{who}: no layer holds KV or state (every layer_types entry is 'none'): "
                             "nothing for kvsim to size or time")
        if "sliding" in present and self.sliding_window is None:
            raise KvsimError(f"{who}: sliding layers need sliding_window")
        if "mla" in self.layer_types and self.attention != "mla":
            raise KvsimError(f"{who}: layer kind 'mla' needs attention 'mla'")
        if "state" in present:
            if self.ssm_kind not in SSM_KINDS:
                raise KvsimError(f"{who}: state layers need ssm_kind {' or '.join(SSM_KINDS)},"
                                 f" got {excerpt(self.ssm_kind)}")
            for f in ("ssm_num_heads", "ssm_head_dim", "ssm_state_size", "ssm_groups", "ssm_conv_kernel"):
                if getattr(self, f) < 1:
                    raise KvsimError(f"{who}: state layers need {f} >= 1")
        elif self.ssm_kind and self.ssm_kind not in SSM_KINDS:
            raise KvsimError(f"{who}: ssm_kind must be one of {', '.join(SSM_KINDS)},"
                             f" got {excerpt(self.ssm_kind)}")
        if "compressed" in present:
            if self.attention != "mla":
                raise KvsimError(f"{who}: compressed layers keep MLA-style entries: they need attention 'mla'"
                                 " (kv_lora_rank + qk_rope_head_dim values per entry)")
            if self.sliding_window is None:
                raise KvsimError(f"{who}: compressed layers need sliding_window (the uncompressed window)")
            if not self.compress_ratios:
                raise KvsimError(f"{who}: compressed layers need compress_ratios")
        if (self.index_head_dim or self.index_topk) and not self.compress_ratios:
            raise KvsimError(f"{who}: index_head_dim / index_topk belong to compressed (DeepSeek-V4) layers;"
                             " give compress_ratios")

    # ---- layers -------------------------------------------------------------------------
    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """One of LAYER_KINDS per layer (see the class docstring for how it is derived)."""
        if self.layer_types:
            return self.layer_types
        if self.compress_ratios:
            return tuple("compressed" if r else "sliding" for r in self.compress_ratios)
        n = self.sliding_window_layers
        return ("sliding",) * n + ("full",) * (self.num_layers - n)

    def layers_by_kind(self) -> dict[str, Sequence[int]]:
        """Layer kind -> the indices of its layers (kinds present only, in LAYER_KINDS order; 'mla' layers
        count as 'full'). A range for the older sliding_window_layers form (no per-layer list is built, so
        a spec of 2**31 layers stays cheap), tuples otherwise."""
        if not (self.layer_types or self.compress_ratios):
            n = self.sliding_window_layers
            runs = {"full": range(n, self.num_layers), "sliding": range(0, n)}
            return {k: runs[k] for k in LAYER_KINDS if k in runs and len(runs[k])}
        out: dict[str, list[int]] = {}
        for i, kind in enumerate(self.layer_kinds):
            out.setdefault("full" if kind == "mla" else kind, []).append(i)
        return {k: tuple(out[k]) for k in LAYER_KINDS if k in out}

    def kv_precision(self, kv_dtype: Any) -> KVPrecision:
        """kv_dtype (a name, a mapping or a KVPrecision) with `auto` resolved against weight_dtype."""
        return kv_precision(kv_dtype, self.weight_dtype)

    # ---- tensor parallelism -------------------------------------------------------------
    def validate_tp(self, tp: int) -> None:
        """Raise KvsimError unless vLLM could shard this model over `tp` GPUs: attention heads must
        divide evenly; KV heads must divide tp or be divisible by it (they are replicated when
        tp > num_kv_heads); state layers split their heads (Mamba-2: and their groups, unless there is
        one group, which is replicated; Gated DeltaNet: its key heads) evenly."""
        _check_tp(tp)
        who = _label(self.name)
        if self.num_attention_heads % tp:
            raise KvsimError(f"{who}: tensor_parallel_size {tp} does not divide"
                             f" {self.num_attention_heads} attention heads")
        if self.attention != "mla":
            kv = self.num_kv_heads
            if (tp <= kv and kv % tp) or (tp > kv and tp % kv):
                raise KvsimError(f"{who}: tensor_parallel_size {tp} and {kv} KV heads"
                                 " are not multiples of one another")
        if "state" in self.layers_by_kind():
            if self.ssm_num_heads % tp:
                raise KvsimError(f"{who}: tensor_parallel_size {tp} does not divide {self.ssm_num_heads}"
                                 " state-layer heads")
            if self.ssm_groups % tp and not (self.ssm_kind == "mamba2" and self.ssm_groups == 1):
                raise KvsimError(f"{who}: tensor_parallel_size {tp} does not divide {self.ssm_groups}"
                                 f" state-layer {'groups' if self.ssm_kind == 'mamba2' else 'key heads'}")

    def kv_heads_per_gpu(self, tp: int = 1) -> int:
        """KV heads each GPU stores: num_kv_heads // tp, at least 1 (vLLM replicates KV heads when
        tp > num_kv_heads). For MLA it is 1: the latent is replicated on every rank, not split."""
        _check_tp(tp)
        if self.attention == "mla":
            return 1
        return max(1, self.num_kv_heads // tp)

    # ---- KV cache -----------------------------------------------------------------------
    def layer_groups(self, kv_dtype: Any = "bf16", tp: int = 1) -> tuple[LayerGroup, ...]:
        """The model's KV as layer groups (kvsim/specs/layers.py), in GROUP_KINDS order, bytes per GPU under
        tensor parallelism (kvsim/specs/groups.py has the rules and formulas)."""
        return groups.layer_groups(self, self.kv_precision(kv_dtype), tp)

    def kv_bytes_per_token(self, kv_dtype: Any, tp: int = 1) -> float:
        """KV bytes one token adds on one GPU: the bytes_per_token of the full / mla / sliding groups (every
        attention layer counted, as when the context is shorter than any window) plus, for compressed
        groups, each part's bytes_per_entry / tokens_per_entry; state layers add nothing per token.
        MHA/GQA/MQA layers: 2 * kv_heads_per_gpu * head_dim * b(rest) each; MLA: kv_lora_rank * b(rest) +
        qk_rope_head_dim * b(rope) each."""
        total = 0.0
        for g in self.layer_groups(kv_dtype, tp):
            total += g.bytes_per_token
            total += sum(p.bytes_per_entry / p.tokens_per_entry for p in g.parts)
        return total

    def kv_bytes(self, num_tokens: int, kv_dtype: Any, tp: int = 1) -> float:
        """Exact KV bytes on one GPU for one sequence of num_tokens tokens: the sum of
        LayerGroup.kv_bytes over the groups (sliding layers hold min(num_tokens, sliding_window) tokens,
        full layers all of them, state layers their state, compressed layers their complete entries and
        state cache)."""
        if num_tokens < 0:
            raise KvsimError(f"{_label(self.name)}: num_tokens must be >= 0, got {num_tokens}")
        return sum(g.kv_bytes(num_tokens) for g in self.layer_groups(kv_dtype, tp))

    def decode_read_bytes(self, context: int, kv_dtype: Any, tp: int = 1) -> dict[str, float]:
        """Group kind -> KV bytes one decode step of a `context`-token sequence reads on one GPU:
        LayerGroup.read_bytes(context) (full / mla: context x bytes_per_token; sliding: min(context,
        window) x bytes_per_token; state: state_bytes; compressed: every entry of each part, or its topk
        per layer, plus the state cache)."""
        return {g.kind: g.read_bytes(context) for g in self.layer_groups(kv_dtype, tp)}

    # ---- weights and compute ------------------------------------------------------------
    def weight_bytes(self, tp: int = 1) -> float:
        """Weight bytes per GPU (the memory footprint): num_params * bytes(weight_dtype) / tp. An
        approximation: vLLM also splits the embedding and LM head by vocabulary, but replicates norms
        (negligibly small)."""
        _check_tp(tp)
        return self.num_params * DTYPE_BYTES[self.weight_dtype] / tp

    def weight_stream_bytes(self, tp: int = 1) -> float:
        """Weight bytes one step reads per GPU: (num_params - vocab_size * hidden_size when the embeddings
        are not tied, else num_params) * bytes(weight_dtype) / tp. The input-embedding table is only
        looked up (one row per token), never streamed; a tied table is read as the LM head. Every other
        weight counts once, every expert of an MoE model included (a step of T tokens reads only
        expected_experts(T) of them: kvsim/cost/roofline.py subtracts the rest)."""
        _check_tp(tp)
        lookup = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size
        return max(0, self.num_params - lookup) * DTYPE_BYTES[self.weight_dtype] / tp

    def linear_flops_per_token(self) -> float:
        """Matmul FLOPs per token for the whole model (all GPUs together; divide by tp per GPU):
        2 * active_params, minus the input embedding when it is not tied to the LM head (a lookup,
        not a matmul); never negative (a hand-written spec may give fewer active_params than its
        embedding holds). Attention score/value FLOPs are separate: attention_flops_per_pair."""
        lookup = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size
        return 2.0 * max(0, self.active_params - lookup)

    def attention_flops_per_pair(self, tp: int = 1, kind: str | None = None) -> float:
        """FLOPs on one GPU for one (query token, key token or entry) pair, QK^T plus PV at 2 FLOPs per
        multiply-add, summed over the attention layers (kind None: every full / mla / sliding /
        compressed layer; else the layers of that group kind; state layers have none). Per layer:
        MHA/GQA/MQA 4 * heads_per_gpu * head_dim; MLA, kept simple as the un-absorbed form,
        2 * heads_per_gpu * ((head_dim + qk_rope_head_dim) + head_dim) (absorbed MLA decode kernels work
        in the latent space and do more FLOPs); DeepSeek-V4 (compress_ratios) 2 * heads_per_gpu *
        ((kv_lora_rank + qk_rope_head_dim) + head_dim), keys and values being one shared entry."""
        return compute.layer_pair_flops(self, tp) * compute.attention_layers(self, kind)

    def prefill_attention_flops(self, start: int, chunk: int, tp: int = 1) -> dict[str, float]:
        """Group kind -> attention FLOPs on one GPU for a prefill chunk of `chunk` tokens after `start`
        cached ones (formulas in kvsim/specs/compute.py: full pairs chunk*start + chunk*(chunk+1)/2,
        sliding pairs within the window, compressed entries, state updates)."""
        return compute.prefill_attention_flops(self, start, chunk, tp)

    def decode_attention_flops(self, context: int, tp: int = 1) -> dict[str, float]:
        """Group kind -> attention FLOPs on one GPU of one decode step whose token is the context-th:
        prefill_attention_flops(context - 1, 1, tp)."""
        return compute.prefill_attention_flops(self, max(0, context - 1), 1, tp)

    @property
    def is_moe(self) -> bool:
        return self.active_params < self.num_params

    # ---- mixture of experts -------------------------------------------------------------
    @property
    def moe_layer_count(self) -> int:
        """Layers with routed experts: len(moe_layers), or every layer when moe_layers is empty; 0
        without num_experts."""
        if not self.num_experts:
            return 0
        return len(self.moe_layers) or self.num_layers

    @property
    def routes_experts(self) -> bool:
        """Whether the spec says how tokens are routed (num_experts, experts_per_token), so a step reads
        only the experts its tokens pick."""
        return self.moe_layer_count > 0

    @property
    def expert_params(self) -> float:
        """Parameters of one routed expert of one layer, derived from the counts: (num_params -
        active_params) / (MoE layers x (num_experts - experts_per_token)), the experts a token does not
        run being all the two counts differ by (for gpt-oss this includes the experts' biases). When
        every expert is active (experts_per_token = num_experts) the counts cannot tell: 3 x hidden_size
        x moe_intermediate_size, a gated MLP."""
        layers, e, k = self.moe_layer_count, self.num_experts, self.experts_per_token
        if not layers:
            return 0.0
        if e > k and self.num_params > self.active_params:
            return (self.num_params - self.active_params) / (layers * (e - k))
        return 3.0 * self.hidden_size * self.moe_intermediate_size

    def routed_expert_bytes(self, tp: int = 1) -> float:
        """Bytes of every routed expert of every MoE layer on one GPU: MoE layers x num_experts x
        expert_params x bytes(weight_dtype) / tp (without expert parallelism each GPU holds a 1/tp slice
        of every expert); at most weight_stream_bytes(tp)."""
        _check_tp(tp)
        total = self.moe_layer_count * self.num_experts * self.expert_params * DTYPE_BYTES[self.weight_dtype]
        return min(total / tp, self.weight_stream_bytes(tp))

    def expected_experts(self, tokens: float) -> float:
        """Distinct routed experts a step of `tokens` tokens reads per MoE layer (expected_distinct_experts
        of num_experts, experts_per_token)."""
        return expected_distinct_experts(self.num_experts, self.experts_per_token, tokens)


def expected_distinct_experts(experts: int, topk: int, tokens: float) -> float:
    """E (1 - (1 - k / E)^T): the expected number of distinct experts T tokens pick, each choosing k of E
    experts uniformly at random and independently of the other tokens (each expert is missed by one token
    with probability 1 - k / E). k at T = 1, E as T grows; 0 for T <= 0 or no experts. Real routers are
    skewed (popular experts), which makes fewer distinct experts: this is the uniform upper estimate."""
    if experts <= 0 or tokens <= 0:
        return 0.0
    if topk >= experts:
        return float(experts)
    return experts * -math.expm1(tokens * math.log1p(-topk / experts))


def _check_tp(tp: int) -> None:
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= MAX_DIM:
        raise KvsimError(f"tensor_parallel_size must be an integer >= 1, got {excerpt(tp)}")


check_tp = _check_tp


def _label(name: str) -> str:
    """'model NAME' for messages; an odd name (long, control characters) quoted by excerpt."""
    return f"model {name}" if name.isprintable() and len(name) <= 80 else f"model {excerpt(name)}"


def _require_int(who: str, field: str, value: Any, minimum: int, maximum: int) -> None:
    problem = check_int(value, minimum, maximum)
    if problem:
        raise KvsimError(f"{who}: {field} {problem}")


def check_int(value: Any, minimum: int, maximum: int) -> str | None:
    """None if value is an int (not a bool) in [minimum, maximum], else what is wrong, as the end of a
    sentence: 'must be a positive integer <= 2**31, got 32.5'."""
    if not isinstance(value, bool) and isinstance(value, int) and minimum <= value <= maximum:
        return None
    what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    bound = "2**31" if maximum == MAX_DIM else "1e15" if maximum == MAX_PARAMS else str(maximum)
    return f"must be {what} <= {bound}, got {excerpt(value)}"


def estimate_dense_params(num_layers: int, hidden_size: int, num_attention_heads: int,
                          num_kv_heads: int, head_dim: int, intermediate_size: int, vocab_size: int,
                          tie_word_embeddings: bool = False, gated_mlp: bool = True,
                          qkv_bias: bool = False) -> int:
    """Parameter count of a Llama-style decoder from its shapes: Q/K/V/O projections, a gated (3
    matrices) or plain (2) MLP, two RMSNorms per layer plus a final one, and the embeddings. Exact
    for Llama 2/3, Mistral and Qwen2 (qkv_bias=True); other families come out close."""
    h, hd = hidden_size, head_dim
    attn = 2 * h * num_attention_heads * hd + 2 * h * num_kv_heads * hd
    if qkv_bias:
        attn += (num_attention_heads + 2 * num_kv_heads) * hd
    mlp = (3 if gated_mlp else 2) * h * intermediate_size
    embed = vocab_size * h * (1 if tie_word_embeddings else 2)
    return num_layers * (attn + mlp + 2 * h) + h + embed


MODEL_FIELDS = tuple(f.name for f in fields(ModelSpec))
