"""The trade-off table built from compare.json summaries."""

from __future__ import annotations

import json

from kvsim.sweep.tradeoff import from_compare_json, kv_bound_concurrency, markdown, tradeoff_rows


def summary(sparsity=None):
    s = {"requests": {"completed": 10}, "latency": {"ttft_s": {"p90": 1.5}, "tpot_s": {"mean": 0.02},
                                                    "e2e_s": {"p50": 3.0}},
         "throughput": {"output_tokens_per_s": 1234.5}, "concurrency": {"mean": 20.0}, "preemptions": 3,
         "kv": {"used_blocks_mean": 0.5}}
    if sparsity is not None:
        s["sparsity"] = sparsity
    return s


def test_rows(tmp_path):
    sp = {"memory_saved_fraction": 0.75, "concurrency_gain": 4.0, "attention_mass_retained": 0.9,
          "reread_lost_fraction": 0.5, "recall_bytes": 3 * 2**30, "stall_s": 0.25}
    doc = {"variants": [{"label": "p=none", "summary": summary()},
                        {"label": "p=h2o", "summary": summary(sp)}]}
    path = tmp_path / "compare.json"
    path.write_text(json.dumps(doc))
    header, rows = tradeoff_rows(from_compare_json(path))
    assert header[:3] == ["variant", "done", "TTFT p90 s"] and len(header) == len(rows[0])
    assert kv_bound_concurrency(summary()) == 40.0  # 20 running requests held half the pool
    assert rows[0] == ["p=none", "10", "1.5", "0.02", "3", "1,234", "20", "3", "50.0%", "40", "0.0%", "1.00x",
                       "100.0%", "0.0%", "0.0", "0"]
    assert rows[1][-6:] == ["75.0%", "4.00x", "90.0%", "50.0%", "3.0", "0.25"]
    assert markdown(header, rows).splitlines()[1] == "|" + "---|" * len(header)
