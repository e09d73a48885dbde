"""The policy trade-off table: what each variant of a `kvsim compare` run bought and what it cost.

`kvsim compare` already prints the sparsity figures when a variant has a policy on (the column group
kvsim.sweep.columns.SPARSITY); this module reprints a saved compare.json as a markdown table with the
serving figures a policy moves (tail TTFT, TPOT, KV used) next to that same group, always shown. A
variant with policy none keeps all KV, so by definition its attention mass is 100%, nothing is lost and
the gain is 1.00x.

    python -m kvsim.sweep.tradeoff compare_out/compare.json
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kvsim.errors import KvsimError
from kvsim.inputs import parse_json, read_text
from kvsim.sweep.columns import SPARSITY, Column, kv_bound_concurrency, select

__all__ = ["SERVING", "from_compare_json", "kv_bound_concurrency", "main", "markdown", "tradeoff_rows"]

SERVING: tuple[Column, ...] = (
    ("requests.completed", "done", "int"),
    ("latency.ttft_s.p90", "TTFT p90 s", "num"),
    ("latency.tpot_s.mean", "TPOT mean s", "num"),
    ("latency.e2e_s.p50", "E2E p50 s", "num"),
    ("throughput.output_tokens_per_s", "out tok/s", "num"),
    ("concurrency.mean", "batched mean", "num"),
    ("preemptions", "preempt", "int"),
    ("kv.used_blocks_mean", "KV used", "pct"),
)
"""The serving figures before the sparsity group."""


def tradeoff_rows(variants: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per (label, summary)."""
    cols = select((s for _, s in variants), SERVING, (SPARSITY,), always=True)
    header = ["variant", *(c.label for c in cols)]
    rows = [[label, *(c.text(summary) for c in cols)] for label, summary in variants]
    return header, rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def from_compare_json(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """(label, summary) of every variant in a compare.json that `kvsim compare` wrote."""
    doc = parse_json(read_text(path, "compare.json"), str(path))
    try:
        return [(str(v["label"]), dict(v["summary"])) for v in doc["variants"]]
    except (KeyError, TypeError, ValueError):
        raise KvsimError(f"{path}: not a compare.json written by kvsim compare") from None


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m kvsim.sweep.tradeoff COMPARE_OUT/compare.json")
    try:
        print(markdown(*tradeoff_rows(from_compare_json(args[0]))))
    except KvsimError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
