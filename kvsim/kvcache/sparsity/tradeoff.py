"""The policy trade-off table: what each variant of a `kvsim compare` run bought and what it cost.

`kvsim compare` writes every variant's full summary to compare.json; this module reads it (or a list of
(label, summary) pairs) and prints serving figures next to the `sparsity` figures. A variant with policy
none keeps all KV, so by definition its attention mass is 100%, nothing is lost and the gain is 1.00x.

    python -m kvsim.kvcache.sparsity.tradeoff compare_out/compare.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (summary key, header, format)
    ("requests.completed", "done", "int"),
    ("latency.ttft_s.p90", "TTFT p90 s", "num"),
    ("latency.tpot_s.mean", "TPOT mean s", "num"),
    ("latency.e2e_s.p50", "E2E p50 s", "num"),
    ("throughput.output_tokens_per_s", "out tok/s", "num"),
    ("concurrency.mean", "batched mean", "num"),
    ("preemptions", "preempt", "int"),
    ("kv.used_blocks_mean", "KV used", "pct"),
    ("kv_bound_concurrency", "KV-bound conc.", "num"),
    ("sparsity.memory_saved_fraction", "KV saved", "pct"),
    ("sparsity.concurrency_gain", "gain", "x"),
    ("sparsity.attention_mass_retained", "attn mass", "pct"),
    ("sparsity.reread_lost_fraction", "re-read lost", "pct"),
    ("sparsity.recall_bytes", "recalled GiB", "gib"),
    ("sparsity.stall_s", "stall s", "num"),
)
NONE_DEFAULTS = {"sparsity.memory_saved_fraction": 0.0, "sparsity.concurrency_gain": 1.0,
                 "sparsity.attention_mass_retained": 1.0, "sparsity.reread_lost_fraction": 0.0,
                 "sparsity.recall_bytes": 0.0, "sparsity.stall_s": 0.0}


def _dig(summary: dict[str, Any], dotted: str) -> Any:
    node: Any = summary
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _fmt(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "int":
        return f"{int(value):,}"
    if fmt == "pct":
        return f"{100 * value:.1f}%"
    if fmt == "x":
        return f"{value:.2f}x"
    if fmt == "gib":
        return f"{value / 2**30:.1f}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def kv_bound_concurrency(summary: dict[str, Any]) -> float | None:
    """Requests of this run's mix the KV pool could hold: concurrency.mean / kv.used_blocks_mean (the
    pool divided by the blocks an average running request held)."""
    conc, used = _dig(summary, "concurrency.mean"), _dig(summary, "kv.used_blocks_mean")
    return conc / used if conc is not None and used else None


def tradeoff_rows(variants: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per (label, summary)."""
    header = ["variant", *(h for _, h, _ in COLUMNS)]
    rows = []
    for label, summary in variants:
        plain = "sparsity" not in summary
        row = [label]
        for key, _, fmt in COLUMNS:
            value = kv_bound_concurrency(summary) if key == "kv_bound_concurrency" else _dig(summary, key)
            if value is None and plain:
                value = NONE_DEFAULTS.get(key)
            row.append(_fmt(value, fmt))
        rows.append(row)
    return header, rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def from_compare_json(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    return [(v["label"], v["summary"]) for v in doc["variants"]]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m kvsim.kvcache.sparsity.tradeoff COMPARE_OUT/compare.json")
    print(markdown(*tradeoff_rows(from_compare_json(args[0]))))


if __name__ == "__main__":
    main()
