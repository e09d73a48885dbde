"""Memory benchmark: peak RSS and wall time of runs with a huge GPU block pool, or of whole `kvsim run`s.

    .venv/bin/python benchmarks/bench_memory.py                        # 20,000,000 blocks
    .venv/bin/python benchmarks/bench_memory.py --blocks 1000000
    .venv/bin/python benchmarks/bench_memory.py --compare /tmp/ref     # and another tree, and the ratios
    .venv/bin/python benchmarks/bench_memory.py --run 100000,1000000 [--compare /tmp/ref]

`--run N[,N...]`: peak RSS (and CPU time) of `kvsim run workloads/chat.yaml --set simulation.requests=N
--no-plots --no-progress --out TMP`, the whole command (simulation, summary, Parquet), each in a fresh
process; the peak of a long run should follow what is active, not the length of its tables.

Runs workloads/mooncake_conversation.yaml (its trace ships in workloads/traces/; the run is
skipped, saying so, when it is absent) and workloads/chat.yaml with 2,000 requests, each with
`kv.num_gpu_blocks_override=N`, each in a fresh subprocess (so each peak RSS is its own: resource.getrusage
maxrss), simulation only (no summary or outputs). A pool's memory should follow the blocks in use, not N.

`--compare REF_TREE` runs the same with PYTHONPATH=REF_TREE (a checkout of another commit, e.g. from
`git worktree add /tmp/ref HEAD`) and prints this tree's figures over the reference's. Both trees read the
scenario files of this tree; every subprocess runs outside the repository, so that the tree on PYTHONPATH
is the one imported (the child prints which). A block count over the tree's MAX_GPU_BLOCKS bound is
applied after validation, lifting the bound in the child only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
import kvsim, kvsim.scenario, kvsim.engine.simulation as simmod
from kvsim.engine.simulation import Simulation
from kvsim.scenario import load_scenario
path, blocks, overrides = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
bound = kvsim.scenario.MAX_GPU_BLOCKS
sc = load_scenario(path, [*overrides, f"kv.num_gpu_blocks_override={min(blocks, bound)}"])
if blocks > bound:  # past the tree's bound: set after validation, the bound lifted here only
    sc.kv.num_gpu_blocks_override = blocks
    simmod.MAX_GPU_BLOCKS = blocks * sc.parallelism.replicas
t0 = time.perf_counter()
sim = Simulation(sc)
result = sim.run()
wall = time.perf_counter() - t0
tables = getattr(result, "tables", None)  # (a tree before RunTables: its frames)
print(json.dumps({"rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "wall_s": wall,
                  "requests": tables.request_count if tables is not None else len(result.requests),
                  "num_blocks": sim.num_blocks, "kvsim": kvsim.__file__}))
"""

RUN_CHILD = r"""
import json, resource, sys, time
import kvsim
from kvsim.cli import main
sys.argv = ["kvsim", "run", sys.argv[1], "--set", f"simulation.requests={sys.argv[2]}", "--no-plots",
            "--no-progress", "--out", sys.argv[3]]
t0 = time.perf_counter()
try:
    main()
except SystemExit as exc:
    if exc.code:
        raise
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"rss_mib": use.ru_maxrss / 1024, "cpu_s": use.ru_utime + use.ru_stime,
                  "wall_s": time.perf_counter() - t0, "kvsim": kvsim.__file__}))
"""


def cases(chat_requests: int) -> list[tuple[str, Path, list[str]]]:
    return [
        ("mooncake_conversation", ROOT / "workloads" / "mooncake_conversation.yaml", []),
        (f"chat ({chat_requests:,} requests)", ROOT / "workloads" / "chat.yaml",
         [f"simulation.requests={chat_requests}"]),
    ]


def missing_trace(path: Path) -> Path | None:
    """The scenario's trace file when it names one that is absent, else None."""
    data = yaml.safe_load(path.read_text())
    trace = (data.get("workload") or {}).get("trace")
    if not trace or not trace.get("path"):
        return None
    p = (path.parent / trace["path"]).resolve()
    return None if p.exists() else p


def measure(tree: Path, scenario: Path, blocks: int, overrides: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    with tempfile.TemporaryDirectory() as cwd:  # outside the repository: the tree on PYTHONPATH wins
        out = subprocess.run([sys.executable, "-c", CHILD, str(scenario), str(blocks), json.dumps(overrides)],
                             cwd=cwd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"run of {scenario.name} with {tree} failed:\n{out.stderr[-4000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    expected = (tree / "kvsim" / "__init__.py").resolve()
    if Path(res["kvsim"]).resolve() != expected:
        raise SystemExit(f"imported {res['kvsim']}, not {expected}")
    return res


def measure_run(tree: Path, requests: int) -> dict:
    """One whole `kvsim run` of workloads/chat.yaml with `requests` requests, with the tree on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run([sys.executable, "-c", RUN_CHILD, str(ROOT / "workloads" / "chat.yaml"),
                              str(requests), str(Path(cwd) / "out")], cwd=cwd, env=env, capture_output=True,
                             text=True)
    if out.returncode != 0:
        raise SystemExit(f"kvsim run of {requests} requests with {tree} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def runs(counts: list[int], ref: Path | None) -> None:
    for n in counts:
        cur = measure_run(ROOT, n)
        line = f"kvsim run chat, {n:,} requests: peak RSS {cur['rss_mib']:,.0f} MiB, {cur['cpu_s']:.1f} s CPU"
        if ref is not None:
            old = measure_run(ref, n)
            line += (f"; reference: {old['rss_mib']:,.0f} MiB, {old['cpu_s']:.1f} s CPU; ratio (this / "
                     f"reference): RSS {cur['rss_mib'] / old['rss_mib']:.3f}, "
                     f"CPU {cur['cpu_s'] / old['cpu_s']:.3f}")
        print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=20_000_000, help="kv.num_gpu_blocks_override")
    ap.add_argument("--chat-requests", type=int, default=2000)
    ap.add_argument("--compare", metavar="REF_TREE", help="another checkout to run the same with")
    ap.add_argument("--run", metavar="N[,N...]", help="whole `kvsim run`s of chat.yaml with N requests")
    args = ap.parse_args()
    ref = Path(args.compare).resolve() if args.compare else None
    if ref is not None and not (ref / "kvsim" / "__init__.py").exists():
        raise SystemExit(f"{ref}: no kvsim package there")
    if args.run:
        runs([int(x) for x in args.run.split(",")], ref)
        return
    print(f"kv.num_gpu_blocks_override={args.blocks:,}")
    for name, scenario, overrides in cases(args.chat_requests):
        absent = missing_trace(scenario)
        if absent is not None:
            print(f"{name}: skipped, its trace {absent} is absent")
            continue
        cur = measure(ROOT, scenario, args.blocks, overrides)
        line = (f"{name}: peak RSS {cur['rss_mib']:,.0f} MiB, {cur['wall_s']:.2f} s wall "
                f"({cur['requests']} requests)")
        if ref is not None:
            old = measure(ref, scenario, args.blocks, overrides)
            line += (f"; reference: {old['rss_mib']:,.0f} MiB, {old['wall_s']:.2f} s; "
                     f"ratio (this / reference): RSS {cur['rss_mib'] / old['rss_mib']:.3f}, "
                     f"wall {cur['wall_s'] / old['wall_s']:.3f}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
