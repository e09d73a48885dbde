"""Run N cases per strategy category and print the tally and the failing reproductions.

    python tests/fuzz/report.py                 # 50 cases per category
    python tests/fuzz/report.py -n 200 -c trace -c model
    python tests/fuzz/report.py --regressions   # the fixed cases too (issue 9's and issue 25's)
    python tests/fuzz/report.py --json out.json # every failure, machine-readable

Cases are drawn deterministically (the same N cases on every run, given the same hypothesis version);
--seed draws a different set. Failures are grouped by kind and signature (exception and kvsim frame, or
the error line with numbers blanked); the first few of each group are printed in full.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import strategies  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402


def draw_cases(category: str, n: int, seed_value: int | None) -> list[harness.Case]:
    """n cases of a category, drawn by hypothesis without running them."""
    cases: list[harness.Case] = []

    @settings(max_examples=n, deadline=None, derandomize=seed_value is None, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategies.CATEGORIES[category])
    def collect(case):
        cases.append(case)

    if seed_value is not None:
        collect = seed(seed_value)(collect)
    collect()
    unique: dict[str, harness.Case] = {}
    for case in cases:  # hypothesis may draw the same small case more than once
        unique.setdefault(case.repro(10**9) + repr(case.env) + repr(case.expect), case)
    return list(unique.values())[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=50, help="cases per category")
    ap.add_argument("-c", "--category", action="append", choices=sorted(strategies.CATEGORIES),
                    help="only these categories (repeatable)")
    ap.add_argument("--regressions", action="store_true",
                    help="also run the fixed regression cases (regressions.py, surfaces_regressions.py)")
    ap.add_argument("--seed", type=int, default=None, help="draw a different (random-seeded) set")
    ap.add_argument("--show", type=int, default=2, help="reproductions printed per failure signature")
    ap.add_argument("--json", type=Path, help="write every failure (repro, outcome) to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print one line per case")
    args = ap.parse_args(argv)

    worker = harness.Worker()
    failures: list[dict] = []
    t0 = time.monotonic()
    try:
        plan: list[tuple[str, list[harness.Case]]] = []
        for cat in args.category or list(strategies.CATEGORIES):
            plan.append((cat, draw_cases(cat, args.n, args.seed)))
        if args.regressions:
            import regressions
            import surfaces_regressions

            plan.append(("regression", list(regressions.REGRESSIONS.values())))
            plan.append(("surfaces", list(surfaces_regressions.SURFACE_REGRESSIONS.values())))
        for cat, cases in plan:
            t_cat = time.monotonic()
            for case in cases:
                outcome = harness.run_case(case, worker)
                harness.record(case, outcome)
                if args.verbose:
                    print(f"{cat:10} {outcome.kind:18} {outcome.elapsed:6.2f}s {case.why[:90]}", flush=True)
                if outcome.failed:
                    failures.append({"category": cat, "kind": outcome.kind,
                                     "signature": harness.signature(outcome, case),
                                     "origin": harness.origin(outcome), "repro": case.repro(400),
                                     "outcome": outcome.summary(800)})
            print(f"# {cat}: {len(cases)} cases in {time.monotonic() - t_cat:.1f} s", file=sys.stderr,
                  flush=True)
    finally:
        worker.close()
    print(f"\n{sum(harness.TALLY.values())} cases in {time.monotonic() - t0:.1f} s\n")
    print("\n".join(harness.tally_table(harness.TALLY)))
    groups = sorted(harness.EXAMPLES.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    print(f"\n{len(groups)} distinct failure signatures\n")
    for (kind, sig), examples in groups:
        count = sum(1 for f in failures if f["kind"] == kind and f["signature"] == sig)
        print("=" * 100)
        print(f"[{kind}] {sig}  ({count} cases; origin {harness.origin(examples[0][1])})")
        for case, outcome in examples[: args.show]:
            print("-" * 60)
            print(case.repro(400))
            print(outcome.summary(600))
    if args.json:
        args.json.write_text(json.dumps(failures, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
