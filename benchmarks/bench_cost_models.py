"""CPU time per iteration of one scenario under two cost models, side by side in one process:

    .venv/bin/python benchmarks/bench_cost_models.py        # Azure conv trace, kernels vs roofline
    .venv/bin/python benchmarks/bench_cost_models.py workloads/chat.yaml --requests 3000 --repeat 5

Each repeat runs the scenario once per model (the order alternates, so a drift in machine load hits both),
timing `Simulation.run` with process CPU time (time.process_time: this process's CPU seconds, not the
wall clock of a shared machine), and divides by the iterations the timeline records. Prints each run and
the ratio of the medians (a / b). The models reach different iteration counts (their timings differ), so
per-iteration CPU time is the figure to compare; docs/cost_model.md quotes it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from kvsim.engine.simulation import Simulation
from kvsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default=str(ROOT / "workloads" / "azure_conv_v0_v1.yaml"))
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--models", default="kernels,roofline", help="two cost.model names, a,b")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    models = args.models.split(",")
    per_iter: dict[str, list[float]] = {m: [] for m in models}
    for r in range(args.repeat):
        for model in (models if r % 2 == 0 else models[::-1]):
            sc = load_scenario(args.scenario, [f"simulation.requests={args.requests}", f"cost.model={model}",
                                               *args.overrides])
            sim = Simulation(sc)
            t0 = time.process_time()
            out = sim.run()
            cpu = time.process_time() - t0
            iters = len(out.timeline)
            per_iter[model].append(1e6 * cpu / iters)
            print(f"{model:>10}: {cpu:6.2f} s CPU, {iters:,} iterations, "
                  f"{per_iter[model][-1]:.1f} us/iteration")
    a, b = (statistics.median(per_iter[m]) for m in models)
    print(f"median us/iteration: {models[0]} {a:.1f}, {models[1]} {b:.1f}; ratio {models[0]}/{models[1]} "
          f"{a / b:.3f}")


if __name__ == "__main__":
    main()
