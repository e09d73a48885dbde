"""KernelGrid (kvsim/cost/kernel_grid.py): exact at measured points, log-log multilinear between them,
None outside the grid or at a hole, isotonic along each axis."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kvsim.cost.kernel_grid import KernelGrid, _isotonic


def _rows(points):
    return pd.DataFrame([{"b": b, "c": c, "latency_s": t} for b, c, t in points])


def test_exact_at_points_and_geometric_between():
    g = KernelGrid.from_rows(_rows([(1, 1, 1e-5), (4, 1, 4e-5), (1, 16, 2e-5), (4, 16, 8e-5)]), ("b", "c"))
    assert g(1, 1) == pytest.approx(1e-5) and g(4, 16) == pytest.approx(8e-5)
    # (2, 4) is halfway in log2 along both axes: the geometric mean of the four corners
    assert g(2, 4) == pytest.approx(math.exp(np.mean(np.log([1e-5, 4e-5, 2e-5, 8e-5]))))
    # along one edge a power law: latency ~ b at c = 1, so b = 2 gives 2e-5
    assert g(2, 1) == pytest.approx(2e-5)
    assert g(8, 1) is None and g(0.5, 1) is None and g(2, 32) is None


def test_a_hole_at_a_corner_has_no_value_and_repeated_points_take_their_median():
    g = KernelGrid.from_rows(_rows([(1, 1, 1e-5), (4, 1, 4e-5), (1, 16, 2e-5),
                                    (1, 1, 3e-5), (1, 1, 2e-5)]), ("b", "c"))
    assert g(1, 1) == pytest.approx(2e-5)
    assert g(2, 4) is None  # (4, 16) was never measured
    assert g(1, 4) is not None  # the b = 1 edge is whole


def test_isotonic_pools_violators_and_keeps_holes():
    out = _isotonic(np.array([1.0, 3.0, 2.0, np.nan, 4.0]))
    assert out[:3].tolist() == [1.0, 2.5, 2.5] and math.isnan(out[3]) and out[4] == 4.0
    g = KernelGrid.from_rows(pd.DataFrame({"b": [1, 2, 4], "latency_s": [2e-5, 1e-5, 4e-5]}), ("b",))
    assert g(1) == g(2) == pytest.approx(math.sqrt(2e-10))  # pooled in log space
    raw = KernelGrid.from_rows(pd.DataFrame({"b": [1, 2, 4], "latency_s": [2e-5, 1e-5, 4e-5]}), ("b",),
                               monotone=False)
    assert raw(2) == pytest.approx(1e-5)
