"""Pydantic schema of the `workload` section of a scenario. Bounds: kvsim/schema.py."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from kvsim.schema import (
    MAX_COUNT,
    MAX_POOL,
    MAX_RATE,
    MAX_SECONDS,
    MAX_SIGMA,
    MAX_TOKENS,
    MAX_ZIPF_S,
    MIN_RATE,
    Strict,
)
from kvsim.workload.bench_serve_config import BenchServeConfig
from kvsim.workload.rereads import RereadConfig

MAX_TOP_K = 256
MAX_PATH = 4096
MAX_NAME = 1000
MAX_MIX_COMPONENTS = 64
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS)]


def _no_nul(path: str) -> str:
    if "\x00" in path:
        raise ValueError("a file path cannot hold a NUL character")
    return path


FilePath = Annotated[str, Field(max_length=MAX_PATH), AfterValidator(_no_nul)]
"""A file path: at most 4096 characters, no NUL."""


class LengthDist(Strict):
    """A token-length distribution.

    fixed: `value`. uniform: integers in [low, high]. lognormal: by `mean` and either `p50` (median) or
    `sigma`. empirical: samples drawn with replacement from `path` (one number per line, or a CSV `column`).
    Every draw is clipped to [min, max]. Every number is at most MAX_TOKENS (10^9); sigma, given or
    implied by mean and p50 (sqrt(2 ln(mean / p50))), at most MAX_SIGMA (10).
    """

    dist: Literal["fixed", "uniform", "lognormal", "empirical"] = "fixed"
    value: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    low: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    high: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    mean: float | None = Field(default=None, gt=0, le=MAX_TOKENS)
    p50: float | None = Field(default=None, gt=0, le=MAX_TOKENS)
    sigma: float | None = Field(default=None, gt=0, le=MAX_SIGMA)
    path: FilePath | None = None
    column: str | None = Field(default=None, max_length=MAX_NAME)
    min: int = Field(default=1, ge=1, le=MAX_TOKENS)
    max: int = Field(default=1_000_000, ge=1, le=MAX_TOKENS)

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
            if self.p50 is not None and 2.0 * (math.log(self.mean) - math.log(self.p50)) > MAX_SIGMA ** 2:
                raise ValueError(f"lognormal p50 {self.p50:g} is too far below mean {self.mean:g} (the "
                                 f"implied sigma, sqrt(2 ln(mean / p50)), must be at most {MAX_SIGMA:g})")
        if self.min > self.max:
            raise ValueError("min must be <= max")
        return self


class LengthPairs(Strict):
    """Paired empirical lengths: each request draws one row of a CSV file (with replacement) and takes its
    prompt and output lengths together, keeping their correlation (what drawing two `empirical`
    columns independently loses). Values as `empirical` files: finite numbers from 0 to MAX_TOKENS,
    rounded, at least 1."""

    path: FilePath
    prompt_column: str = Field(default="prompt", max_length=MAX_NAME)
    output_column: str = Field(default="output", max_length=MAX_NAME)


def fixed(n: int) -> LengthDist:
    return LengthDist(dist="fixed", value=n)


class Arrival(Strict):
    """Arrival process. poisson: exponential gaps at `rate` req/s. gamma: gamma gaps with mean 1/rate and
    coefficient of variation `cv` (cv > 1 is burstier than Poisson). fixed: constant gap 1/rate.
    closed_loop: `users` users, each sends its next request `think_time_s` after the previous completes."""

    process: Literal["poisson", "gamma", "fixed", "closed_loop"] = "poisson"
    rate: float = Field(default=16.0, ge=MIN_RATE, le=MAX_RATE)
    """Arrivals per second, in [1e-6, 1e6]: requests for synthetic and rag, sessions (their first turns)
    for chat, episodes for agentic (RATE_UNITS)."""
    cv: float = Field(default=1.0, ge=0.001, le=100)
    """gamma: in [0.001, 100] (the gamma shape 1/cv^2 stays within [1e-4, 1e6]); for a constant gap use
    process: fixed."""
    users: int = Field(default=16, ge=1, le=MAX_COUNT)
    """closed_loop: at most 10^6."""
    think_time_s: float = Field(default=0.0, ge=0, le=MAX_SECONDS)
    """closed_loop: seconds from a completion to the user's next request, at most 10^9."""


class ChatConfig(Strict):
    """Chat sessions: a pool of shared system prompts, multi-turn sessions whose prompt carries the
    history (system prompt + every earlier user turn and answer), think time between turns."""

    system_prompts: int = Field(default=4, ge=1, le=MAX_POOL)
    system_prompt_len: LengthDist = Field(default_factory=lambda: fixed(512))
    zipf_s: float = Field(default=1.0, ge=0, le=MAX_ZIPF_S)
    """Popularity exponent of the system prompts, in [0, 20]."""
    turns: LengthDist = Field(default_factory=lambda: LengthDist(dist="uniform", low=1, high=6))
    user_turn_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=120, p50=80, max=4096))
    think_time_s: LengthDist | Seconds = Field(
        default_factory=lambda: LengthDist(dist="uniform", low=2, high=20))
    """Seconds between an answer and the next user turn: a distribution (drawn as real numbers, not rounded),
    or a plain number of seconds (may be 0, at most 10^9)."""
    abandon_prob: float = Field(default=0.0, ge=0, le=1)
    max_context: int = Field(default=32768, ge=1, le=MAX_TOKENS)
    """At most 10^9 tokens."""

    @field_validator("think_time_s", mode="before")
    @classmethod
    def _think_number(cls, value: object) -> object:
        return _seconds_or_dist(value, "think time")


class TraceConfig(Strict):
    """Replay of a request trace. format azure: the Azure LLM inference 2023 CSV (TIMESTAMP, ContextTokens,
    GeneratedTokens). columns: any CSV, with `columns` naming the arrival (seconds), prompt and output
    columns. mooncake: JSONL with timestamp (ms), input_length, output_length and prefix-block `hash_ids`.
    Arrival times are shifted to start at 0 and multiplied by `time_scale`; `limit` keeps the first rows."""

    path: FilePath
    format: Literal["azure", "columns", "mooncake"] = "azure"
    columns: dict[str, Annotated[str, Field(max_length=MAX_NAME)]] = Field(default_factory=dict)
    time_scale: float = Field(default=1.0, gt=0, le=1e6)
    """At most 10^6; the scaled trace must span at most 10^9 s."""
    limit: int | None = Field(default=None, ge=1)
    """Rows read (a trace holds at most 10^7 without it)."""
    hash_block_tokens: int = Field(default=512, ge=1, le=MAX_TOKENS)
    """mooncake: tokens per `hash_ids` entry (512 in the published Mooncake traces)."""


class RagConfig(Strict):
    """Retrieval-augmented generation: each request's prompt is an instruction header, then the top_k
    retrieved passages in retrieval order, then a question unique to the request. Passages are drawn
    from a corpus by Zipf popularity. Details in docs/workloads.md."""

    passages: int = Field(default=10000, ge=1, le=MAX_POOL)
    """Corpus size, at most 10^6 (each passage's length is drawn once per run)."""
    passage_len: LengthDist = Field(default_factory=lambda: fixed(256))
    zipf_s: float = Field(default=1.0, ge=0, le=MAX_ZIPF_S)
    """Popularity exponent of the passages, in [0, 20]."""
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K)
    """Passages per prompt, at most 256."""
    order: Literal["retrieval", "sorted"] = "retrieval"
    instructions: int = Field(default=1, ge=1, le=MAX_POOL)
    instruction_len: LengthDist = Field(default_factory=lambda: fixed(300))
    question_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=60, p50=40, max=1024))

    @model_validator(mode="after")
    def _check(self) -> RagConfig:
        if self.top_k > self.passages:
            raise ValueError("top_k must be <= passages")
        return self


class AgenticConfig(Strict):
    """Agent episodes: a shared scaffold of tool descriptions and a task, then steps whose prompts re-send
    the whole episode so far (each step's tool call, i.e. its output, and the tool's output appended);
    a step may fork the episode into branches with different tool outputs. Details in docs/workloads.md."""

    scaffolds: int = Field(default=2, ge=1, le=MAX_POOL)
    scaffold_len: LengthDist = Field(default_factory=lambda: fixed(3000))
    zipf_s: float = Field(default=1.0, ge=0, le=MAX_ZIPF_S)
    """Popularity exponent of the scaffolds, in [0, 20]."""
    task_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=200, p50=120, max=4096))
    steps: LengthDist = Field(default_factory=lambda: LengthDist(dist="uniform", low=2, high=10))
    tool_output_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=400, p50=200, max=8192))
    tool_time_s: LengthDist | Seconds = Field(
        default_factory=lambda: LengthDist(dist="uniform", low=1, high=3))
    """Seconds from a step's answer to the next step (the tool runs): a distribution or a number (at most
    10^9)."""
    fork_prob: float = Field(default=0.05, ge=0, le=1)
    max_branches: int = Field(default=4, ge=1, le=MAX_COUNT)
    """At most 10^6."""
    max_context: int = Field(default=32768, ge=1, le=MAX_TOKENS)
    """At most 10^9 tokens."""

    @field_validator("tool_time_s", mode="before")
    @classmethod
    def _tool_time_number(cls, value: object) -> object:
        return _seconds_or_dist(value, "tool time")


def _seconds_or_dist(value: object, what: str) -> object:
    """A plain number of seconds must be a finite number in [0, MAX_SECONDS] (checked here, so the error
    names the rule instead of both union members)."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number of seconds or a length distribution, got a boolean")
    if isinstance(value, (int, float)) and not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{what} must be a number of seconds in [0, {MAX_SECONDS:g}] or a length "
                         "distribution")
    return value


WORKLOAD_KINDS: tuple[str, ...] = ("synthetic", "chat", "trace", "rag", "agentic", "mix", "bench_serve")
"""The `workload.kind` names: each one's generator is in kvsim/workload/factory.py `_GENERATORS`."""
WorkloadKind = Literal[WORKLOAD_KINDS]

RATE_UNITS: dict[str, str] = {"synthetic": "requests/s", "rag": "requests/s", "chat": "sessions/s",
                              "agentic": "episodes/s", "mix": "arrivals/s", "trace": "requests/s",
                              "bench_serve": "requests/s"}
"""What `workload.arrival.rate` counts per second, by workload kind: a chat session or agent episode starts
with its first request and brings its later turns / steps itself; a mix's rate counts its components' own
units (a session or a request each)."""


def rate_unit(kind: str | None) -> str:
    """The unit of `workload.arrival.rate` for a workload kind (RATE_UNITS; requests/s if unknown)."""
    return RATE_UNITS.get(kind or "", "requests/s")


class WorkloadConfig(Strict):
    """Which generator makes the request stream, and its parameters. `arrival.rate` counts requests per
    second for synthetic and rag, sessions per second for chat, episodes per second for agentic
    (RATE_UNITS); each run's summary gives the offered request rate whatever the kind."""

    kind: WorkloadKind = "synthetic"
    arrival: Arrival = Field(default_factory=Arrival)
    prompt_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=600, p50=400, max=8192))
    output_len: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="lognormal", mean=250, p50=180, max=2048))
    length_pairs: LengthPairs | None = None
    """synthetic: (prompt, output) lengths drawn as rows of a file, instead of prompt_len / output_len."""
    n: int = Field(default=1, ge=1, le=MAX_COUNT)
    """Parallel samples per request (at most scheduler.max_num_seqs: they run in one batch)."""
    beam_width: int = Field(default=1, ge=1, le=MAX_COUNT)
    """Beam search width: w > 1 runs each request as w beams that share KV blocks (needs n: 1; at most
    scheduler.max_num_seqs)."""
    chat: ChatConfig = Field(default_factory=ChatConfig)
    trace: TraceConfig | None = None
    rag: RagConfig = Field(default_factory=RagConfig)
    agentic: AgenticConfig = Field(default_factory=AgenticConfig)
    rereads: RereadConfig = Field(default_factory=RereadConfig)
    """Re-reads of earlier prompt content during decode, for token-level sparsity (docs/sparsity.md)."""
    mix: list[MixComponent] = Field(default_factory=list, max_length=MAX_MIX_COMPONENTS)
    """kind mix: the component workloads and their weights (shares of the arrival rate); at most 64."""
    bench_serve: BenchServeConfig | None = None
    """kind bench_serve: `vllm bench serve`'s flags (docs/workloads.md); unset: vLLM's defaults."""

    @model_validator(mode="after")
    def _check(self) -> WorkloadConfig:
        if self.kind == "trace" and self.trace is None:
            raise ValueError("kind 'trace' needs a 'trace' section")
        if self.kind == "mix" and not self.mix:
            raise ValueError("kind 'mix' needs a 'mix' list of components")
        for section, owner in _KIND_SECTIONS:
            if getattr(self, section) not in (None, []) and self.kind != owner:
                raise ValueError(f"'{section}' is for kind '{owner}', this workload is kind '{self.kind}' "
                                 f"(set workload.kind: {owner}, or drop '{section}')")
        if self.length_pairs is not None:
            both = {"prompt_len", "output_len"} & self.model_fields_set
            if both:
                raise ValueError(f"set either 'length_pairs' or '{sorted(both)[0]}', not both")
        if self.beam_width > 1 and self.n > 1:
            raise ValueError("set either n (parallel sampling) or beam_width (beam search), not both")
        if self.kind == "bench_serve":
            if self.bench_serve is None:
                self.bench_serve = BenchServeConfig()
            for key in _NOT_BENCH_SERVE:
                if key in self.model_fields_set:
                    raise ValueError("kind 'bench_serve' takes its requests from 'bench_serve' (num_prompts, "
                                     f"dataset, request_rate, max_concurrency, ...), not '{key}'")
        return self

    def client_concurrency(self) -> int | None:
        """The benchmark client's limit on requests in flight (bench_serve.max_concurrency), or None."""
        return self.bench_serve.max_concurrency if self.kind == "bench_serve" and self.bench_serve else None


_KIND_SECTIONS = (("trace", "trace"), ("mix", "mix"), ("length_pairs", "synthetic"),
                  ("bench_serve", "bench_serve"))
"""(section, the one workload kind that reads it): set under another kind it is an error, not ignored."""
_NOT_BENCH_SERVE = ("arrival", "prompt_len", "output_len", "length_pairs", "n", "beam_width", "chat", "trace",
                    "rag", "agentic", "mix")
"""WorkloadConfig keys a bench_serve workload does not read (the client sends one sequence per request)."""


class MixComponent(WorkloadConfig):
    """One workload of a `kind: mix`: any non-mix workload plus its weight. Components take the mix's
    arrival process with the rate scaled by weight / sum of weights, so they must not set `arrival`."""

    weight: float = Field(default=1.0, ge=1e-6, le=1e6)
    """In [1e-6, 1e6]."""

    @model_validator(mode="after")
    def _component(self) -> MixComponent:
        if self.kind == "mix":
            raise ValueError("a mix component cannot itself be a mix")
        if self.kind == "bench_serve":
            raise ValueError("a mix component cannot be a bench_serve client (it runs alone)")
        if "arrival" in self.model_fields_set:
            raise ValueError("set 'arrival' on the mix, not on a component")
        return self


WorkloadConfig.model_rebuild()
