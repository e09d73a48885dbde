"""The `sparsity` summary section from hand-built frames."""

from __future__ import annotations

import pandas as pd
import pytest

from kvsim.metrics.sparsity import sparsity_rows, sparsity_section
from kvsim.metrics.summary import _fmt, _pct, _per_replica_mean

META = {
    "capacity_blocks": 100, "block_size": 16,
    "sparsity": {"policy": "h2o", "reclaim": "block", "budget_tokens": 512, "budget_fraction": None,
                 "offload": False, "compaction_copy_bytes": 0.0, "offload_bytes": 0.0, "recall_bytes": 0.0,
                 "host_bytes_max": 0.0, "host_bandwidth": 1e9, "decode_kv_tokens_full": 1000,
                 "decode_kv_tokens_kept": 400.0},
}


def frames():
    timeline = pd.DataFrame({
        "replica": [0, 0], "hold_s": [1.0, 3.0], "kv_full_tokens": [100, 200], "kv_token_states": [50, 40],
        "kv_full_blocks": [8, 14], "kv_table_blocks": [4, 4], "kv_hole_slots": [0, 16],
    })
    requests = pd.DataFrame({
        "sparsity_decode_steps": [10, 30], "sparsity_mass": [0.9, 0.8], "sparsity_rereads": [1, 2],
        "sparsity_reread_tokens": [100, 300], "sparsity_reread_lost_tokens": [50.0, 60.0],
        "sparsity_recalled_tokens": [0.0, 0.0], "sparsity_stall_s": [0.0, 0.0],
    })
    return requests, timeline


def test_section_hand_computed():
    requests, timeline = frames()
    sp = sparsity_section(requests, timeline, META, _per_replica_mean, concurrency_mean=2.0)
    assert sp["kv_tokens_full_mean"] == pytest.approx((100 + 3 * 200) / 4)
    assert sp["kv_tokens_retained_mean"] == pytest.approx((50 + 3 * 40) / 4)
    assert sp["retained_fraction"] == pytest.approx(42.5 / 175)
    assert sp["kv_blocks_full_mean"] == pytest.approx(12.5) and sp["kv_blocks_held_mean"] == 4
    assert sp["memory_saved_fraction"] == pytest.approx(1 - 4 / 12.5)
    assert sp["concurrency_gain"] == pytest.approx(3.125)
    assert sp["max_concurrency_supported"] == pytest.approx(100 / (4 / 2))
    assert sp["max_concurrency_supported_full"] == pytest.approx(100 / (12.5 / 2))
    assert sp["hole_fraction_mean"] == pytest.approx(3 * 16 / 1600 / 4)
    assert sp["decode_kv_read_fraction"] == pytest.approx(0.4)
    assert sp["attention_mass_retained"] == pytest.approx((10 * 0.9 + 30 * 0.8) / 40)
    assert (sp["rereads"], sp["reread_tokens"]) == (3, 400)
    assert sp["reread_lost_fraction"] == pytest.approx(110 / 400)
    assert sp["policy"] == "h2o" and sp["budget_tokens"] == 512


def test_rows():
    requests, timeline = frames()
    sp = sparsity_section(requests, timeline, META, _per_replica_mean, concurrency_mean=2.0)
    rows = dict(sparsity_rows(sp, _fmt, _pct))
    assert rows["sparsity policy / budget / reclaim"] == "h2o / 512 tokens / block"
    assert rows["KV memory saved / concurrency gain"] == "68.0% / 3.12x"
    assert rows["re-reads / tokens / lost"] == "3 / 400 / 27.5%"
    assert rows["KV hole slots mean (of capacity)"] == "0.8%"
    assert sparsity_rows(None, _fmt, _pct) == []


def test_transfer_bound_iterations():
    """The cost model's split, recorded per iteration: iteration 0's prefetch exceeded its compute
    (transfer-bound) and left 5 ms exposed, iteration 1's was hidden but for its first layer's fetch
    (0.5 ms); the idle row does not count. Recalls and offload writes (serial) do not enter."""
    requests, timeline = frames()
    timeline = pd.concat([timeline, timeline.iloc[:1]], ignore_index=True)
    timeline["iteration"] = [0, 1, -1]
    timeline["dt_s"] = [0.015, 0.020, 0.0]
    timeline["recall_bytes"] = [8e6, 1e6, 0.0]
    timeline["offload_bytes"] = [2e6, 0.0, 0.0]
    timeline["prefetch_exposed_s"] = [0.005, 0.0005, 0.0]
    timeline["transfer_bound"] = [1, 0, 0]
    meta = {**META, "sparsity": {**META["sparsity"], "offload": True, "prefetch": True}}
    sp = sparsity_section(requests, timeline, meta, _per_replica_mean, concurrency_mean=2.0)
    assert sp["stall_iterations"] == 1 and sp["stall_iteration_fraction"] == pytest.approx(0.5)
    assert sp["stall_exposed_s"] == pytest.approx(0.0055)
    assert META["sparsity"]["offload"] is False
    plain = sparsity_section(requests, frames()[1], META, _per_replica_mean, concurrency_mean=2.0)
    assert plain["stall_iterations"] == 0 and plain["stall_iteration_fraction"] is None
