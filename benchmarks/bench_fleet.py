"""Speed of fleets: simulated requests per wall-second for N replicas vs 1, at the same load per replica.

    .venv/bin/python benchmarks/bench_fleet.py                       # chat, 1 vs 8 replicas, 3 rounds
    .venv/bin/python benchmarks/bench_fleet.py --replicas 16 --router prefix_aware

Runs workloads/chat.yaml (prefix cache on) with R requests at 5 req/s on one replica and N x R requests at
N x 5 req/s on N replicas, alternating the two in each round so machine noise hits both alike, and prints
each run's requests per wall-second (workload generation + engine) and the ratio of cost per request
(N replicas / 1: 1.0 = flat). A router that peeks every replica's cache (prefix_aware, store_aware) costs
O(N) per request by design.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kvsim.engine.simulation import Simulation
from kvsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def rate(replicas: int, requests: int, router: str, scenario: str) -> float:
    sc = load_scenario(scenario, [f"parallelism.replicas={replicas}", f"simulation.requests={requests}",
                                  f"workload.arrival.rate={5.0 * replicas}", f"router.policy={router}",
                                  "kv.prefix_cache=hash"])
    t0 = time.perf_counter()
    res = Simulation(sc).run()
    wall = time.perf_counter() - t0
    return len(res.requests) / wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default=str(ROOT / "workloads" / "chat.yaml"))
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--requests", type=int, default=2000, help="requests per replica")
    ap.add_argument("--router", default="round_robin")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    one, many = [], []
    for i in range(args.rounds):
        one.append(rate(1, args.requests, args.router, args.scenario))
        many.append(rate(args.replicas, args.requests * args.replicas, args.router, args.scenario))
        print(f"round {i + 1}: 1 replica {one[-1]:,.0f} req/s; "
              f"{args.replicas} replicas {many[-1]:,.0f} req/s")
    best1, bestn = max(one), max(many)
    print(f"best: 1 replica {best1:,.0f} simulated req/s, {args.replicas} replicas ({args.router}) "
          f"{bestn:,.0f}; cost per request x{best1 / bestn:.2f}")


if __name__ == "__main__":
    main()
