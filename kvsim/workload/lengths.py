"""Draws from a `LengthDist`: token lengths (integers >= 1) and real-valued quantities such as think times.

fixed: `value`. uniform: integers in [low, high] inclusive (real numbers in [low, high] for `sample_values`).
lognormal: ln X ~ Normal(mu, sigma) with, given `p50`, mu = ln p50 and sigma = sqrt(2 ln(mean / p50)), or,
given `sigma`, mu = ln mean - sigma^2 / 2 (both make E[X] = mean before clipping). empirical: drawn with
replacement from the numbers in `path`. Every draw is clipped to [min, max]; clipping shifts the mean
when the bounds cut into the distribution.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from kvsim.errors import KvsimError
from kvsim.workload.config import LengthDist


def sample_values(dist: LengthDist, rng: np.random.Generator, n: int,
                  base_dir: str | Path | None = None) -> np.ndarray:
    """n real-valued draws (float64), clipped to [dist.min, dist.max], not rounded."""
    if dist.dist == "fixed":
        out = np.full(n, float(dist.value))
    elif dist.dist == "uniform":
        out = rng.uniform(dist.low, dist.high, size=n)
    elif dist.dist == "lognormal":
        mu, sigma = lognormal_params(dist)
        out = rng.lognormal(mu, sigma, size=n)
    else:
        values = load_empirical(dist.path, dist.column, base_dir)
        out = values[rng.integers(0, len(values), size=n)]
    return np.clip(out, dist.min, dist.max)


def sample_lengths(dist: LengthDist, rng: np.random.Generator, n: int,
                   base_dir: str | Path | None = None) -> np.ndarray:
    """n token lengths (int64): integer draws (uniform is inclusive), rounded, clipped to [min, max], >= 1."""
    if dist.dist == "uniform":
        out = rng.integers(dist.low, dist.high, size=n, endpoint=True)
        return np.clip(out, max(1, dist.min), dist.max).astype(np.int64)
    out = np.rint(sample_values(dist, rng, n, base_dir))
    return np.clip(out, max(1, dist.min), dist.max).astype(np.int64)


def lognormal_params(dist: LengthDist) -> tuple[float, float]:
    """(mu, sigma) of the underlying normal for a lognormal `LengthDist`."""
    if dist.p50 is not None:
        return math.log(dist.p50), math.sqrt(2.0 * math.log(dist.mean / dist.p50))
    return math.log(dist.mean) - dist.sigma ** 2 / 2.0, float(dist.sigma)


def _resolve(path: str, base_dir: str | Path | None) -> Path:
    p = Path(path)
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    return p


def load_empirical(path: str, column: str | None = None, base_dir: str | Path | None = None) -> np.ndarray:
    """The numbers of an empirical length file: one number per line (blank lines and lines starting with
    '#' skipped), or, with `column`, that column of a CSV file with a header row."""
    p = _resolve(path, base_dir)
    if not p.is_file():
        raise KvsimError(f"{p}: empirical length file not found")
    values: list[float] = []
    with p.open(newline="") as fh:
        if column is None:
            for line_no, line in enumerate(fh, start=1):
                text = line.strip()
                if text and not text.startswith("#"):
                    values.append(_number(text, p, line_no))
        else:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or column not in [h.strip() for h in header]:
                have = ", ".join(h.strip() for h in header or [])
                raise KvsimError(f"{p}:1: no column '{column}' (header: {have})")
            idx = [h.strip() for h in header].index(column)
            for row in reader:
                if not row:
                    continue
                if idx >= len(row):
                    raise KvsimError(f"{p}:{reader.line_num}: row has no '{column}' field")
                values.append(_number(row[idx].strip(), p, reader.line_num))
    if not values:
        raise KvsimError(f"{p}: empirical length file holds no values")
    return np.asarray(values, dtype=np.float64)


def _number(text: str, path: Path, line_no: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise KvsimError(f"{path}:{line_no}: bad value {text!r} (expected a non-negative number)") from None
    if not math.isfinite(value) or value < 0:
        raise KvsimError(f"{path}:{line_no}: bad value {text!r} (expected a non-negative number)")
    return value
