"""Print the held-out accuracy of the kernel grids on every shipped device (the table in
docs/calibration.md): `.venv/bin/python calibration/heldout_report.py`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvsim.cost.kernel_heldout import FAMILIES, held_out  # noqa: E402
from kvsim.specs.kernel_tables import SYSTEMS, load_kernel_tables  # noqa: E402


def main() -> None:
    print("| device | table | held-out rows | median | p90 | mean | unreached |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for profile in sorted(SYSTEMS.values()):
        tables = load_kernel_tables(profile)
        for table in FAMILIES:
            h = held_out(tables, table)
            if h is not None:
                print(f"| {profile} | {table} | {h.rows:,} | {h.median:.1%} | {h.p90:.1%} | {h.mape:.1%} | "
                      f"{h.unreached:,} |")


if __name__ == "__main__":
    main()
