"""CI regression of the shipped kernel models: on every device with tables, each family's grids
(kvsim/cost/kernel_grid.py, as the kernel cost model builds them: all rows of a shape class, isotonic
along each axis) reproduce a sample of their own measured points (10 a shape class, 1% of a big one)
within the errors stored in tests/data/kernel_fit_points.json (docs/calibration.md). A change to the grid
code or to a table that loosens a fit fails here; regenerate the file with KVSIM_UPDATE_GOLDEN=1 only for
a change that is meant to move them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from kvsim.cost.kernel_grid import KernelGrid
from kvsim.cost.kernel_heldout import FAMILIES
from kvsim.specs.kernel_tables import SYSTEMS, load_kernel_tables

STORED = Path(__file__).parents[1] / "data" / "kernel_fit_points.json"
UPDATE = os.environ.get("KVSIM_UPDATE_GOLDEN") == "1"
SLACK = 0.002
"""Allowed rise of a stored median or p90 (0.2 points of relative error): float noise, not a loose fit."""


def fit_point_errors(profile: str) -> dict[str, list[float]]:
    """Family -> [points, median, p90] of |grid(point) / measured - 1| over the sampled points."""
    tables = load_kernel_tables(profile, lazy=True)
    out = {}
    for family, (keys, axes) in FAMILIES.items():
        if family not in tables:
            continue
        errs: list[float] = []
        for _, group in tables[family].groupby(list(keys), sort=True):
            if len(group) < 2:
                continue
            grid = KernelGrid.from_rows(group, axes)
            sample = group.iloc[::max(1, len(group) // max(10, len(group) // 100))]  # >= 1% of a big class
            for point, true in zip(sample[list(axes)].to_numpy(np.float64),
                                   sample["latency_s"].to_numpy(np.float64), strict=True):
                got = grid(*point)
                if got is not None:
                    errs.append(abs(got / true - 1))
        e = np.asarray(errs)
        out[family] = [len(e), round(float(np.median(e)), 4), round(float(np.quantile(e, 0.9)), 4)]
    return out


@pytest.mark.parametrize("profile", sorted(SYSTEMS.values()))
def test_every_device_reproduces_its_measured_points(profile):
    got = fit_point_errors(profile)
    stored = json.loads(STORED.read_text(encoding="utf-8")) if STORED.exists() else {}
    if UPDATE:
        stored[profile] = got
        STORED.write_text(json.dumps(dict(sorted(stored.items())), indent=1) + "\n", encoding="utf-8")
    want = stored[profile]
    assert sorted(got) == sorted(want), "families changed: regenerate with KVSIM_UPDATE_GOLDEN=1"
    for family, (points, median, p90) in want.items():
        g = got[family]
        assert g[0] == points, (family, "points sampled")
        assert g[1] <= median + SLACK and g[2] <= p90 + SLACK, (profile, family, g, want[family])
        assert g[1] <= 0.05, (profile, family, "a fit's median error at its own points over 5%")
