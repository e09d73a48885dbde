"""Copy NVIDIA AIConfigurator's per-kernel timings of vLLM's kernels into calibration/<profile>/kernels/.

    .venv/bin/python calibration/import_aiconfigurator.py SOURCE [--profile h200 ...]

SOURCE is a copy of AIConfigurator's data (github.com/ai-dynamo/aiconfigurator, Apache-2.0): a folder
holding `COMMIT`, `LICENSE` and `data/<system>/<family>/vllm/<version>/*.parquet`. For each kvsim
hardware profile with a system there, and for each table kvsim reads (kvsim/specs/kernel_tables.py
TABLES), the newest vLLM (or NCCL) version that holds the table is taken: every row, its columns renamed
to kvsim's names, latency converted from milliseconds to seconds, the columns that hold one value for the
whole table (framework, version, device, op name) moved into PROVENANCE.json with the source path, its
SHA-256 and the kernel names. The licence is copied beside the tables. Run it again after an update of
the source; kvsim itself never reads SOURCE.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvsim.specs.kernel_tables import SYSTEMS, TABLES, kernels_dir  # noqa: E402


def _version_key(name: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"[.]", name))


def newest(source: Path, system: str, where: str, file: str) -> Path | None:
    """The table `file` of the newest version folder under data/<system>/<where>/ that holds it."""
    base = source / "data" / system / where
    if not base.is_dir():
        return None
    found = [d / file for d in base.iterdir() if (d / file).is_file()]
    return max(found, key=lambda p: _version_key(p.parent.name)) if found else None


FILLED = {"window": 0, "prefix": 0, "query": 1}
"""kvsim columns an older table lacks and the value its rows mean (full attention, no prefix, one query
token); PROVENANCE.json records each fill."""


def convert(path: Path, spec) -> tuple[pd.DataFrame, dict]:
    """The table in kvsim's columns, and what PROVENANCE.json records of it."""
    df = pd.read_parquet(path)
    constant = {c: str(df[c].iloc[0]) for c in ("framework", "version", "device", "op_name")
                if c in df.columns and df[c].nunique() == 1}
    if "version" in df.columns and "version" not in constant:  # (a table merged from several runs)
        constant["version"] = ", ".join(sorted(df["version"].astype(str).unique(), key=_version_key))
    keep = {src: dst for src, dst in spec.source_columns.items() if src in df.columns}
    dropped = [c for c in df.columns if c not in keep and c not in constant and c != "latency"]
    varying = [c for c in dropped if df[c].nunique() > 1]
    if varying:
        raise SystemExit(f"{path}: columns {varying} vary but kvsim has no name for them")
    out = df[list(keep)].rename(columns=keep)
    out["latency_s"] = df["latency"].astype("float64") / 1000.0
    filled = {}
    for name, kind in spec.columns.items():
        if name not in out.columns:
            if name not in FILLED:
                raise SystemExit(f"{path}: no source column for kvsim's {name!r}")
            out[name] = filled[name] = FILLED[name]
        out[name] = out[name].astype(kind)
    out = out[list(spec.columns)]
    info = {"source": str(path.relative_to(path.parents[5])), "rows": len(out),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), **constant,
            "dropped_constant_columns": {c: str(df[c].iloc[0]) for c in dropped},
            "filled_columns": filled,
            "kernels": sorted(df["kernel_source"].astype(str).unique().tolist())
            if "kernel_source" in df.columns else []}
    return out, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path)
    ap.add_argument("--profile", action="append", help="only these kvsim profiles (default: every one)")
    args = ap.parse_args()
    source = args.source.resolve()
    commit = (source / "COMMIT").read_text().strip()
    for system, profile in SYSTEMS.items():
        if args.profile and profile not in args.profile:
            continue
        out_dir = kernels_dir(profile)
        tables = {}
        for name, spec in TABLES.items():
            path = newest(source, system, spec.where, spec.file)
            if path is None:
                continue
            df, info = convert(path, spec)
            out_dir.mkdir(parents=True, exist_ok=True)
            df.to_parquet(out_dir / f"{name}.parquet", index=False, compression="zstd")
            info["file"] = f"{name}.parquet"
            info["file_sha256"] = hashlib.sha256((out_dir / f"{name}.parquet").read_bytes()).hexdigest()
            tables[name] = info
            print(f"{profile}: {name} <- {info['source']} ({len(df)} rows)")
        if not tables:
            continue
        shutil.copyfile(source / "LICENSE", out_dir / "LICENSE")
        prov = {
            "project": "NVIDIA AIConfigurator (github.com/ai-dynamo/aiconfigurator)",
            "licence": "Apache-2.0 (LICENSE beside this file)",
            "commit": commit,
            "system": system,
            "profile": profile,
            "source_root": "aic-core/src/aiconfigurator_core/systems/data/",
            "latency": "seconds per call of one layer's kernel (the source's milliseconds / 1000)",
            "tables": tables,
        }
        (out_dir / "PROVENANCE.json").write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
