"""`kvsim calibrate --tables`: a device's shipped kernel tables (calibration/<profile>/kernels/), their
held-out accuracy, and kvsim's own measurements (run_gpu.sh's measurements.csv) against them on the same
shapes.

Matching a measurement to the tables (each measurement is one kernel call of one layer, as the tables):
- decode (paged_decode_*; uniform contexts only): batch b, context c = ctx_total / b tokens attended per
  sequence -> the decode_attention class (q heads, KV heads, head_dim, KV dtype, full attention) at
  batch b and `context` c - 1 (the table's context counts the tokens cached before the step's own);
- prefill (prefill_torch, no prefix): the prefill_attention class at batch b and tokens = chunk;
- gemm (gemm_torch): the gemm table at the dtype (bf16 -> bfloat16, fp8 -> fp8) and m, n, k, the fastest
  kernel measured at each shape (as the kernel cost model reads it).
The table's time is read off its grid (kvsim/cost/kernel_grid.py); a shape outside it is left out
(counted). ratio = measured / table.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from kvsim.cost.kernel_grid import KernelGrid, attention_class, fastest_grid, pick_kernel
from kvsim.cost.kernel_heldout import FAMILIES, held_out
from kvsim.specs.kernel_tables import KernelTables

KV_DTYPE = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}


def _attention_grid(tables: KernelTables, table: str, row: dict, axes: tuple[str, str],
                    cache: dict) -> KernelGrid | None:
    kvd = KV_DTYPE.get(str(row["dtype"]))
    key = (table, int(row["q_heads"]), int(row["kv_heads"]), int(row["head_dim"]), kvd)
    if key not in cache:
        sel = attention_class(tables[table], key[1], key[3], kvd)
        sel = sel[sel["kv_heads"] == key[2]]
        if len(sel):
            sel = sel[sel["kernel"] == pick_kernel(sel)]
        cache[key] = KernelGrid.from_rows(sel, axes) if len(sel) else None
    return cache[key]


def compare_with_tables(measurements: pd.DataFrame, tables: KernelTables) -> tuple[pd.DataFrame, int]:
    """(one row per matched measurement: family, kernel, shape, measured_s, table_s, ratio; how many
    measurements of a family the tables hold had no table value)."""
    cache: dict = {}
    gemm_grids: dict[str, KernelGrid | None] = {}
    out, unmatched = [], 0
    for row in measurements.to_dict("records"):
        kernel = str(row["kernel"])
        t: float | None = None
        decode = kernel.startswith("paged_decode") and row.get("ctx_kind") == "uniform"
        if decode and "decode_attention" in tables:
            fam = "decode"
            b = int(row["batch"])
            grid = _attention_grid(tables, "decode_attention", row, ("batch", "context"), cache)
            ctx = int(row["ctx_total"]) / b
            shape = f"b={b} ctx={ctx:g} heads={row['q_heads']}/{row['kv_heads']}x{row['head_dim']}"
            t = grid(b, ctx - 1) if grid is not None else None
        elif kernel == "prefill_torch" and not int(row.get("prefix") or 0) and "prefill_attention" in tables:
            fam = "prefill"
            b, chunk = int(row["batch"]), int(row["chunk"])
            grid = _attention_grid(tables, "prefill_attention", row, ("batch", "tokens"), cache)
            shape = f"b={b} chunk={chunk} heads={row['q_heads']}/{row['kv_heads']}x{row['head_dim']}"
            t = grid(b, chunk) if grid is not None else None
        elif kernel == "gemm_torch" and "gemm" in tables:
            fam = "gemm"
            dtype = KV_DTYPE.get(str(row["dtype"]))
            if dtype not in gemm_grids:
                df = tables["gemm"]
                sel = df[df["dtype"] == dtype]
                gemm_grids[dtype] = fastest_grid(sel, ("m", "n", "k")) if len(sel) else None
            grid = gemm_grids[dtype]
            m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
            shape = f"{row.get('shape') or 'gemm'} m={m} n={n} k={k}"
            t = grid(m, n, k) if grid is not None else None
        else:
            continue
        if t is None:
            unmatched += 1
            continue
        measured = float(row["median_s"])
        out.append({"family": fam, "kernel": kernel, "shape": shape, "measured_s": measured, "table_s": t,
                    "ratio": measured / t})
    columns = ["family", "kernel", "shape", "measured_s", "table_s", "ratio"]
    return pd.DataFrame(out, columns=columns), unmatched


def comparison_summary(cmp: pd.DataFrame) -> list[dict]:
    """Per family and kernel: rows, the median, 10th and 90th percentile of measured / table, and the
    share within 10% of the table."""
    rows = []
    for (fam, kernel), g in cmp.groupby(["family", "kernel"], sort=True):
        r = g["ratio"].to_numpy(np.float64)
        rows.append({"family": fam, "kernel": kernel, "rows": len(g), "median_ratio": float(np.median(r)),
                     "p10_ratio": float(np.quantile(r, 0.1)), "p90_ratio": float(np.quantile(r, 0.9)),
                     "within_10pct": float(np.mean(np.abs(r - 1) <= 0.10))})
    return rows


def report(tables: KernelTables, log: Callable[[str], None],
           measurements: pd.DataFrame | None = None) -> None:
    """What `kvsim calibrate --tables` prints."""
    prov = tables.provenance
    log(f"kernel tables of {tables.profile}: {prov.get('project')} @ {str(prov.get('commit'))[:12]} "
        f"(system {prov.get('system')}; {prov.get('licence')})")
    for name, df in tables.tables.items():
        info = prov["tables"][name]
        line = f"  {name}: {len(df):,} rows, {info.get('source')} ({info.get('version')})"
        h = held_out(tables, name) if name in FAMILIES else None
        if h is not None and h.rows:
            line += f"; held out: {h.rows:,} rows, median {h.median:.1%}, p90 {h.p90:.1%}"
        log(line)
    if measurements is None:
        return
    cmp, unmatched = compare_with_tables(measurements, tables)
    log(f"own measurements against the tables ({len(cmp)} matched, {unmatched} outside the tables):")
    for s in comparison_summary(cmp):
        log(f"  {s['family']} {s['kernel']}: {s['rows']} rows, measured / table median "
            f"{s['median_ratio']:.3g} (p10 {s['p10_ratio']:.3g}, p90 {s['p90_ratio']:.3g}), "
            f"{s['within_10pct']:.0%} within 10%")


def main_tables(profile: str, measurements, log: Callable[[str], None]) -> int:
    """`kvsim calibrate --tables --profile P [--measurements FILE]`: writes nothing."""
    from kvsim.calibrate.measurements import read_measurements
    from kvsim.specs.kernel_tables import load_kernel_tables

    tables = load_kernel_tables(profile)
    rows = read_measurements(measurements)[1] if measurements is not None else None
    report(tables, log, rows)
    return 0
