"""The per-request row of token-level sparsity."""

from __future__ import annotations

import math

from kvsim.engine.sparse_columns import REQUEST_COLUMNS
from kvsim.engine.sparse_state import RequestStats


def test_row():
    rs = RequestStats(decode_steps=4, full_sum=400, kept_sum=100.0, mass_sum=3.6, full_tokens=103,
                      kept_tokens=25.0, fired=1, reread_tokens=50, lost_tokens=20.0)
    row = dict(zip(REQUEST_COLUMNS, rs.row(), strict=True))
    assert row["sparsity_kept_fraction"] == 0.25 and math.isclose(row["sparsity_mass"], 0.9)
    assert row["sparsity_reread_lost_tokens"] == 20.0
    empty = dict(zip(REQUEST_COLUMNS, RequestStats().row(), strict=True))
    assert math.isnan(empty["sparsity_mass"]) and empty["sparsity_decode_steps"] == 0
