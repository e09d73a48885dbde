"""Held-out accuracy of the kernel grids (kvsim/cost/kernel_heldout.py): exact on a power law by hand,
and the shipped H200 tables within the bands docs/calibration.md states (a change to the grid code or the
tables that breaks a fit fails here)."""

from __future__ import annotations

import pandas as pd
import pytest

from kvsim.cost.kernel_heldout import FAMILIES, held_out, held_out_errors
from kvsim.specs.kernel_tables import load_kernel_tables


def test_a_power_law_is_predicted_exactly_and_every_fifth_interior_value_is_held_out():
    rows = [{"kernel": "k", "b": b, "c": c, "latency_s": 1e-6 * b ** 0.5 * c}
            for b in (1, 2, 4, 8, 16, 32, 64, 128) for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)]
    err, unreached = held_out_errors(pd.DataFrame(rows), ("kernel",), ("b", "c"))
    # b holds out position 2 (4); c positions 2 and 7 (4, 128): 10 + 2 x 8 - 2 rows on both
    assert len(err) == 10 + 2 * 8 - 2 and unreached == 0
    assert err.max() < 1e-12


@pytest.mark.parametrize("table, median, p90", [
    ("decode_attention", 0.05, 0.15), ("prefill_attention", 0.05, 0.15), ("gemm", 0.05, 0.15),
    ("allreduce", 0.05, 0.15)])
def test_shipped_h200_tables_within_the_documented_bands(table, median, p90):
    h = held_out(load_kernel_tables("h200"), table)
    assert h.rows > 10 and h.median <= median and h.p90 <= p90, h
    assert set(FAMILIES) >= {table}


@pytest.mark.parametrize("table", ["mla_decode", "mla_prefill", "gdn"])
def test_shipped_h200_mla_and_gdn_tables_within_the_attention_bands(table):
    """The layer-kind tables the kernel model reads for MLA and Gated-DeltaNet layers
    (kvsim/cost/kernel_attention.py): held to the attention targets, median <= 5%, p90 <= 15%."""
    h = held_out(load_kernel_tables("h200"), table)
    assert h.rows > 1000 and h.median <= 0.05 and h.p90 <= 0.15, h
