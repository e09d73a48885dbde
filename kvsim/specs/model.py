"""A transformer's architecture as far as serving cost needs it: KV bytes per token, weight bytes,
FLOPs per token and per attended (query, key) pair, all per GPU under tensor parallelism."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from kvsim.errors import KvsimError, excerpt
from kvsim.specs.dtypes import DTYPE_BYTES, dtype_bytes, normalize_dtype
from kvsim.specs.layers import LayerGroup

ATTENTION_KINDS = ("mha", "gqa", "mqa", "mla")

MAX_DIM = 2**31
"""Largest layer count, width, head count, vocabulary, window or context length accepted (real models are
below 2**20 in each; the bound keeps every product of them a finite float)."""
MAX_PARAMS = 10**15
"""Largest num_params / active_params accepted (a thousand times the largest published models)."""

POSITIVE_DIMS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
                 "intermediate_size", "vocab_size", "max_position_embeddings")
"""Integer fields that must be >= 1 (and <= MAX_DIM)."""
OPTIONAL_DIMS = ("kv_lora_rank", "qk_rope_head_dim", "sliding_window_layers")
"""Integer fields that may be 0 (and are <= MAX_DIM)."""
COUNTS = ("num_params", "active_params")
"""Integer fields that must be >= 1 (and <= MAX_PARAMS)."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One decoder-only model.

    num_params counts every parameter, both embedding matrices included (once when tied);
    active_params counts those used per token in the same way (= num_params for dense models,
    fewer for mixture-of-experts). attention is "mha" | "gqa" | "mqa" | "mla".

    MLA (DeepSeek-V2/V3) caches one latent of kv_lora_rank + qk_rope_head_dim values per layer and
    token instead of K and V; head_dim is then the per-head value dim (= qk_nope_head_dim in every
    DeepSeek MLA model). sliding_window_layers of the num_layers layers keep only the last
    sliding_window tokens of KV.

    Checked on construction (KvsimError, one line): every shape an integer (never a bool or a float)
    with 1 <= value <= MAX_DIM (kv_lora_rank, qk_rope_head_dim, sliding_window_layers may be 0);
    1 <= active_params <= num_params <= MAX_PARAMS; for mha / gqa / mqa num_kv_heads divides
    num_attention_heads, mha has as many KV heads as heads and mqa one; name, attention, weight_dtype
    and source are strings, tie_word_embeddings a bool.
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
        for f in ("attention", "weight_dtype", "source"):
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
        try:
            dtype = normalize_dtype(self.weight_dtype)
        except KvsimError as exc:
            raise KvsimError(f"{who}: weight_dtype: {exc}") from None
        if dtype != self.weight_dtype:
            object.__setattr__(self, "weight_dtype", dtype)

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

    # ---- tensor parallelism -------------------------------------------------------------
    def validate_tp(self, tp: int) -> None:
        """Raise KvsimError unless vLLM could shard this model over `tp` GPUs: attention heads must
        divide evenly; KV heads must divide tp or be divisible by it (they are replicated when
        tp > num_kv_heads)."""
        _check_tp(tp)
        if self.num_attention_heads % tp:
            raise KvsimError(f"{_label(self.name)}: tensor_parallel_size {tp} does not divide"
                             f" {self.num_attention_heads} attention heads")
        if self.attention != "mla":
            kv = self.num_kv_heads
            if (tp <= kv and kv % tp) or (tp > kv and tp % kv):
                raise KvsimError(f"{_label(self.name)}: tensor_parallel_size {tp} and {kv} KV heads"
                                 " are not multiples of one another")

    def kv_heads_per_gpu(self, tp: int = 1) -> int:
        """KV heads each GPU stores: num_kv_heads // tp, at least 1 (vLLM replicates KV heads when
        tp > num_kv_heads). For MLA it is 1: the latent is replicated on every rank, not split."""
        _check_tp(tp)
        if self.attention == "mla":
            return 1
        return max(1, self.num_kv_heads // tp)

    # ---- KV cache -----------------------------------------------------------------------
    def kv_bytes_per_token(self, kv_dtype: str, tp: int = 1) -> float:
        """KV bytes one token adds on one GPU, every layer counted (as when the context is shorter
        than any sliding window). MHA/GQA/MQA: 2 * layers * kv_heads_per_gpu * head_dim * bytes;
        MLA: layers * (kv_lora_rank + qk_rope_head_dim) * bytes."""
        b = dtype_bytes(kv_dtype)
        if self.attention == "mla":
            _check_tp(tp)
            return self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * b
        return 2 * self.num_layers * self.kv_heads_per_gpu(tp) * self.head_dim * b

    def layer_groups(self, kv_dtype: str = "bf16", tp: int = 1) -> tuple[LayerGroup, ...]:
        """The model's KV as layer groups (kvsim/specs/layers.py), in GROUP_KINDS order, bytes per GPU under
        tensor parallelism: MLA models one `mla` group; others a `full` group and, when
        sliding_window_layers > 0, a `sliding` group (window sliding_window) of that many layers."""
        per_layer = self.kv_bytes_per_token(kv_dtype, tp) / self.num_layers
        if self.attention == "mla":
            return (LayerGroup("mla", tuple(range(self.num_layers)), per_layer * self.num_layers),)
        windowed = self.sliding_window_layers
        groups = []
        if windowed < self.num_layers:
            full = tuple(range(windowed, self.num_layers))
            groups.append(LayerGroup("full", full, per_layer * len(full)))
        if windowed:
            groups.append(LayerGroup("sliding", tuple(range(windowed)), per_layer * windowed,
                                     window=self.sliding_window))
        return tuple(groups)

    def kv_bytes(self, num_tokens: int, kv_dtype: str, tp: int = 1) -> float:
        """Exact KV bytes on one GPU for one sequence of num_tokens tokens: sliding-window layers hold
        min(num_tokens, sliding_window) tokens, the other layers hold all of them."""
        if num_tokens < 0:
            raise KvsimError(f"{_label(self.name)}: num_tokens must be >= 0, got {num_tokens}")
        per_layer = self.kv_bytes_per_token(kv_dtype, tp) / self.num_layers
        windowed = self.sliding_window_layers
        full = self.num_layers - windowed
        capped = min(num_tokens, self.sliding_window) if windowed else 0
        return per_layer * (full * num_tokens + windowed * capped)

    # ---- weights and compute ------------------------------------------------------------
    def weight_bytes(self, tp: int = 1) -> float:
        """Weight bytes per GPU: num_params * bytes(weight_dtype) / tp. An approximation: vLLM also
        splits the embedding and LM head by vocabulary, but replicates norms (negligibly small)."""
        _check_tp(tp)
        return self.num_params * DTYPE_BYTES[self.weight_dtype] / tp

    def linear_flops_per_token(self) -> float:
        """Matmul FLOPs per token for the whole model (all GPUs together; divide by tp per GPU):
        2 * active_params, minus the input embedding when it is not tied to the LM head (a lookup,
        not a matmul); never negative (a hand-written spec may give fewer active_params than its
        embedding holds). Attention score/value FLOPs are separate: attention_flops_per_pair."""
        lookup = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size
        return 2.0 * max(0, self.active_params - lookup)

    def attention_flops_per_pair(self, tp: int = 1) -> float:
        """FLOPs on one GPU for one (query token, key token) pair, summed over layers: QK^T plus PV,
        2 FLOPs per multiply-add. MHA/GQA/MQA: 4 * layers * heads_per_gpu * head_dim. MLA, kept
        simple as the un-absorbed form: 2 * layers * heads_per_gpu * ((head_dim + qk_rope_head_dim)
        + head_dim); absorbed MLA decode kernels work in the latent space and do more FLOPs."""
        _check_tp(tp)
        heads = self.num_attention_heads / tp
        if self.attention == "mla":
            return 2.0 * self.num_layers * heads * (2 * self.head_dim + self.qk_rope_head_dim)
        return 4.0 * self.num_layers * heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.active_params < self.num_params


def _check_tp(tp: int) -> None:
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= MAX_DIM:
        raise KvsimError(f"tensor_parallel_size must be an integer >= 1, got {excerpt(tp)}")


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
