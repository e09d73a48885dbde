"""Time of one kernel call read off a measured grid: multilinear interpolation in log space.

A kernel table (kvsim/specs/kernel_tables.py) holds, for one shape class (say decode attention with
8 query heads, 1 KV head, head_dim 128, bf16), latencies on a rectilinear grid of its size axes (batch x
context). Between grid points the latency is interpolated linearly in log(latency) over log(axis value):
a power law between neighbours, exact at every measured point. Along an axis where the kernel can only
get slower with size (`monotone`), the measured log latencies are first replaced by the nearest
non-decreasing sequence along each axis (isotonic least squares: a run of points that measured faster
than the one before is pooled with it), so timing noise never makes a larger batch cheaper. A point
outside the grid, or one whose cell has an unmeasured corner, has no value (None): the caller falls back
to its roofline there and says so.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass

import numpy as np


def _isotonic(line: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence nearest `line` in least squares (pool adjacent violators), over its
    measured (non-NaN) entries; NaN entries stay NaN."""
    out = line.copy()
    idx = np.flatnonzero(~np.isnan(line))
    blocks: list[list[float]] = []  # [sum, count]
    for v in line[idx]:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
    fitted = np.array([s / n for s, n in blocks for _ in range(int(n))], dtype=np.float64)
    out[idx] = fitted
    return out


def _isotonic_lines(lines: np.ndarray) -> np.ndarray:
    """`_isotonic` of each row of a 2-d array without NaN, at once: the least-squares non-decreasing fit
    is f_j = max over i <= j of min over k >= j of mean(x_i..x_k) (Barlow et al., 1972)."""
    count, n = lines.shape
    sums = np.concatenate([np.zeros((count, 1)), np.cumsum(lines, axis=1)], axis=1)
    out = np.full((count, n), -np.inf)
    for i in range(n):  # one start i at a time: only k >= i, no [line, i, k] array
        means = (sums[:, i + 1:] - sums[:, i:i + 1]) / np.arange(1, n - i + 1)  # mean(x_i..x_k), k >= i
        tail_min = np.minimum.accumulate(means[:, ::-1], axis=1)[:, ::-1]  # min over k >= j, j >= i
        np.maximum(out[:, i:], tail_min, out=out[:, i:])
    return out


def _isotonic_along(logs: np.ndarray, axis: int) -> np.ndarray:
    """`_isotonic` of every line of `logs` along `axis`: lines without holes vectorised, the rest one by
    one."""
    moved = np.moveaxis(logs, axis, -1)
    shape = moved.shape
    lines = moved.reshape(-1, shape[-1]).copy()
    holes = np.isnan(lines).any(axis=1)
    if (~holes).any() and shape[-1] > 1:
        lines[~holes] = _isotonic_lines(lines[~holes])
    for row in np.flatnonzero(holes):
        lines[row] = _isotonic(lines[row])
    return np.moveaxis(lines.reshape(shape), -1, axis)


@dataclass(frozen=True, slots=True)
class KernelGrid:
    """`axes[i]`: the sorted values of axis i; `log_latency`: log of seconds at each grid point (NaN where
    not measured)."""

    names: tuple[str, ...]
    axes: tuple[np.ndarray, ...]
    log_latency: np.ndarray
    axes_list: tuple[list[float], ...] = ()
    log_axes: tuple[list[float], ...] = ()
    values: list = None  # log_latency as nested lists (plain floats: read per lookup)
    plane: Plane | None = None  # at2's reads (two axes of at least two values each)

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes_list", tuple(a.tolist() for a in self.axes))
        object.__setattr__(self, "log_axes", tuple(np.log(np.maximum(a, 1e-300)).tolist() for a in self.axes))
        object.__setattr__(self, "values", self.log_latency.tolist())
        if len(self.axes) == 2 and min(map(len, self.axes)) > 1:
            object.__setattr__(self, "plane", Plane(self.axes_list, self.log_axes, self.values))

    @classmethod
    def from_rows(cls, rows, axis_names: tuple[str, ...], monotone: bool = True,
                  fastest: bool = False) -> KernelGrid:
        """The grid of a frame's rows (one row per point; repeated points keep their median, or with
        `fastest` their minimum)."""
        axes = tuple(np.unique(rows[a].to_numpy(np.float64)) for a in axis_names)
        values = np.full(tuple(len(a) for a in axes), np.nan)
        idx = tuple(np.searchsorted(ax, rows[a].to_numpy(np.float64))
                    for ax, a in zip(axes, axis_names, strict=True))
        lat = rows["latency_s"].to_numpy(np.float64)
        flat = np.ravel_multi_index(idx, values.shape)
        order = np.argsort(flat, kind="stable")
        flat, lat = flat[order], lat[order]
        starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]])
        ends = np.r_[starts[1:], len(flat)]
        if len(starts) == len(flat):
            values.flat[flat] = lat
        elif fastest:  # (fmin: a NaN latency is skipped, as pandas' groupby min skips it)
            values.flat[flat[starts]] = np.fmin.reduceat(lat, starts)
        else:
            values.flat[flat[starts]] = [np.median(lat[s:e]) for s, e in zip(starts, ends, strict=True)]
        logs = np.log(values)
        if monotone:
            for axis in range(logs.ndim):
                logs = _isotonic_along(logs, axis)
        return cls(axis_names, axes, logs)

    def __call__(self, *point: float) -> float | None:
        """Seconds at `point` (one value per axis), or None outside the grid or in a cell with a hole."""
        if len(point) == 2 and len(self.axes_list[0]) > 1 and len(self.axes_list[1]) > 1:
            return self.at2(point[0], point[1])
        if len(point) == 1 and len(self.axes_list[0]) > 1:
            return self.at1(point[0])
        return self._at(point)

    def _at(self, point: tuple[float, ...]) -> float | None:
        """__call__ on any grid: each corner of the point's cell weighted, in corner order."""
        lo_idx, weights = [], []
        for ax, lax, x in zip(self.axes_list, self.log_axes, point, strict=True):
            if x < ax[0] or x > ax[-1]:
                return None
            n = len(ax)
            if n == 1:
                lo_idx.append(0)
                weights.append(0.0)
                continue
            i = min(bisect_right(ax, x) - 1, n - 2)
            a = ax[i]
            lo_idx.append(i)
            weights.append((math.log(x) - lax[i]) / (lax[i + 1] - lax[i]) if a > 0 else
                           (x - a) / (ax[i + 1] - a))
        values = self.values
        total = 0.0
        for corner in range(1 << len(lo_idx)):
            w = 1.0
            v = values
            for d, i in enumerate(lo_idx):
                up = corner >> d & 1
                if up and len(self.axes_list[d]) == 1:
                    w = 0.0
                    break
                t = weights[d]
                w *= t if up else 1.0 - t
                v = v[i + up]
            if w == 0.0:
                continue
            if v != v:
                return None
            total += w * v
        return math.exp(total)

    def at1(self, x: float) -> float | None:
        """__call__ for a grid of one axis of at least two values (the all-reduce: once per iteration
        the forward-time memo misses), unrolled: the same two corner terms in the same order."""
        ax = self.axes_list[0]
        if x < ax[0] or x > ax[-1]:
            return None
        lax = self.log_axes[0]
        i = bisect_right(ax, x) - 1
        if i > len(ax) - 2:
            i = len(ax) - 2
        a = ax[i]
        t = (math.log(x) - lax[i]) / (lax[i + 1] - lax[i]) if a > 0 else (x - a) / (ax[i + 1] - a)
        values = self.values
        total = 0.0
        w = 1.0 - t
        if w != 0.0:
            v = values[i]
            if v != v:
                return None
            total += w * v
        if t != 0.0:
            v = values[i + 1]
            if v != v:
                return None
            total += t * v
        return math.exp(total)

    def at2(self, x: float, y: float) -> float | None:
        """__call__ for a grid of two axes of at least two values each (Plane.at2)."""
        return self.plane.at2(x, y)


class Plane:
    """The reads of a grid of two axes of at least two values each (decode and prefill attention: once per
    iteration). Bilinear in (log x, log y) within a cell is a + b u + c v + d u v; the last cell's
    coefficients are kept (`cell`, and its bounds), and consecutive reads (batch and mean context change
    slowly) mostly land in it; a read outside it takes the four corners' terms, in order, and keeps its
    cell. Each cell's coefficients are worked out once (`cells`)."""

    __slots__ = ("ax", "ay", "lx", "ly", "values", "cells", "cell", "x_lo", "x_hi", "y_lo", "y_hi", "a", "b",
                 "c", "d", "x_min", "x_max", "y_min", "y_max")

    def __init__(self, axes_list: tuple[list[float], ...], log_axes: tuple[list[float], ...],
                 values: list) -> None:
        self.ax, self.ay = axes_list
        self.lx, self.ly = log_axes
        self.values = values
        self.cells: dict[int, tuple[float, ...]] = {}
        """i * len(ay) + j -> cell (i, j)'s (x lo, x hi, y lo, y hi, a, b, c, d), or () (see _keep_cell)."""
        self.cell: tuple[float, ...] = ()
        """The last cell's (x lo, x hi, y lo, y hi, a, b, c, d), or () (none, or a cell without them),
        also held one by one (x_lo ... d)."""
        self.x_lo = self.x_hi = self.y_lo = self.y_hi = self.a = self.b = self.c = self.d = 0.0
        self.x_min, self.x_max, self.y_min, self.y_max = self.ax[0], self.ax[-1], self.ay[0], self.ay[-1]

    def at2(self, x: float, y: float) -> float | None:
        if self.cell and self.x_lo <= x <= self.x_hi and self.y_lo <= y <= self.y_hi:
            u, v = math.log(x), math.log(y)
            return math.exp(self.a + self.b * u + self.c * v + self.d * u * v)
        return self._at2_cell(x, y)

    def _at2_cell(self, x: float, y: float) -> float | None:
        if x < self.x_min or x > self.x_max or y < self.y_min or y > self.y_max:
            return None
        ax, ay = self.ax, self.ay
        # (each list item read into a local first: compiled, a C double, no float made per operation)
        i = _right(ax, x) - 1
        if i > len(ax) - 2:
            i = len(ax) - 2
        lo_v, hi_v = ax[i], ax[i + 1]
        if lo_v > 0:
            l0, l1 = self.lx[i], self.lx[i + 1]
            tx = (math.log(x) - l0) / (l1 - l0)
        else:
            tx = (x - lo_v) / (hi_v - lo_v)
        j = _right(ay, y) - 1
        if j > len(ay) - 2:
            j = len(ay) - 2
        lo_v, hi_v = ay[j], ay[j + 1]
        if lo_v > 0:
            l0, l1 = self.ly[j], self.ly[j + 1]
            ty = (math.log(y) - l0) / (l1 - l0)
        else:
            ty = (y - lo_v) / (hi_v - lo_v)
        r0, r1 = self.values[i], self.values[i + 1]
        self._keep_cell(i, j)
        # the four corners' terms in order (w, v): (1-tx)(1-ty) r0[j], (1-tx) ty r0[j+1], tx (1-ty) r1[j],
        # tx ty r1[j+1]; a zero weight is skipped, a NaN corner with weight makes no value
        sx, sy = 1 - tx, 1 - ty
        total = 0.0
        w = sx * sy
        if w:
            v = r0[j]
            if v != v:
                return None
            total += w * v
        w = sx * ty
        if w:
            v = r0[j + 1]
            if v != v:
                return None
            total += w * v
        w = tx * sy
        if w:
            v = r1[j]
            if v != v:
                return None
            total += w * v
        w = tx * ty
        if w:
            v = r1[j + 1]
            if v != v:
                return None
            total += w * v
        return math.exp(total)

    def _keep_cell(self, i: int, j: int) -> None:
        """Keep cell (i, j) as the last one: its coefficients (none unless both axes' lower corners are > 0
        and the cell has no hole), worked out once per cell."""
        key = i * len(self.ay) + j
        coeffs = self.cells.get(key)
        if coeffs is None:
            coeffs = self.cells[key] = self._cell_coefficients(i, j)
        self.cell = coeffs
        if coeffs:
            self.x_lo, self.x_hi, self.y_lo, self.y_hi, self.a, self.b, self.c, self.d = coeffs

    def _cell_coefficients(self, i: int, j: int) -> tuple[float, ...]:
        """Cell (i, j)'s (x lo, x hi, y lo, y hi, a, b, c, d), or () (see _keep_cell)."""
        ax, ay = self.ax, self.ay
        lx, ly = self.lx, self.ly
        f00, f01, f10, f11 = self.values[i][j], self.values[i][j + 1], self.values[i + 1][j], \
            self.values[i + 1][j + 1]
        if ax[i] <= 0 or ay[j] <= 0 or f00 != f00 or f01 != f01 or f10 != f10 or f11 != f11:
            return ()
        # f = f00 (1-s)(1-t) + f01 (1-s) t + f10 s (1-t) + f11 s t, s = (u - x0) / dx, t = (v - y0) / dy
        x0, dx, y0, dy = lx[i], lx[i + 1] - lx[i], ly[j], ly[j + 1] - ly[j]
        e = f11 - f10 - f01 + f00
        p, q, r = (f10 - f00) / dx, (f01 - f00) / dy, e / (dx * dy)
        return (ax[i], ax[i + 1], ay[j], ay[j + 1], f00 - p * x0 - q * y0 + r * x0 * y0, p - r * y0,
                q - r * x0, r)


def _right(a: list, x: float) -> int:
    """bisect_right(a, x) of a sorted list of numbers (Plane._at2_cell's reads; compiled, a C loop over the
    items as C doubles: the same comparisons, no float made for x)."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) // 2
        v = a[mid]
        if x < v:
            hi = mid
        else:
            lo = mid + 1
    return lo


def pick_kernel(rows) -> str:
    """The kernel with the most rows of a table's selection (ties: the first name), deterministic."""
    counts = Counter(rows["kernel"].tolist())
    return str(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0])


def attention_class(df, q_heads: int, head_dim: int, kv_dtype: str | None, window: int = 0):
    """The rows of an attention table (decode or prefill) of one query-head count, head_dim and KV
    dtype, full attention (or a sliding `window`), whole prompts (no prefix): the KV-head counts
    measured are its shape classes."""
    sel = df[(df["q_heads"] == q_heads) & (df["head_dim"] == head_dim) & (df["kv_dtype"] == kv_dtype)
             & (df["window"] == window)]
    return sel[sel["prefix"] == 0] if "prefix" in sel.columns else sel


def fastest_grid(rows, axes: tuple[str, ...]) -> KernelGrid:
    """The grid of the fastest kernel measured at each point (several kernels at one GEMM shape, e.g.
    fp8_block's CUTLASS and DeepGEMM: an engine that picks its kernel per shape runs the fastest)."""
    return KernelGrid.from_rows(rows, axes, fastest=True)
