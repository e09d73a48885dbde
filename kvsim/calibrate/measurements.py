"""calibration/<device>/measurements.csv: '# key: value' provenance lines, then one CSV row per timed
case. Reading needs no torch."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kvsim.errors import KvsimError, excerpt
from kvsim.inputs import read_text

MAX_MEASUREMENTS_BYTES = 64 * 2**20
PROVENANCE_KEYS = ("device", "profile", "driver", "torch", "triton", "kvsim", "python", "date", "method",
                   "model_shapes", "grid", "seed")


def write_measurements(path: Path, provenance: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Write the provenance header and the rows (columns in the order of the first row)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "".join(f"# {k}: {' '.join(str(v).split())}\n" for k, v in provenance.items())
    body = pd.DataFrame(rows).to_csv(index=False, float_format="%.6g", lineterminator="\n")
    path.write_text(head + body, encoding="utf-8")


def read_measurements(path: Path) -> tuple[dict[str, str], pd.DataFrame]:
    """(provenance, rows) from a measurements file; a one-line KvsimError naming the file (and line) if it
    is unreadable, not UTF-8, or its rows lack a positive, finite median_s."""
    text = read_text(path, "measurements file", MAX_MEASUREMENTS_BYTES)
    prov: dict[str, str] = {}
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        key, sep, value = lines[i][1:].strip().partition(":")
        if not sep:
            raise KvsimError(f"{path}:{i + 1}: provenance line must read '# key: value'")
        prov[key.strip()] = value.strip()
        i += 1
    try:
        df = pd.read_csv(io.StringIO("".join(lines[i:])))
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise KvsimError(f"{path}: cannot read the CSV rows ({type(exc).__name__})") from None
    for col in ("kernel", "dtype", "median_s"):
        if col not in df.columns:
            raise KvsimError(f"{path}: missing column {col!r}")
    median = pd.to_numeric(df["median_s"], errors="coerce")
    bad = ~(np.isfinite(median) & (median > 0))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise KvsimError(f"{path}:{i + 2 + row}: median_s must be a finite number of seconds > 0, got "
                         f"{excerpt(str(df['median_s'].iloc[row]))}")
    df["median_s"] = median.astype(float)
    df["shape"] = df.get("shape", pd.Series(dtype=str)).fillna("")
    df["ctx_kind"] = df.get("ctx_kind", pd.Series(dtype=str)).fillna("")
    return prov, df


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
