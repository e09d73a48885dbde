"""Draws from a `LengthDist`: token lengths (integers >= 1) and real-valued quantities such as think times.

fixed: `value`. uniform: integers in [low, high] inclusive (real numbers in [low, high] for `sample_values`).
lognormal: ln X ~ Normal(mu, sigma) with, given `p50`, mu = ln p50 and sigma = sqrt(2 ln(mean / p50)), or,
given `sigma`, mu = ln mean - sigma^2 / 2 (both make E[X] = mean before clipping). empirical: drawn with
replacement from the numbers in `path`. Every draw is clipped to [min, max]; clipping shifts the mean
when the bounds cut into the distribution.
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from kvsim.errors import KvsimError, excerpt
from kvsim.inputs import check_file
from kvsim.schema import MAX_REQUESTS, MAX_TOKENS
from kvsim.workload.config import LengthDist, LengthPairs
from kvsim.workload.textfile import find_column, text_lines


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


def sample_pairs(pairs: LengthPairs, rng: np.random.Generator, n: int,
                 base_dir: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """n (prompt, output) length pairs (int64, rounded, >= 1): rows of `pairs.path` drawn with
    replacement."""
    prompt = load_empirical(pairs.path, pairs.prompt_column, base_dir)
    output = load_empirical(pairs.path, pairs.output_column, base_dir)
    rows = rng.integers(0, len(prompt), size=n)
    return (np.maximum(np.rint(prompt[rows]), 1).astype(np.int64),
            np.maximum(np.rint(output[rows]), 1).astype(np.int64))


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
    '#' skipped), or, with `column`, that column of a CSV file with a header row. Each is a finite number
    from 0 to MAX_TOKENS; the file is read with the bounds of kvsim/workload/textfile.py and holds at most
    MAX_REQUESTS values."""
    p = check_file(_resolve(path, base_dir), "length file")
    st = p.stat()
    return _load(str(p), column, (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))


@functools.lru_cache(maxsize=8)
def _load(path: str, column: str | None, version: tuple[int, ...]) -> np.ndarray:
    """Cached per file version: a generator drawing in chunks (agentic) asks for the file many times."""
    p = Path(path)
    lines = text_lines(p, "length file")
    values = _column_values(p, lines, column) if column is not None else _line_values(p, lines)
    if not values:
        raise KvsimError(f"{p}: empirical length file holds no values")
    out = np.asarray(values, dtype=np.float64)
    out.flags.writeable = False
    return out


def _line_values(path: Path, lines: Iterator[tuple[int, str]]) -> list[float]:
    values: list[float] = []
    for line_no, line in lines:
        text = line.strip()
        if text and not text.startswith("#"):
            values.append(_number(text, path, line_no))
            _check_count(values, path, line_no)
    return values


def _column_values(path: Path, lines: Iterator[tuple[int, str]], column: str) -> list[float]:
    values: list[float] = []
    reader = csv.reader(text for _, text in lines)
    try:
        header = [h.strip() for h in next(reader, [])]
        idx = find_column(header, column, path)
        for row in reader:
            if not row:
                continue
            if idx >= len(row):
                raise KvsimError(f"{path}:{reader.line_num}: row has no {excerpt(column)} field")
            values.append(_number(row[idx].strip(), path, reader.line_num))
            _check_count(values, path, reader.line_num)
    except csv.Error as exc:
        raise KvsimError(f"{path}:{reader.line_num}: bad CSV ({excerpt(str(exc), 60)})") from None
    return values


def _check_count(values: list[float], path: Path, line_no: int) -> None:
    if len(values) > MAX_REQUESTS:
        raise KvsimError(f"{path}:{line_no}: more than {MAX_REQUESTS:,} values")


def _number(text: str, path: Path, line_no: int) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_TOKENS:
        raise KvsimError(f"{path}:{line_no}: bad value {excerpt(text)} (expected a number from 0 to "
                         f"{MAX_TOKENS:,})")
    return value
