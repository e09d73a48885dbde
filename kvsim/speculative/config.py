"""The `speculative` section of a scenario (vLLM's `speculative_config`): the method, the number of draft
tokens per step, the draft model and the acceptance rates. docs/speculative.md explains every key.

Imported into `Scenario` (kvsim/scenario.py) as one field; `None` (the default) is a run without
speculative decoding.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from kvsim.schema import Strict

METHODS: tuple[str, ...] = ("none", "ngram", "eagle", "eagle3", "mtp", "draft_model")
"""The names `speculative.method` accepts: vLLM's `speculative_config.method`, and none (the section is
ignored: a run without speculative decoding, for `kvsim compare --vary speculative.method=none,...`)."""
Method = Literal[METHODS]
DRAFT_OVERHEAD_S = 7.0e-4
"""Default CPU seconds per draft forward (`speculative.draft_overhead_s`; forwards 2..k overlap it with the
previous forward's GPU time, kvsim/cost/speculative.py): fitted to vLLM V1's EAGLE-1 TPOTs at batch size 1
only (vllm-project/vllm#20780, k = 2..7; docs/speculative.md, "Published check")."""
MAX_SPEC_TOKENS = 16
"""Largest num_speculative_tokens accepted (vLLM's EAGLE benchmarks go to 7-8; MTP uses 1-3)."""


Rate = Annotated[float, Field(ge=0.0, le=1.0)]
"""An acceptance rate, in [0, 1]."""


class AcceptanceLength(Strict):
    """`acceptance: {mean_acceptance_length: L}`: vLLM's spec-decode metric (tokens per verify step,
    1 + accepted drafts per step), in [1, k + 1]; kvsim derives one rate p for every position with
    1 + p + p^2 + ... + p^k = L (kvsim/speculative/acceptance.py)."""

    mean_acceptance_length: float = Field(ge=1.0, le=MAX_SPEC_TOKENS + 1)


class SpeculativeConfig(Strict):
    """Speculative decoding: every decode step of a sequence proposes `num_speculative_tokens` (k) draft
    tokens and verifies them in one target forward of k + 1 query tokens.

    - method: ngram (prompt lookup on the CPU: no draft weights, KV or GPU time), eagle / eagle3 (a
      one-layer draft head derived from the target, or `model`), mtp (the target's own MTP layer(s),
      DeepSeek-V3's `num_nextn_predict_layers`), draft_model (`model`, required: a separate smaller model).
    - model: the draft model (a catalog name, an inline spec, a YAML or config.json path, as the top-level
      `model` key takes); for eagle / eagle3 / mtp it replaces the derived head.
    - mtp_layers: the MTP modules the target ships (num_nextn_predict_layers; DeepSeek-V3: 1); each draft
      step runs one of them (vLLM reuses the last when k is larger).
    - acceptance: the conditional acceptance rate of each draft position, p_i = P(draft i accepted |
      drafts 1..i-1 accepted): a list of k rates, one rate for every position, or
      {mean_acceptance_length: L}. Required: acceptance depends on the workload and the draft.
    """

    method: Method
    num_speculative_tokens: int = Field(ge=1, le=MAX_SPEC_TOKENS)
    model: str | dict[str, Any] | None = None
    mtp_layers: int = Field(default=1, ge=1, le=MAX_SPEC_TOKENS)
    acceptance: list[Rate] | Rate | AcceptanceLength
    draft_overhead_s: float | None = Field(default=None, ge=0, le=1.0)
    """CPU seconds per draft forward (vLLM's proposer prepares and launches each draft step; from the
    second forward on it overlaps the previous forward's GPU time); unset: DRAFT_OVERHEAD_S (fitted,
    docs/speculative.md)."""

    @field_validator("acceptance", mode="before")
    @classmethod
    def _rates_in_range(cls, value: Any) -> Any:
        """A rate out of [0, 1] named as such (not as the union's first member's complaint)."""
        rates = value if isinstance(value, list) else [value]
        for i, p in enumerate(rates):
            if isinstance(p, int | float) and not isinstance(p, bool) and not 0.0 <= p <= 1.0:
                where = f"rate {i + 1} " if isinstance(value, list) else "a rate "
                raise ValueError(f"{where}must be in [0, 1], got {p!r}")
        return value

    @property
    def enabled(self) -> bool:
        """False for method none: the run has no speculative decoding."""
        return self.method != "none"

    @model_validator(mode="after")
    def _check(self) -> SpeculativeConfig:
        k = self.num_speculative_tokens
        acc = self.acceptance
        if isinstance(acc, list):
            if len(acc) != k:
                raise ValueError(f"acceptance: {len(acc)} rates given for num_speculative_tokens {k}; give "
                                 "one rate per draft position (or one number for all)")
            for i, p in enumerate(acc):
                if not 0.0 <= p <= 1.0:
                    raise ValueError(f"acceptance.{i}: a rate must be in [0, 1], got {p!r}")
        elif isinstance(acc, float | int):
            if not 0.0 <= acc <= 1.0:
                raise ValueError(f"acceptance: a rate must be in [0, 1], got {acc!r}")
        elif acc.mean_acceptance_length > k + 1:
            raise ValueError(f"acceptance.mean_acceptance_length: at most num_speculative_tokens + 1 = "
                             f"{k + 1} tokens per step, got {acc.mean_acceptance_length:g}")
        if self.method == "draft_model" and self.model is None:
            raise ValueError("model: method draft_model needs the draft model (a catalog name or spec)")
        if self.method == "ngram" and self.model is not None:
            raise ValueError("model: method ngram proposes from the prompt on the CPU; it has no draft model")
        return self
