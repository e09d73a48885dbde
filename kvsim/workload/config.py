"""Pydantic schema of the `workload` section of a scenario."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kvsim.workload.rereads import RereadConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LengthDist(_Strict):
    """A token-length distribution.

    fixed: `value`. uniform: integers in [low, high]. lognormal: by `mean` and either `p50` (median) or
    `sigma`. empirical: samples drawn with replacement from `path` (one integer per line, or a CSV `column`).
    Every draw is clipped to [min, max].
    """

    dist: Literal["fixed", "uniform", "lognormal", "empirical"] = "fixed"
    value: int | None = Field(default=None, ge=1)
    low: int | None = Field(default=None, ge=1)
    high: int | None = Field(default=None, ge=1)
    mean: float | None = Field(default=None, gt=0)
    p50: float | None = Field(default=None, gt=0)
    sigma: float | None = Field(default=None, gt=0)
    path: str | None = None
    column: str | None = None
    min: int = Field(default=1, ge=1)
    max: int = Field(default=1_000_000, ge=1)

    @model_validator(mode="after")
    def _check(self) -> LengthDist:
        need = {
            "fixed": ["value"],
            "uniform": ["low", "high"],
            "lognormal": ["mean"],
            "empirical": ["path"],
        }[self.dist]
        for key in need:
            if getattr(self, key) is None:
                raise ValueError(f"dist '{self.dist}' needs '{key}'")
        if self.dist == "uniform" and self.low > self.high:
            raise ValueError("low must be <= high")
        if self.dist == "lognormal":
            if (self.p50 is None) == (self.sigma is None):
                raise ValueError("lognormal needs exactly one of 'p50' or 'sigma'")
            if self.p50 is not None and self.p50 >= self.mean:
                raise ValueError("lognormal p50 must be below mean")
        if self.min > self.max:
            raise ValueError("min must be <= max")
        return self


def fixed(n: int) -> LengthDist:
    return LengthDist(dist="fixed", value=n)


class Arrival(_Strict):
    """Arrival process. poisson: exponential gaps at `rate` req/s. gamma: gamma gaps with mean 1/rate and
    coefficient of variation `cv` (cv > 1 is burstier than Poisson). fixed: constant gap 1/rate.
    closed_loop: `users` users, each sends its next request `think_time_s` after the previous completes."""

    process: Literal["poisson", "gamma", "fixed", "closed_loop"] = "poisson"
    rate: float = Field(default=16.0, gt=0)
    cv: float = Field(default=1.0, gt=0)
    users: int = Field(default=16, ge=1)
    think_time_s: float = Field(default=0.0, ge=0)


class ChatConfig(_Strict):
    """Chat sessions: a pool of shared system prompts, multi-turn sessions whose prompt carries the
    history (system prompt + every earlier user turn and answer), think time between turns."""

    system_prompts: int = Field(default=4, ge=1)
    system_prompt_len: LengthDist = Field(default_factory=lambda: fixed(512))
    zipf_s: float = Field(default=1.0, ge=0)
    turns: LengthDist = Field(default_factory=lambda: LengthDist(dist="uniform", low=1, high=6))
    user_turn_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=120, p50=80, max=4096))
    think_time_s: LengthDist | Annotated[float, Field(ge=0)] = Field(
        default_factory=lambda: LengthDist(dist="uniform", low=2, high=20))
    """Seconds between an answer and the next user turn: a distribution (drawn as real numbers, not rounded),
    or a plain number of seconds (may be 0)."""
    abandon_prob: float = Field(default=0.0, ge=0, le=1)
    max_context: int = Field(default=32768, ge=1)

    @field_validator("think_time_s", mode="before")
    @classmethod
    def _think_number(cls, value: object) -> object:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not value >= 0:
            raise ValueError("think time must be a number >= 0 or a length distribution")
        return value


class TraceConfig(_Strict):
    """Replay of a request trace. format azure: the Azure LLM inference 2023 CSV (TIMESTAMP, ContextTokens,
    GeneratedTokens). columns: any CSV, with `columns` naming the arrival (seconds), prompt and output
    columns. mooncake: JSONL with timestamp (ms), input_length, output_length and prefix-block `hash_ids`.
    Arrival times are shifted to start at 0 and multiplied by `time_scale`; `limit` keeps the first rows."""

    path: str
    format: Literal["azure", "columns", "mooncake"] = "azure"
    columns: dict[str, str] = Field(default_factory=dict)
    time_scale: float = Field(default=1.0, gt=0)
    limit: int | None = Field(default=None, ge=1)
    hash_block_tokens: int = Field(default=512, ge=1)
    """mooncake: tokens per `hash_ids` entry (512 in the published Mooncake traces)."""


class RagConfig(_Strict):
    """Retrieval-augmented generation: each request's prompt is an instruction header, then the top_k
    retrieved passages in retrieval order, then a question unique to the request. Passages are drawn
    from a corpus by Zipf popularity. Details in docs/workloads.md."""

    passages: int = Field(default=10000, ge=1)
    passage_len: LengthDist = Field(default_factory=lambda: fixed(256))
    zipf_s: float = Field(default=1.0, ge=0)
    top_k: int = Field(default=5, ge=1)
    order: Literal["retrieval", "sorted"] = "retrieval"
    instructions: int = Field(default=1, ge=1)
    instruction_len: LengthDist = Field(default_factory=lambda: fixed(300))
    question_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=60, p50=40, max=1024))

    @model_validator(mode="after")
    def _check(self) -> RagConfig:
        if self.top_k > self.passages:
            raise ValueError("top_k must be <= passages")
        return self


class AgenticConfig(_Strict):
    """Agent episodes: a shared scaffold of tool descriptions and a task, then steps whose prompts re-send
    the whole episode so far (each step's tool call, i.e. its output, and the tool's output appended);
    a step may fork the episode into branches with different tool outputs. Details in docs/workloads.md."""

    scaffolds: int = Field(default=2, ge=1)
    scaffold_len: LengthDist = Field(default_factory=lambda: fixed(3000))
    zipf_s: float = Field(default=1.0, ge=0)
    task_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=200, p50=120, max=4096))
    steps: LengthDist = Field(default_factory=lambda: LengthDist(dist="uniform", low=2, high=10))
    tool_output_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=400, p50=200, max=8192))
    tool_time_s: LengthDist | Annotated[float, Field(ge=0)] = Field(
        default_factory=lambda: LengthDist(dist="uniform", low=1, high=3))
    """Seconds from a step's answer to the next step (the tool runs): a distribution or a number."""
    fork_prob: float = Field(default=0.05, ge=0, le=1)
    max_branches: int = Field(default=4, ge=1)
    max_context: int = Field(default=32768, ge=1)

    @field_validator("tool_time_s", mode="before")
    @classmethod
    def _tool_time_number(cls, value: object) -> object:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not value >= 0:
            raise ValueError("tool time must be a number >= 0 or a length distribution")
        return value


class WorkloadConfig(_Strict):
    """Which generator makes the request stream, and its parameters."""

    kind: Literal["synthetic", "chat", "trace", "rag", "agentic", "mix"] = "synthetic"
    arrival: Arrival = Field(default_factory=Arrival)
    prompt_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=600, p50=400, max=8192))
    output_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=250, p50=180, max=2048))
    n: int = Field(default=1, ge=1)
    beam_width: int = Field(default=1, ge=1)
    """Beam search width: w > 1 runs each request as w beams that share KV blocks (needs n: 1)."""
    chat: ChatConfig = Field(default_factory=ChatConfig)
    trace: TraceConfig | None = None
    rag: RagConfig = Field(default_factory=RagConfig)
    agentic: AgenticConfig = Field(default_factory=AgenticConfig)
    rereads: RereadConfig = Field(default_factory=RereadConfig)
    """Re-reads of earlier prompt content during decode, for token-level sparsity (docs/sparsity.md)."""
    mix: list[MixComponent] = Field(default_factory=list)
    """kind mix: the component workloads and their weights (shares of the arrival rate)."""

    @model_validator(mode="after")
    def _check(self) -> WorkloadConfig:
        if self.kind == "trace" and self.trace is None:
            raise ValueError("kind 'trace' needs a 'trace' section")
        if self.kind == "mix" and not self.mix:
            raise ValueError("kind 'mix' needs a 'mix' list of components")
        if self.beam_width > 1 and self.n > 1:
            raise ValueError("set either n (parallel sampling) or beam_width (beam search), not both")
        return self


class MixComponent(WorkloadConfig):
    """One workload of a `kind: mix`: any non-mix workload plus its weight. Components take the mix's
    arrival process with the rate scaled by weight / sum of weights, so they must not set `arrival`."""

    weight: float = Field(default=1.0, gt=0)

    @model_validator(mode="after")
    def _component(self) -> MixComponent:
        if self.kind == "mix":
            raise ValueError("a mix component cannot itself be a mix")
        if "arrival" in self.model_fields_set:
            raise ValueError("set 'arrival' on the mix, not on a component")
        return self


WorkloadConfig.model_rebuild()
