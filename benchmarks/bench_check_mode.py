"""Cost of check mode (`kv.check_invariants: true`): CPU seconds of the same run with and without it, side
by side in one process, and their ratio.

    .venv/bin/python benchmarks/bench_check_mode.py                  # every configuration below, 1 round
    .venv/bin/python benchmarks/bench_check_mode.py tiers_n3 --rounds 3

Configurations: `tiers_n3` (issue 25's slow one: the Mooncake conversation trace's head, n = 3 parallel
samples, cpu + remote tiers, hash prefix cache, a 4,000-block pool; `tiers_n3_400` the same over 400
requests, not run by default: x300 before the pacing), `chat_hash` (workloads/chat.yaml with
the hash cache), `pd_tiers` (1 prefill + 1 decode replica, chat, cpu tier), `radix_swap` (radix cache, a
tight pool, swap preemption). Each round runs a configuration without and with check mode (CPU time of
the whole run, workload generation included: time.process_time); the best round of each is reported.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kvsim.engine.simulation import Simulation
from kvsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
W = ROOT / "workloads"

CONFIGS: dict[str, tuple[Path, list[str]]] = {
    "tiers_n3": (W / "mooncake_conversation.yaml", [
        "kv.num_gpu_blocks_override=4000", "workload.n=3", "workload.trace.limit=100",
        "simulation.requests=100", "scheduler.max_num_seqs=128",
        "kv.tiers=[{medium: cpu, capacity_gb: 64}, "
        "{medium: remote, capacity_gb: 2000, bandwidth_gbps: 10}]"]),
    "tiers_n3_400": (W / "mooncake_conversation.yaml", [
        "kv.num_gpu_blocks_override=4000", "workload.n=3", "workload.trace.limit=400",
        "simulation.requests=400", "scheduler.max_num_seqs=128",
        "kv.tiers=[{medium: cpu, capacity_gb: 64}, "
        "{medium: remote, capacity_gb: 2000, bandwidth_gbps: 10}]"]),
    "chat_hash": (W / "chat.yaml", ["kv.prefix_cache=hash", "simulation.requests=600"]),
    "pd_tiers": (W / "chat.yaml", [
        "cluster={pools: [{role: prefill}, {role: decode}]}", "kv.prefix_cache=hash",
        "kv.num_gpu_blocks_override=2000", "kv.tiers=[{medium: cpu, capacity_gb: 16}]",
        "simulation.requests=400"]),
    "radix_swap": (W / "chat.yaml", [
        "kv.prefix_cache=radix", "kv.num_gpu_blocks_override=1500", "scheduler.preemption_mode=swap",
        "workload.arrival.rate=8", "simulation.requests=400"]),
}


def cpu_seconds(path: Path, overrides: list[str], check: bool) -> float:
    sc = load_scenario(str(path), [*overrides, f"kv.check_invariants={str(check).lower()}"])
    t0 = time.process_time()
    Simulation(sc).run()
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="*", help=f"of {', '.join(CONFIGS)} (default: all)")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    unknown = [c for c in args.configs if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown configuration {unknown[0]!r}; choose from {', '.join(CONFIGS)}")
    for name in args.configs or [c for c in CONFIGS if c != "tiers_n3_400"]:
        path, overrides = CONFIGS[name]
        off, on = [], []
        for _ in range(args.rounds):
            off.append(cpu_seconds(path, overrides, False))
            on.append(cpu_seconds(path, overrides, True))
        print(f"{name}: without check {min(off):.2f} s CPU, with check {min(on):.2f} s CPU, "
              f"ratio x{min(on) / min(off):.2f}", flush=True)


if __name__ == "__main__":
    main()
