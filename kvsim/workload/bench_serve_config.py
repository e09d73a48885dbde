"""Pydantic schema of `workload.bench_serve`: the keys of `vllm bench serve`'s flags (docs/workloads.md,
"kind: bench_serve", lists each flag, its key and the vLLM source it follows)."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from kvsim.schema import MAX_COUNT, MAX_RATE, MAX_REQUESTS, MAX_TOKENS, MIN_RATE, Strict

MAX_BURSTINESS = 1e6
MIN_BURSTINESS = 1e-4
MAX_SPECIAL_TOKENS = 16


def _no_nul(path: str) -> str:
    if "\x00" in path:
        raise ValueError("a file path cannot hold a NUL character")
    return path


def _inf_or_number(value: object, what: str, low: float, high: float) -> object:
    """The word inf (any case; YAML's .inf is refused as every infinite number is) or a finite number in
    [low, high]: checked here so that the error names the rule instead of both members of the union."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number or inf, got a boolean")
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity"):
        return "inf"
    number = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = math.nan
    if isinstance(number, (int, float)) and not low <= number <= high:  # NaN and .inf fail too
        raise ValueError(f"{what} must be the word inf or a number in [{low:g}, {high:g}], got {value!r}")
    return value


Rate = Annotated[float, Field(ge=MIN_RATE, le=MAX_RATE)]
Burstiness = Annotated[float, Field(ge=MIN_BURSTINESS, le=MAX_BURSTINESS)]


class BenchServeConfig(Strict):
    """`vllm bench serve` as a workload: the client's dataset, request rate, burstiness and
    --max-concurrency, each key named after the flag (--random-input-len -> random_input_len).

    Lengths: random: integers drawn uniformly from [floor(L (1 - r)), ceil(L (1 + r))] (both ends
    included) for L = random_input_len - num_special_tokens and for random_output_len (low at least 1),
    then random_prefix_len + num_special_tokens added to the prompt; sharegpt: (prompt, output) rows of
    `dataset_path` in a random order. Send times: request_rate inf sends every request at 0; otherwise
    gamma gaps with shape burstiness and mean 1/request_rate. max_concurrency: a request waits at the
    client for one of that many slots."""

    num_prompts: int = Field(default=1000, ge=1, le=MAX_REQUESTS)
    """--num-prompts (vLLM's default 1000), at most 10^7; simulation.requests (default 2000) still caps the
    run, keeping the first requests of the schedule."""
    dataset: Literal["random", "sharegpt"] = "random"
    """--dataset-name: random, or sharegpt from a file of (prompt, output) token counts."""
    dataset_path: Annotated[str, Field(max_length=4096), AfterValidator(_no_nul)] | None = None
    """sharegpt: a CSV with `prompt` and `output` columns of token counts, e.g.
    workloads/lengths/sharegpt_v3_vllm_bench_llama3.csv (relative: to the scenario file's folder, else the
    working directory)."""
    sharegpt_output_len: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    """--sharegpt-output-len: every sharegpt request's output length (unset: the row's)."""
    random_input_len: int = Field(default=1024, ge=1, le=MAX_TOKENS)
    """--random-input-len (vLLM's default 1024)."""
    random_output_len: int = Field(default=128, ge=1, le=MAX_TOKENS)
    """--random-output-len (vLLM's default 128)."""
    random_range_ratio: float = Field(default=0.0, ge=0.0, lt=1.0)
    """--random-range-ratio, in [0, 1)."""
    random_prefix_len: int = Field(default=0, ge=0, le=MAX_TOKENS)
    """--random-prefix-len: a prefix every prompt shares (prefix caching can hit it)."""
    num_special_tokens: int = Field(default=0, ge=0, le=MAX_SPECIAL_TOKENS)
    """Special tokens the server's tokenizer adds to each prompt (1 for a BOS token, as Llama's): vLLM
    samples random_input_len minus this many and the server adds them back. At most 16."""
    request_rate: Rate | Literal["inf"] = "inf"
    """--request-rate in requests per second, in [1e-6, 1e6], or inf (vLLM's default: every request at 0)."""
    burstiness: Burstiness | Literal["inf"] = 1.0
    """--burstiness: the gamma shape of the gaps (1: Poisson; below 1 burstier), in [1e-4, 1e6], or inf
    (gaps of exactly 1/request_rate)."""
    rate_schedule: Literal["rescaled", "legacy"] = "rescaled"
    """rescaled: vllm/benchmarks/serve.py's schedule (each request one gap after the previous, the first one
    gap after 0, the whole schedule scaled so the last request goes at num_prompts / request_rate);
    legacy: benchmarks/benchmark_serving.py's (the first request at 0, gaps unscaled)."""
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    """--max-concurrency: requests in flight at most (unset: no limit), at most 10^6."""
    metric_percentiles: list[Annotated[float, Field(ge=0, le=100)]] = Field(
        default_factory=lambda: [99.0], min_length=1, max_length=16)
    """--metric-percentiles: the percentiles summary.json's bench_serve section gives of each latency
    (vLLM's default 99), each in [0, 100], at most 16."""
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1)
    """--seed: the random dataset's lengths drawn as vLLM draws them (numpy default_rng(seed)), the same
    integers vLLM's client sends; unset: from simulation.seed's stream like every other draw."""

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rate(cls, value: object) -> object:
        return _inf_or_number(value, "request_rate", MIN_RATE, MAX_RATE)

    @field_validator("burstiness", mode="before")
    @classmethod
    def _burstiness(cls, value: object) -> object:
        return _inf_or_number(value, "burstiness", MIN_BURSTINESS, MAX_BURSTINESS)

    @model_validator(mode="after")
    def _check(self) -> BenchServeConfig:
        if self.dataset == "sharegpt":
            if self.dataset_path is None:
                raise ValueError("dataset 'sharegpt' needs 'dataset_path': a CSV of (prompt, output) token "
                                 "counts, e.g. workloads/lengths/sharegpt_v3_vllm_bench_llama3.csv")
            random_keys = sorted(k for k in self.model_fields_set if k.startswith("random_"))
            if random_keys:
                raise ValueError(f"'{random_keys[0]}' is for dataset 'random', not 'sharegpt'")
        else:
            for key in ("dataset_path", "sharegpt_output_len"):
                if key in self.model_fields_set:
                    raise ValueError(f"'{key}' is for dataset 'sharegpt', not 'random'")
            lo, _ = self.input_interval()
            if self.random_prefix_len + lo + self.num_special_tokens < 1:
                raise ValueError(f"random_input_len {self.random_input_len} with random_range_ratio "
                                 f"{self.random_range_ratio:g} and random_prefix_len 0 can draw empty "
                                 "prompts; raise random_input_len or random_prefix_len, or lower the ratio")
            if self.random_prefix_len + self.input_interval()[1] + self.num_special_tokens > MAX_TOKENS:
                raise ValueError(f"random_prefix_len + random_input_len x (1 + ratio) passes "
                                 f"{MAX_TOKENS:,} tokens")
        if self.request_rate == "inf" and "burstiness" in self.model_fields_set:
            raise ValueError("'burstiness' needs a finite request_rate (vLLM ignores it at rate inf)")
        return self

    def input_interval(self) -> tuple[int, int]:
        """The random dataset's sampled input lengths [low, high] (both included), before the prefix and
        special tokens: floor(L (1 - r)) and ceil(L (1 + r)) for L = random_input_len - num_special_tokens
        (at least 0)."""
        real = max(0, self.random_input_len - self.num_special_tokens)
        r = self.random_range_ratio
        return math.floor(real * (1 - r)), math.ceil(real * (1 + r))

    def output_interval(self) -> tuple[int, int]:
        """The random dataset's output lengths [low, high]: floor(O (1 - r)) and ceil(O (1 + r)), each at
        least 1."""
        out = self.random_output_len
        r = self.random_range_ratio
        return max(1, math.floor(out * (1 - r))), max(1, math.ceil(out * (1 + r)))

