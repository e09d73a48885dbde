"""The strict base of every scenario schema model, and the upper bounds its fields share.

Every model derived from `Strict`:
- refuses unknown keys;
- takes finite floats only: `.inf`, `.nan` and strings such as "1e999" are errors;
- never reads true/false as a number (pydantic's lax mode would take `block_size: true` as 1);
- reads an integer field as pydantic's lax mode does otherwise: an integer, or an integral float
  (16.0 is 16; 16.5 is an error), or a numeric string ("16").

Upper bounds keep products and sums of these numbers finite and keep what a number allocates (arrays of
requests, of passages, pool blocks) within memory. Each field names its bound in its `Field(le=...)`;
the shared ones are below.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

MAX_TOKENS = 1_000_000_000
"""Largest token length or token count anywhere in a scenario (a prompt, an output, a context)."""
MAX_SECONDS = 1e9
"""Largest time in seconds (a duration, a think time, a gap; about 31 years)."""
MIN_RATE = 1e-6
MAX_RATE = 1e6
"""Arrival rates in requests per second lie in [MIN_RATE, MAX_RATE] (a gap of at most about 12 days)."""
MAX_REQUESTS = 10_000_000
"""Most requests one run generates (simulation.requests, the arrivals within simulation.duration_s, the
turns and steps a chat or agentic stream draws): the request list and its arrays are O(requests)."""
MAX_SEGMENTS = 20_000_000
"""Most prompt segments in one request stream, summed over its requests (a chat turn's or agent step's
prompt lists every earlier piece of its session, so this grows with the square of the session length)."""
MAX_POOL = 1_000_000
"""Most items of a content pool drawn once per run (system prompts, passages, instructions, scaffolds)."""
MAX_ZIPF_S = 20.0
"""Largest Zipf exponent: beyond it the most popular item takes practically every draw."""
MAX_COUNT = 1_000_000
"""Largest other count (sequences per request, users, batch sequences, skipped segments)."""
MAX_SIGMA = 10.0
"""Largest lognormal sigma (given, or implied by mean and p50): e^10 is a 22,000-fold spread per standard
deviation; beyond it the draws are all clipped to min or max."""


class Strict(BaseModel):
    """Base of the scenario schema models: see the module docstring."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name and _number_field(cls, info.field_name):
            raise ValueError("expected a number, got a boolean")
        return value


@functools.cache
def _number_field(model: type[BaseModel], field: str) -> bool:
    """Whether the field takes an int or a float but not a bool (which lax mode would read as 0 / 1)."""
    info = model.model_fields.get(field)
    if info is None:
        return False
    types = set(_types(info.annotation))
    return bool(types & {int, float}) and not types & {bool, Any}


def _types(annotation: Any) -> list[Any]:
    """The classes an annotation is made of (through unions, Annotated, containers' own class)."""
    args = [a for a in get_args(annotation) if not isinstance(a, (str, int, float))]
    return [annotation] if not args else [t for a in args for t in _types(a)]


# ---- service-level objectives (scenario key `slo`; evaluated by kvsim/metrics/slo.py) ----

SLO_METRICS: tuple[str, ...] = ("ttft_s", "tpot_s", "e2e_s", "queue_s")
"""Request latency columns an SLO may bound (docs/metrics.md, Latency)."""

_STAT = re.compile(r"p(\d{1,3}(?:\.\d{1,6})?)")


def stat_quantile(stat: str) -> float:
    """The percentile of `pNN` (p50, p90, p99, p99.9, p100 = the maximum) as a number in (0, 100]."""
    m = _STAT.fullmatch(stat)
    q = float(m.group(1)) if m else -1.0
    if not 0 < q <= 100:
        raise ValueError(f"{stat!r} is not a percentile: write pNN with 0 < NN <= 100, e.g. p50, p99, p99.9")
    return q


@dataclass(frozen=True, slots=True)
class Objective:
    """One service-level objective: the metric's percentile `stat` (pNN) within `threshold_s` seconds."""

    metric: str
    stat: str
    threshold_s: float

    @classmethod
    def parse(cls, metric: Any, target: Any) -> Objective:
        """The objective of one `slo` entry (metric -> {pNN: threshold_s}); ValueError naming what is
        wrong."""
        if metric not in SLO_METRICS:
            raise ValueError(f"unknown metric {metric!r}; known: {', '.join(SLO_METRICS)}")
        if not isinstance(target, dict) or len(target) != 1:
            raise ValueError(f"{metric}: one percentile and its threshold in seconds, e.g. {{p99: 2.0}}")
        ((stat, threshold),) = target.items()
        try:
            stat_quantile(str(stat))
        except ValueError as e:
            raise ValueError(f"{metric}: {e}") from None
        if isinstance(threshold, str):  # (YAML reads 1e9 as text)
            try:
                threshold = float(threshold)
            except ValueError:
                pass
        ok = isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
        if not ok or not math.isfinite(threshold) or not 0 < threshold <= MAX_SECONDS:
            raise ValueError(f"{metric}.{stat}: the threshold must be a number of seconds in (0, "
                             f"{MAX_SECONDS:g}], got {threshold!r}")
        return cls(metric, str(stat), float(threshold))

    @property
    def quantile(self) -> float:
        """The percentile as a number in (0, 100]."""
        return stat_quantile(self.stat)

    def holds(self, value: float | None) -> bool:
        """Whether a measured value (None: none measured) is within the threshold."""
        return value is not None and value <= self.threshold_s

    def __str__(self) -> str:
        return f"{self.metric} {self.stat} <= {self.threshold_s:g} s"


def check_slo(slo: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The validated `slo` mapping (metric -> {pNN: threshold_s}); ValueError naming what is wrong."""
    if not isinstance(slo, dict) or not slo:
        raise ValueError("must map a metric to a percentile and a threshold, e.g. {ttft_s: {p99: 2.0}}")
    return {o.metric: {o.stat: o.threshold_s} for o in (Objective.parse(m, t) for m, t in slo.items())}


def objectives(slo: dict[str, dict[str, float]]) -> list[Objective]:
    """The Objective of each entry of a checked `slo`, in its order."""
    return [Objective.parse(metric, target) for metric, target in slo.items()]
