"""Reproduce the published serving runs (kvsim/cost/published_serving_runs.yaml) with kvsim's roofline and
kernel cost models, held out: `.venv/bin/python calibration/serving_runs_report.py [--no-write]`.

Prints the table of kvsim / published per case and metric, writes it into docs/cost_model.md between the
markers of kvsim.cost.published_serving, and writes kvsim's figures to
kvsim/cost/published_serving_results.yaml (the figures-are-current test reads them). Then prints what the
concurrency-1 NIM run implies for cost.request_overhead_s: published TTFT minus kvsim's TTFT at overhead 0.
A run over RUN_LIMIT_S seconds is stopped and its row says so."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvsim.cost.published_serving import (  # noqa: E402
    RESULTS,
    comparison_rows,
    cost_models_for,
    implied_overhead_s,
    load_serving_runs,
    overhead_note,
    render_table,
    replace_between_markers,
    run_case,
)
from kvsim.engine.simulation import Simulation  # noqa: E402
from kvsim.metrics.summary import build_summary  # noqa: E402
from kvsim.scenario import build_scenario  # noqa: E402
from kvsim.specs.kernel_tables import has_kernel_tables  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "cost_model.md"
RUN_LIMIT_S = 120


class TooSlow(Exception):
    """A run passed RUN_LIMIT_S."""


def summarize(scenario: dict[str, Any]) -> dict[str, Any]:
    """Simulate one scenario dict and return its summary.json."""
    result = Simulation(build_scenario(scenario)).run()
    return build_summary(result.requests, result.timeline, result.meta)


def _alarm(signum, frame):
    raise TooSlow


def timed_run(case: dict[str, Any], cost_model: str, **cost: float) -> tuple[dict[str, Any] | str, float]:
    """(figures or the reason there are none, wall seconds) of one case under one cost model."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(RUN_LIMIT_S)
    t0 = time.perf_counter()
    try:
        figures: dict[str, Any] | str = run_case(case, cost_model, summarize, **cost)
    except TooSlow:
        figures = f"too slow (> {RUN_LIMIT_S} s)"
    finally:
        signal.alarm(0)
    return figures, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave the docs and results file")
    args = parser.parse_args()
    start = time.perf_counter()
    cases = load_serving_runs()
    figures: dict[str, dict[str, Any]] = {}
    results, overheads, notes = [], [], []
    for case in cases:
        for cm in cost_models_for(case, has_kernel_tables):
            got, wall = timed_run(case, cm)
            figures.setdefault(case["case"], {})[cm] = got
            # no wall time in the file: a rerun writes the same bytes
            results.append({"case": case["case"], "cost_model": cm, "figures": got})
            print(f"{case['case']} {cm}: {wall:.1f} s", file=sys.stderr)
    for case in (c for c in cases if c["group"] == "nim-benchmarking" and c["concurrency"] == 1):
        for cm in cost_models_for(case, has_kernel_tables):
            got, _ = timed_run(case, cm, request_overhead_s=0.0)
            if isinstance(got, dict):
                overheads.append({"case": case["case"], "cost_model": cm, "ttft_mean_ms": got["ttft_mean"],
                                  "implied_request_overhead_s": implied_overhead_s(case, got["ttft_mean"])})
                notes.append(overhead_note(case, cm, got["ttft_mean"]))
    table = render_table(comparison_rows(cases, figures), tuple(notes))
    print(table)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    if not args.no_write:
        DOC.write_text(replace_between_markers(DOC.read_text(encoding="utf-8"), table), encoding="utf-8")
        header = ("# kvsim's figures for kvsim/cost/published_serving_runs.yaml, written by "
                  "calibration/serving_runs_report.py\n# (tests/cost/test_published_serving.py recomputes "
                  "the cheapest cases).\n")
        body = yaml.safe_dump({"results": results, "request_overhead": overheads}, sort_keys=False)
        RESULTS.write_text(header + body, encoding="utf-8")


if __name__ == "__main__":
    main()
