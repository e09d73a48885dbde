"""Print the roofline's per-op error on every shipped device's kernel tables next to the kernel grids'
held-out error (the before / after table in docs/calibration.md):
`.venv/bin/python calibration/roofline_ops_report.py` (a few minutes: the held-out grids are rebuilt)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvsim.cost.kernel_heldout import held_out  # noqa: E402
from kvsim.cost.roofline_ops import FAMILIES, errors  # noqa: E402
from kvsim.specs.hardware import load_hardware  # noqa: E402
from kvsim.specs.kernel_tables import SYSTEMS, load_kernel_tables  # noqa: E402


def main() -> None:
    print("| device | table | roofline: rows, median, p90 | roofline, rows >= 100 us: rows, median, p90 | "
          "kernel grid, held out: median, p90 |")
    print("|---|---|---:|---:|---:|")
    for profile in sorted(SYSTEMS.values()):
        tables, hw = load_kernel_tables(profile, lazy=True), load_hardware(profile)
        for table in FAMILIES:
            r, h = errors(tables, table, hw), held_out(tables, table)
            if r is None or h is None:
                continue
            big = (f"{r.big_rows:,}, {r.big_median:.1%}, {r.big_p90:.1%}" if r.big_rows else "none")
            print(f"| {profile} | {table} | {r.rows:,}, {r.median:.1%}, {r.p90:.1%} | {big} | "
                  f"{h.median:.1%}, {h.p90:.1%} |")


if __name__ == "__main__":
    main()
