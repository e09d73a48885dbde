"""Speed benchmark of the simulator itself: simulated requests per wall-second and peak memory.

    .venv/bin/python benchmarks/bench_run.py                 # 20,000-request chat scenario
    .venv/bin/python benchmarks/bench_run.py --profile       # plus a cProfile of the simulation

Times the simulation (workload generation + engine) and, separately, the summary and output writing,
for workloads/chat.yaml with 20,000 requests. Peak memory is the process's max RSS.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import tempfile
import time
from pathlib import Path

from kvsim.engine.simulation import Simulation
from kvsim.metrics.report import write_outputs
from kvsim.metrics.summary import build_summary
from kvsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default=str(ROOT / "workloads" / "chat.yaml"))
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    sc = load_scenario(args.scenario, [f"simulation.requests={args.requests}", *args.overrides])
    sim = Simulation(sc)
    t0 = time.perf_counter()
    if args.profile:
        prof = cProfile.Profile()
        result = prof.runcall(sim.run)
    else:
        result = sim.run()
    t_sim = time.perf_counter() - t0
    summary = build_summary(result.requests, result.timeline, result.meta)
    with tempfile.TemporaryDirectory() as tmp:
        t1 = time.perf_counter()
        write_outputs(Path(tmp) / "out", summary, result.requests, result.timeline, {})
        t_out = time.perf_counter() - t1
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n = len(result.requests)
    print(f"scenario: {args.scenario} ({n} requests, {len(result.timeline)} iterations, "
          f"concurrency mean {summary['concurrency']['mean']:.1f})")
    print(f"simulation: {t_sim:.2f} s wall -> {n / t_sim:,.0f} simulated requests per wall-second")
    print(f"summary + outputs: {t_out:.2f} s; peak RSS {rss_mib:,.0f} MiB")
    if args.profile:
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
