"""Compare columns by hand: the optional sparsity group appears only when a variant has the section, a
variant without it takes the by-definition values, KV-bound concurrency is derived, and the table, CSV
and JSON carry the same figures."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from rich.console import Console
from rich.table import Table

from kvsim.sweep.columns import COLUMNS, GOODPUT, LORA, SPARSITY, format_value, kv_bound_concurrency, select
from kvsim.sweep.compare import (
    TIMELINE_KEEP,
    Variant,
    VariantResult,
    compare_frame,
    table_rows,
    table_width,
    write_compare,
)

SPARSE = {"memory_saved_fraction": 0.75, "concurrency_gain": 4.0, "attention_mass_retained": 0.9,
          "reread_lost_fraction": None, "recall_bytes": 3 * 2**30, "stall_s": 0.25}


def summary(conc: float, used: float, sparsity=None) -> dict:
    s = {"requests": {"completed": 10}, "throughput": {"requests_per_s": 2.0, "output_tokens_per_s": 1234.5},
         "latency": {"ttft_s": {"p50": 0.5}, "e2e_s": {"p50": 3.0}}, "concurrency": {"mean": conc, "max": 30},
         "kv": {"breakdown": {"token_states": 0.4, "reservation": 0.0, "internal_fragmentation": 0.05,
                              "external_fragmentation": 0.0, "free": 0.55},
                "sharing_saving": 0.1, "used_blocks_mean": used},
         "preemptions": 3}
    if sparsity is not None:
        s["sparsity"] = sparsity
    return s


def result(policy: str, s: dict) -> VariantResult:
    return VariantResult(Variant((("kv.sparsity.policy", policy),)), s, "abc",
                         pd.DataFrame(columns=list(TIMELINE_KEEP)))


def test_kv_bound_concurrency():
    assert kv_bound_concurrency(summary(20.0, 0.5)) == 40.0  # 20 running requests held half the pool
    assert kv_bound_concurrency(summary(20.0, 0.0)) is None


def test_group_appears_only_with_its_section():
    plain = [summary(20.0, 0.5)]
    assert [c.key for c in select(plain)] == [k for k, _, _ in COLUMNS]
    assert len(select(plain, always=True)) == (len(COLUMNS) + len(GOODPUT.columns) + len(SPARSITY.columns)
                                                + len(LORA.columns))
    assert len(select(plain, groups=(SPARSITY,), always=True)) == len(COLUMNS) + len(SPARSITY.columns)
    assert len(select([*plain, summary(25.0, 0.125, SPARSE)])) == len(COLUMNS) + 7


def test_table_csv_and_json_carry_the_sparsity_figures(tmp_path):
    results = [result("none", summary(20.0, 0.5)), result("h2o", summary(25.0, 0.125, SPARSE))]
    header, rows = table_rows(results)
    assert header[0] == "kv.sparsity.policy" and len(header) == 1 + len(COLUMNS) + 7
    assert header[1:5] == ["completed", "KV-bound conc.", "KV saved", "attn mass"]  # what sparsity varies
    cells = [dict(zip(header, row, strict=True)) for row in rows]
    assert [cells[0][k] for k in ("completed", "served req/s", "out tok/s")] == ["10", "2", "1,234"]
    labels = ["KV-bound conc.", "KV saved", "gain", "attn mass", "re-read lost", "recalled GiB", "stall s"]
    # none: 20 / 0.5 = 40 requests; nothing saved, gain 1, all mass, nothing lost or recalled
    assert [cells[0][k] for k in labels] == ["40", "0.0%", "1.00x", "100.0%", "0.0%", "0.0", "0"]
    # h2o: 25 / 0.125 = 200; 3 GiB recalled; re-read lost is None in its own section -> "-"
    assert [cells[1][k] for k in labels] == ["200", "75.0%", "4.00x", "90.0%", "-", "3.0", "0.25"]

    frame = compare_frame(results)
    assert list(frame["kv_bound_concurrency"]) == [40.0, 200.0]
    assert list(frame["sparsity.memory_saved_fraction"]) == [0.0, 0.75]
    assert list(frame["sparsity.attention_mass_retained"]) == [1.0, 0.9]

    write_compare(tmp_path, results)
    csv = pd.read_csv(tmp_path / "compare.csv")
    assert list(csv.columns[-7:]) == [k for k, _, _ in SPARSITY.columns]
    assert list(csv["sparsity.recall_bytes"]) == [0.0, 3 * 2**30]
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert doc["columns"][-7] == {"key": "kv_bound_concurrency", "label": "KV-bound conc.", "format": "num"}
    assert doc["variants"][0]["figures"]["sparsity.concurrency_gain"] == 1.0
    assert doc["variants"][1]["figures"]["kv_bound_concurrency"] == 200.0
    assert doc["variants"][1]["summary"]["sparsity"] == SPARSE


def test_table_width_fits_every_cell():
    assert table_width(["a", "bb"], [["ccc", "d"]]) == (3 + 3) + (2 + 3) + 1
    results = [result("none", summary(20.0, 0.5)), result("h2o", summary(25.0, 0.125, SPARSE))]
    header, rows = table_rows(results)
    table = Table()
    for col in header:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console = Console(width=table_width(header, rows), record=True, file=io.StringIO())
    console.print(table)
    text = console.export_text()
    assert "…" not in text and all(h in text for h in header)


def test_format_value():
    assert format_value(None, "pct") == "-" and format_value(0.1234, "pct") == "12.3%"
    assert format_value(1234, "int") == "1,234" and format_value(2.5, "num") == "2.5"
    assert format_value(12345.6, "num") == "12,346" and format_value(float("nan"), "num") == "-"
    assert format_value(4, "x") == "4.00x" and format_value(1.5 * 2**30, "gib") == "1.5"


def test_goodput_group_with_an_slo():
    with_slo = {**summary(20.0, 0.5), "goodput": {"requests_per_s": 1.5, "fraction": 0.75},
                "slo": {"attained": False}}
    cols = select([summary(20.0, 0.5), with_slo])
    assert [c.key for c in cols][-len(GOODPUT.columns):] == [k for k, _, _ in GOODPUT.columns]
    texts = [c.text(with_slo) for c in cols if c.group is GOODPUT]
    assert texts[-3:] == ["1.5", "75.0%", "no"]
    assert format_value(True, "bool") == "yes"


def test_fit_drops_from_the_right_and_the_comparison_orders_first():
    from kvsim.sweep.columns import Picked, first_for, fit, ordered

    cols = [Picked("requests.completed", "completed", "int"), Picked("a", "a", "num"),
            Picked("preemptions", "preempt", "int"), Picked("b", "b", "num")]
    kept, dropped = fit(cols, [10, 10, 10, 10], limit=25, fixed=5)
    assert [c.key for c in kept] == ["requests.completed", "a"]
    assert [c.key for c in dropped] == ["preemptions", "b"]
    kept, dropped = fit(cols, [10, 10, 10, 10], limit=100, fixed=5)
    assert len(kept) == 4 and not dropped
    layout = first_for(["kv.layout"])
    assert layout[:5] == ["requests.completed", "kv.breakdown.token_states", "kv.breakdown.reservation",
                          "kv.breakdown.internal_fragmentation", "kv.breakdown.external_fragmentation"]
    assert first_for(["kv.tiers"])[1] == "prefix_cache.hit_rate_tokens"
    assert first_for(["something.else"])[1:3] == ["throughput.requests_per_s", "latency.ttft_s.p50"]
    assert [c.key for c in ordered(cols, ["scheduler.policy"])] == ["requests.completed", "preemptions", "a",
                                                                    "b"]


def test_resolve_metrics_keys_shorthands_and_aliases():
    from kvsim.sweep.columns import resolve_metrics

    s = {"latency": {"ttft_s": {"p99": 1.5}}, "goodput": {"requests_per_s": 2.0},
         "kv": {"capacity_tokens": 100, "utilization_mean": 0.5}, "slo": {"attained": True}}
    cols = resolve_metrics(["ttft_s.p99", "goodput", "capacity", "kv.utilization_mean", "slo.attained"], [s])
    assert [c.key for c in cols] == ["latency.ttft_s.p99", "goodput.requests_per_s", "kv.capacity_tokens",
                                     "kv.utilization_mean", "slo.attained"]
    assert [c.fmt for c in cols] == ["num", "num", "int", "pct", "bool"]
    assert [c.text(s) for c in cols] == ["1.5", "2", "100", "50.0%", "yes"]
    with pytest.raises(ValueError, match="--metrics 'nope': no such figure"):
        resolve_metrics(["nope"], [s])
