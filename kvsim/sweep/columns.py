"""The figures `kvsim compare` (and the sparsity trade-off table) put side by side: which summary keys,
their labels and formats, and the optional column groups that appear only when a variant's summary has
their section (e.g. `sparsity`, present with kv.sparsity.policy set). docs/metrics.md defines every key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Column = tuple[str, str, str]
"""(summary key, table label, format: int | num | pct | x | gib | bool)."""

COLUMNS: tuple[Column, ...] = (
    ("requests.completed", "completed", "int"),
    ("throughput.offered_requests_per_s", "offered req/s", "num"),
    ("throughput.requests_per_s", "served req/s", "num"),
    ("throughput.output_tokens_per_s", "out tok/s", "num"),
    ("latency.ttft_s.p50", "TTFT p50 s", "num"),
    ("latency.ttft_s.p99", "TTFT p99 s", "num"),
    ("latency.tpot_s.p50", "TPOT p50 s", "num"),
    ("latency.e2e_s.p50", "E2E p50 s", "num"),
    ("concurrency.mean", "batched", "num"),
    ("concurrency.max", "batched max", "int"),
    ("kv.capacity_tokens", "KV tokens", "int"),
    ("kv.breakdown.token_states", "KV states", "pct"),
    ("kv.breakdown.reservation", "reserved", "pct"),
    ("kv.breakdown.internal_fragmentation", "int. frag", "pct"),
    ("kv.breakdown.external_fragmentation", "ext. frag", "pct"),
    ("kv.breakdown.free", "free", "pct"),
    ("kv.sharing_saving", "shared saving", "pct"),
    ("prefix_cache.hit_rate_tokens", "hit rate", "pct"),
    ("cost.usd_per_million_output_tokens", "$/M out tok", "num"),
    ("preemptions", "preempt", "int"),
)
"""The figures every compare table shows, in table order."""


@dataclass(slots=True, frozen=True)
class ColumnGroup:
    """Columns shown only when at least one summary has the top-level key `section`. A summary without
    it takes `absent[key]` (a value true by definition, e.g. policy none keeps 100% of the attention
    mass), or None ("-") for keys not listed there."""

    section: str
    columns: tuple[Column, ...]
    absent: dict[str, Any] = field(default_factory=dict)


def dig(summary: dict[str, Any], dotted: str) -> Any:
    """summary["a"]["b"]... for "a.b...", None where a part is missing."""
    node: Any = summary
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def kv_bound_concurrency(summary: dict[str, Any]) -> float | None:
    """Requests of this run's mix the KV pool could hold: concurrency.mean / kv.used_blocks_mean (the
    pool divided by the share of it an average running request held)."""
    conc, used = dig(summary, "concurrency.mean"), dig(summary, "kv.used_blocks_mean")
    return conc / used if conc is not None and used else None


DERIVED: dict[str, Callable[[dict[str, Any]], Any]] = {"kv_bound_concurrency": kv_bound_concurrency}
"""Column keys computed from a summary rather than read from it."""

SPARSITY = ColumnGroup(
    "sparsity",
    (
        ("kv_bound_concurrency", "KV-bound conc.", "num"),
        ("sparsity.memory_saved_fraction", "KV saved", "pct"),
        ("sparsity.concurrency_gain", "gain", "x"),
        ("sparsity.attention_mass_retained", "attn mass", "pct"),
        ("sparsity.reread_lost_fraction", "re-read lost", "pct"),
        ("sparsity.recall_bytes", "recalled GiB", "gib"),
        ("sparsity.stall_s", "stall s", "num"),
    ),
    {"sparsity.memory_saved_fraction": 0.0, "sparsity.concurrency_gain": 1.0,
     "sparsity.attention_mass_retained": 1.0, "sparsity.reread_lost_fraction": 0.0,
     "sparsity.recall_bytes": 0.0, "sparsity.stall_s": 0.0},
)
"""Token-level sparsity figures (docs/sparsity.md); a variant without a policy keeps all KV."""

GOODPUT = ColumnGroup(
    "goodput",
    (
        ("latency.tpot_s.p99", "TPOT p99 s", "num"),
        ("goodput.requests_per_s", "goodput/s", "num"),
        ("goodput.fraction", "meet SLO", "pct"),
        ("slo.attained", "SLO met", "bool"),
    ),
)
"""With an `slo` (docs/metrics.md, slo and goodput): the tail latencies it bounds, goodput, attained."""

LORA = ColumnGroup(
    "lora",
    (
        ("lora.kv_capacity_lost.tokens", "KV lost to LoRA", "num"),
        ("lora.gpu_hit_rate", "adapter in GPU", "pct"),
        ("lora.load_stall_s", "LoRA stall s", "num"),
        ("lora.skipped_requests", "LoRA skipped", "num"),
    ),
    {"lora.kv_capacity_lost.tokens": 0, "lora.load_stall_s": 0.0, "lora.skipped_requests": 0},
)
"""Multi-LoRA figures (docs/lora.md); a variant without a lora section loses no KV and loads nothing."""

OPTIONAL_GROUPS: tuple[ColumnGroup, ...] = (GOODPUT, SPARSITY, LORA)


@dataclass(slots=True, frozen=True)
class Picked:
    """One column of a table, with the optional group it belongs to (None for a base column)."""

    key: str
    label: str
    fmt: str
    group: ColumnGroup | None = None

    def value(self, summary: dict[str, Any]) -> Any:
        derive = DERIVED.get(self.key)
        v = derive(summary) if derive is not None else dig(summary, self.key)
        if v is None and self.group is not None and self.group.section not in summary:
            v = self.group.absent.get(self.key)
        return v

    def text(self, summary: dict[str, Any]) -> str:
        return format_value(self.value(summary), self.fmt)


def select(summaries: Iterable[dict[str, Any]], base: tuple[Column, ...] = COLUMNS,
           groups: tuple[ColumnGroup, ...] = OPTIONAL_GROUPS, always: bool = False) -> list[Picked]:
    """The base columns, then each group's columns if some summary has its section (or `always`)."""
    sections = set().union(*(s.keys() for s in summaries))
    picked = [Picked(*c) for c in base]
    for g in groups:
        if always or g.section in sections:
            picked += [Picked(*c, group=g) for c in g.columns]
    return picked


FIRST: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("kv.layout", "kv.placement"),
     ("kv.breakdown.token_states", "kv.breakdown.reservation", "kv.breakdown.internal_fragmentation",
      "kv.breakdown.external_fragmentation", "concurrency.mean", "throughput.requests_per_s",
      "latency.ttft_s.p50")),
    (("kv.prefix_cache", "kv.eviction", "kv.tier"),
     ("prefix_cache.hit_rate_tokens", "latency.ttft_s.p50", "latency.ttft_s.p99",
      "throughput.requests_per_s", "concurrency.mean")),
    (("kv.sparsity",),
     ("kv_bound_concurrency", "sparsity.memory_saved_fraction", "sparsity.attention_mass_retained",
      "sparsity.reread_lost_fraction", "latency.tpot_s.p50", "concurrency.mean")),
    (("router", "cluster", "parallelism"),
     ("throughput.requests_per_s", "latency.ttft_s.p50", "latency.ttft_s.p99", "prefix_cache.hit_rate_tokens",
      "goodput.requests_per_s", "cost.usd_per_million_output_tokens")),
    (("scheduler",),
     ("latency.ttft_s.p50", "latency.ttft_s.p99", "latency.tpot_s.p50", "throughput.requests_per_s",
      "concurrency.mean", "preemptions")),
    (("kv.block_size", "kv.dtype", "kv.gpu_memory_utilization", "kv.num_gpu_blocks_override", "kv.swap",
      "kv.watermark", "kv.activation"),
     ("kv.capacity_tokens", "concurrency.mean", "kv.breakdown.internal_fragmentation", "preemptions",
      "throughput.output_tokens_per_s", "latency.ttft_s.p99")),
    (("model", "hardware", "cost", "pricing"),
     ("kv.capacity_tokens", "throughput.output_tokens_per_s", "latency.ttft_s.p50", "latency.tpot_s.p50",
      "cost.usd_per_million_output_tokens")),
    (("workload", "simulation"),
     ("throughput.offered_requests_per_s", "throughput.requests_per_s", "latency.ttft_s.p99",
      "latency.e2e_s.p50", "goodput.requests_per_s", "concurrency.mean")),
)
"""By what a comparison varies (a key or its prefix), the figures that matter to it: a table narrowed to
the terminal shows them first, in this order."""
DEFAULT_FIRST: tuple[str, ...] = (
    "throughput.requests_per_s", "latency.ttft_s.p50", "latency.ttft_s.p99", "concurrency.mean",
    "kv.capacity_tokens", "kv.breakdown.token_states", "preemptions")
"""The first figures of a comparison FIRST does not name."""
WITH_SLO: tuple[str, ...] = ("goodput.requests_per_s", "slo.attained")
"""With an slo, these follow the comparison's own first figures."""


def first_for(varied: Iterable[str]) -> list[str]:
    """The figures a comparison of the `varied` keys shows first (FIRST; DEFAULT_FIRST otherwise), in
    order, each once."""
    out: list[str] = ["requests.completed"]
    matched = False
    for key in varied:
        for prefixes, figures in FIRST:
            if any(key == p or key.startswith(p) for p in prefixes):
                out += figures
                matched = True
    if not matched:
        out += DEFAULT_FIRST
    out += WITH_SLO
    return list(dict.fromkeys(out))


def ordered(cols: list[Picked], varied: Iterable[str]) -> list[Picked]:
    """The columns with those that matter to the comparison (first_for) first, the rest in their order."""
    rank = {k: i for i, k in enumerate(first_for(varied))}
    return sorted(cols, key=lambda c: (rank.get(c.key, len(rank)), cols.index(c)))


ALIASES: dict[str, str] = {
    "goodput": "goodput.requests_per_s", "capacity": "kv.capacity_tokens",
    "kv_capacity": "kv.capacity_tokens",
    "cost": "cost.usd_per_million_output_tokens", "hit_rate": "prefix_cache.hit_rate_tokens",
    "throughput": "throughput.requests_per_s",
}
"""--metrics shorthands."""


def resolve_metrics(items: list[str], summaries: list[dict[str, Any]]) -> list[Picked]:
    """--metrics names -> columns: a summary key (latency.ttft_s.p99), a latency key without `latency.`
    (ttft_s.p99), or an alias (goodput, capacity, cost, hit_rate, throughput). ValueError naming one that
    no summary has."""
    out: list[Picked] = []
    for item in items:
        name = item.strip()
        key = None
        for cand in (ALIASES.get(name, name), f"latency.{name}"):
            if any(cand in DERIVED or dig(s, cand) is not None for s in summaries):
                key = cand
                break
        if key is None:
            raise ValueError(f"--metrics {name!r}: no such figure in the summaries (a summary.json key "
                             f"such as latency.ttft_s.p99, throughput.requests_per_s, kv.capacity_tokens; "
                             f"or {', '.join(ALIASES)})")
        sample = next((dig(s, key) for s in summaries if dig(s, key) is not None), None)
        out.append(Picked(key, name, _guess_format(key, sample)))
    return out


def _guess_format(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if key.endswith(("fraction", "utilization_mean", "utilization_max", "hit_rate_tokens", "saving")) or \
            key.startswith("kv.breakdown."):
        return "pct"
    return "int" if isinstance(value, int) else "num"


def fit(cols: list[Picked], widths: list[int], limit: int, fixed: int) -> tuple[list[Picked], list[Picked]]:
    """(kept, dropped): columns (each `widths[i]` wide in the table, `fixed` for the label column and the
    border) left out from the right until the table is at most `limit` wide; the first column stays."""
    kept = list(range(len(cols)))
    total = fixed + sum(widths)
    for i in reversed(range(1, len(cols))):
        if total <= limit:
            break
        kept.remove(i)
        total -= widths[i]
    dropped = [cols[i] for i in range(len(cols)) if i not in kept]
    return [cols[i] for i in kept], dropped


def format_value(value: Any, fmt: str) -> str:
    """A figure as the tables print it; None and non-finite values print as "-"."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    if fmt == "bool":
        return "yes" if value else "no"
    if fmt == "pct":
        return f"{100 * value:.1f}%"
    if fmt == "int":
        return f"{int(value):,}"
    if fmt == "x":
        return f"{value:.2f}x"
    if fmt == "gib":
        return f"{value / 2**30:.1f}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
