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


def test_at2_reads_the_same_bits_with_its_cells_kept_or_worked_out_anew():
    """at2 keeps each cell's coefficients once worked out (Plane.cells): a grid that works them out
    at every miss (its memo emptied before each read) reads the same bits along the same path."""
    rows = _rows([(b, c, 1e-6 * b ** 0.9 * (1 + c / 700) ** 1.1) for b in (1, 3, 8, 32)
                  for c in (16, 100, 900)])
    rng = np.random.default_rng(7)
    points = [(float(rng.uniform(1, 32)), float(rng.uniform(16, 900))) for _ in range(300)]
    points += [(3.0, 100.0), (8.0, 900.0), (1.0, 16.0), (32.0, 900.0)] * 3
    kept = KernelGrid.from_rows(rows, ("b", "c"))
    anew = KernelGrid.from_rows(rows, ("b", "c"))
    for p in points:
        anew.plane.cells.clear()
        assert kept.at2(*p) == anew.at2(*p)
        assert kept.plane.cell == anew.plane.cell
    assert len(kept.plane.cells) == 6  # every cell of the 4 x 3 grid visited, its coefficients kept


def test_one_axis_reads_unrolled_are_the_general_reads_bit_for_bit():
    """at1 (a one-axis grid, the all-reduce's) gives the general path's bits: at knots, between them, at
    a zero knot (linear there) and next to a hole (None)."""
    g = KernelGrid.from_rows(pd.DataFrame({"e": [0, 1, 7, 64, 4096, 1 << 20],
                                           "latency_s": [1e-6, 2e-6, 2.5e-6, 4e-6, 3e-5, 9e-4]}), ("e",))
    rng = np.random.default_rng(5)
    xs = [0.0, 0.5, 1.0, 7.0, 1 << 20, *rng.uniform(0, 1 << 20, 300).tolist(),
          *rng.uniform(0, 70, 300).tolist()]
    for x in xs:
        assert g(x) == g._at((x,))
    assert g(-1.0) is None and g(float(1 << 21)) is None
    holed = KernelGrid(("e",), (np.array([1.0, 2.0, 4.0]),), np.array([0.0, np.nan, 1.0]))
    assert holed(1.0) == holed._at((1.0,)) and holed(1.5) is None and holed(3.0) is None
