"""Token-level KV policies: the base class and the registry keyed by the YAML name (`kv.sparsity.policy`).

A policy answers, for a sequence whose prompt KV was P tokens at the end of prefill and whose context is
now L >= P tokens, what each layer group keeps (`keeps(L, P)`, one `Keep` per group). Policies that
offload (`offload = True`) move what they do not keep to host memory instead of dropping it. The methods
themselves live in kvsim/kvcache/sparsity/methods.py and register here with `@register`.
"""

from __future__ import annotations

import math
from typing import ClassVar

from kvsim.errors import KvsimError
from kvsim.kvcache.sparsity.config import DEFAULT_BUDGET_TOKENS, SparsityConfig
from kvsim.kvcache.sparsity.keep import Keep, full_keep

POLICIES: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    POLICIES[cls.name] = cls
    return cls


class Policy:
    """Base: keeps everything. Subclasses override `keeps`.

    `budget(n)` is the KV budget for n tokens of context: `budget_tokens`, or `budget_fraction * n`
    rounded up and at least `min_tokens`, or 2048 tokens when neither is set.
    """

    name: ClassVar[str] = "none"
    summary: ClassVar[str] = "full KV, nothing evicted"
    offload: ClassVar[bool] = False
    prefetch: ClassVar[bool] = False
    """The selected entries are fetched from host memory every decode step (InfiniGen)."""
    per_layer: ClassVar[bool] = False
    """Layer groups keep different counts (PyramidKV)."""

    def __init__(self, cfg: SparsityConfig) -> None:
        self.cfg = cfg
        self.groups = cfg.attention.layer_groups
        self.sink_tokens = cfg.attention.sink_tokens
        self._fraction = cfg.budget_fraction
        self._tokens = cfg.budget_tokens if cfg.budget_tokens is not None else DEFAULT_BUDGET_TOKENS

    def budget(self, n: int) -> int:
        if self._fraction is None:
            return self._tokens
        return max(self.cfg.min_tokens, math.ceil(self._fraction * n - 1e-9))

    def keeps(self, length: int, prompt: int) -> list[Keep]:
        return [full_keep(length, self.sink_tokens)] * self.groups

    def _budget_horizon(self, length: int) -> tuple[int, float]:
        """Horizon of a policy that keeps min(L, B) tokens with an absolute budget B."""
        if self._fraction is not None:
            return 0, length + 1
        b = self._tokens
        return (1, b + 1) if length <= b else (0, math.inf)

    def horizon(self, length: int, prompt: int) -> tuple[int, float]:
        """(slope, until): for contexts L' in [length, until) the resident token count is its value at
        `length` plus slope * (L' - length). The base answer (0, length + 1) means "ask again next step"."""
        return 0, length + 1

    def resident_tokens(self, keeps: list[Keep]) -> float:
        """KV tokens held on the GPU, in whole-model token equivalents: the mean over layer groups."""
        if not self.per_layer:
            return float(keeps[0].total)
        return sum(k.total for k in keeps) / len(keeps)

    def widest(self, keeps: list[Keep]) -> Keep:
        """The group keeping the most. The attention model puts heavy hitters at the same positions in
        every layer group and the groups' windows and recency tails are nested, so its kept positions
        contain every other group's: the union over groups (a block spanning all layers is held while any
        group needs it)."""
        if not self.per_layer:
            return keeps[0]
        return max(keeps, key=lambda k: (k.total, k.outside))


register(Policy)


def policy_names() -> list[str]:
    import kvsim.kvcache.sparsity.methods  # noqa: F401  (registers the methods)

    return list(POLICIES)


def build_policy(cfg: SparsityConfig) -> Policy:
    """The policy `cfg.policy` names, configured by cfg."""
    import kvsim.kvcache.sparsity.methods  # noqa: F401

    cls = POLICIES.get(cfg.policy)
    if cls is None:
        raise KvsimError(f"kv.sparsity.policy: unknown policy '{cfg.policy}' (known: {', '.join(POLICIES)})")
    return cls(cfg)
