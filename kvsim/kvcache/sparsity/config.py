"""The `kv.sparsity` section of a scenario: which token-level policy, its KV budget, and the attention model.

Imported into `KVConfig` (kvsim/scenario.py) as one field; docs/sparsity.md explains every key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kvsim.schema import MAX_TOKENS, Strict

POLICY_NAMES: tuple[str, ...] = (
    "none", "streaming", "h2o", "snapkv", "scissorhands", "pyramidkv", "infinigen")
"""The names `kv.sparsity.policy` accepts (SparsityConfig.policy is built from them); each names a class
registered in kvsim/kvcache/sparsity/policies.py POLICIES (tests/kvcache/sparsity/test_methods.py checks
that they agree)."""
PolicyName = Literal[POLICY_NAMES]
DEFAULT_BUDGET_TOKENS = 2048
MIN_TAU, MAX_TAU = 0.01, 1e6
MAX_ALPHA = 16.0


class AttentionConfig(Strict):
    """Parameters of the per-sequence attention model (kvsim/kvcache/sparsity/attention.py).

    A decode query's attention over its context is split into four parts: `sink_tokens` sink tokens at
    the start, a recency kernel exp(-distance / tau), `heavy_fraction` of the positions as heavy hitters
    with power-law scores (rank r weighs r^-alpha), and a uniform background. Deeper layers concentrate:
    from the first layer group to the last the background mass falls linearly from `background_first` to
    `background_last`, tau falls geometrically from `recent_tau` to `recent_tau_last` and alpha rises
    linearly from `heavy_alpha` to `heavy_alpha_last`; the non-background mass splits as
    sink_share : recent_share : heavy_share. A re-read moves `reread_mass` of the attention onto the
    re-read segment for `reread_span` decode steps. tau lies in [0.01, 10^6] tokens (beyond, e^(-1/tau)
    rounds to 1 and the recency kernel cannot be normalised) and alpha in (0, 16].
    """

    layer_groups: int = Field(default=4, ge=1, le=128)
    sink_tokens: int = Field(default=4, ge=0, le=MAX_TOKENS)
    sink_share: float = Field(default=0.3, ge=0, le=1)
    recent_share: float = Field(default=0.35, ge=0, le=1)
    heavy_share: float = Field(default=0.35, ge=0, le=1)
    recent_tau: float = Field(default=128.0, ge=MIN_TAU, le=MAX_TAU)
    recent_tau_last: float = Field(default=16.0, ge=MIN_TAU, le=MAX_TAU)
    heavy_fraction: float = Field(default=0.05, gt=0, le=1)
    heavy_alpha: float = Field(default=1.0, gt=0, le=MAX_ALPHA)
    heavy_alpha_last: float = Field(default=1.6, gt=0, le=MAX_ALPHA)
    background_first: float = Field(default=0.3, ge=0, lt=1)
    background_last: float = Field(default=0.05, ge=0, lt=1)
    reread_mass: float = Field(default=0.6, ge=0, le=1)
    reread_span: int = Field(default=32, ge=1, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _check(self) -> AttentionConfig:
        total = self.sink_share + self.recent_share + self.heavy_share
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"sink_share + recent_share + heavy_share must be 1 (got {total:g})")
        return self


class SparsityConfig(Strict):
    """Token-level KV eviction or offload.

    policy: none, streaming, h2o, snapkv, scissorhands, pyramidkv or infinigen. The KV budget is
    `budget_tokens` (absolute) or `budget_fraction` of the context (of the prompt for snapkv/pyramidkv),
    never below `min_tokens`; at most one of the two may be set (default: 2048 tokens). `reclaim` says how
    evicted slots return to the pool: `compact` keeps each sequence's retained KV packed (copying tokens
    when evictions outrun appends), `block` frees a block only when every token in it is evicted.
    """

    policy: PolicyName = "none"
    budget_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    budget_fraction: float | None = Field(default=None, gt=0, le=1)
    min_tokens: int = Field(default=64, ge=1, le=MAX_TOKENS)
    recent_fraction: float = Field(default=0.5, ge=0, le=1)
    """Share of the budget kept as the recent window (h2o, scissorhands, infinigen)."""
    observation_window: int = Field(default=32, ge=1, le=MAX_TOKENS)
    """snapkv / pyramidkv: prompt tokens at the end of the prompt whose attention selects what to keep."""
    pyramid_beta: float = Field(default=20.0, ge=1, le=1e6)
    """pyramidkv: beyond the observation window (kept in every layer group), the last group keeps R / beta
    and the first 2 R - R / beta of the remaining budget R, linearly in between (mean R). At most 10^6."""
    drop_fraction: float = Field(default=0.1, gt=0, lt=1)
    """scissorhands: share of the budget dropped at once when the cache reaches the budget."""
    reclaim: Literal["compact", "block"] = "compact"
    block_tables: Literal["shared", "per_layer"] = "shared"
    """`shared` (vLLM): one block table per sequence spans every layer, so a slot is held while any layer
    group keeps a token in it (compact: the most any group keeps; block: the union of kept positions over
    groups). `per_layer`: the idealisation of one table per layer group (charged the mean over groups)."""
    selection: Literal["shared", "per_head"] = "shared"
    """`shared`: one kept token set serves every KV head. `per_head`: each of `kv_heads` heads selects its
    own heavy hitters (as the papers do); a slot is held while any head keeps its token (the union)."""
    kv_heads: int | None = Field(default=None, ge=1, le=4096)
    """per_head: independent selections per layer (default: the model's KV heads per GPU; 1 for MLA)."""
    pool_kernel: int = Field(default=7, ge=1, le=1025)
    """snapkv / pyramidkv: width of the 1-D max-pool over the observation-window scores before the top-k
    (SnapKV's clustering; 1 turns it off). Kept tokens then come in runs of this many positions."""
    host_pool_bytes: float | None = Field(default=None, gt=0, le=2.0 ** 60)
    """infinigen: capacity of the host (CPU) KV pool per GPU in bytes (default: the hardware profile's
    host_dram_bytes). When full, the least-used entries are evicted for good."""
    prefetch_layers: int = Field(default=2, ge=1, le=4096)
    """infinigen: layers whose prefetched entries the GPU holds at once (a double buffer: layer i's in use
    while layer i + 1's arrive). The GPU pool is charged the sinks and recent window for every layer plus
    the selected entries x prefetch_layers / the model's layers; at most the model's layers."""
    attention: AttentionConfig = Field(default_factory=AttentionConfig)

    @model_validator(mode="after")
    def _check(self) -> SparsityConfig:
        if self.budget_tokens is not None and self.budget_fraction is not None:
            raise ValueError("set at most one of budget_tokens and budget_fraction")
        return self

    @property
    def enabled(self) -> bool:
        return self.policy != "none"
