"""Start-up: a short `kvsim run` (10 requests, no plots) timed in fresh processes, and its import profile.

    .venv/bin/python benchmarks/bench_startup.py                      # 5 runs of the 10-request chat run
    .venv/bin/python benchmarks/bench_startup.py --runs 9 --top 30
    .venv/bin/python benchmarks/bench_startup.py --tree /tmp/ref      # another checkout's kvsim, same command
    .venv/bin/python benchmarks/bench_startup.py --set cost.model=roofline   # extra overrides

Each run is `python -m kvsim.cli run SCENARIO --set simulation.requests=N --no-plots --no-progress --out
TMP` in a new interpreter (the whole command: interpreter start, imports, scenario, simulation, summary,
Parquet, report.md). Per run the wall time and the CPU time (user + system, from `os.wait4`'s resource
usage of that child) are taken; the minimum and median of each are printed. The machine is shared, so
compare CPU minima, and two trees side by side in one invocation of this script each, run back to back.

Then one more run under `python -X importtime` prints the modules with the largest cumulative import time
(the minimum over `--importtime-runs` runs, per module) and the sum of the self times by top-level package.

A first, untimed run warms the file cache and writes the trees' bytecode (`__pycache__`): with
PYTHONDONTWRITEBYTECODE set and no bytecode on disk every module would be compiled from source on every
start, which is not what an installed kvsim does. The children run with PYTHONDONTWRITEBYTECODE unset.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def command(scenario: Path, requests: int, extra: list[str], out: Path) -> list[str]:
    sets = [a for s in [f"simulation.requests={requests}", *extra] for a in ("--set", s)]
    return [sys.executable, "-m", "kvsim.cli", "run", str(scenario), *sets, "--no-plots", "--no-progress",
            "--out", str(out)]


def child_env(tree: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def timed_run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one child process; exits with its stderr when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if status != 0:
        sys.exit(f"run failed ({' '.join(cmd)}):\n{err}")
    return wall, usage.ru_utime + usage.ru_stime


def import_profile(cmd: list[str], env: dict[str, str], cwd: Path, runs: int) -> dict[str, tuple]:
    """module -> (min self µs, min cumulative µs, depth) over `runs` runs under -X importtime."""
    best: dict[str, tuple[int, int, int]] = {}
    for _ in range(runs):
        res = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=env, cwd=cwd, capture_output=True,
                             text=True)
        for line in res.stderr.splitlines():
            m = IMPORT_LINE.match(line)
            if m:
                own, cum, depth, name = int(m[1]), int(m[2]), len(m[3]) // 2, m[4]
                old = best.get(name, (own, cum, depth))
                best[name] = (min(old[0], own), min(old[1], cum), old[2])
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", type=Path, default=ROOT / "workloads" / "chat.yaml")
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE",
                    help="another override (repeatable)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs (default 5)")
    ap.add_argument("--tree", type=Path, default=None,
                    help="import kvsim from this checkout (PYTHONPATH) instead of the installed one")
    ap.add_argument("--top", type=int, default=25, help="modules of the import profile to print")
    ap.add_argument("--importtime-runs", type=int, default=3, help="-X importtime runs (0: none)")
    args = ap.parse_args()
    env = child_env(args.tree)
    with tempfile.TemporaryDirectory(prefix="kvsim-startup-") as tmp:
        cwd, out = Path(tmp), Path(tmp) / "out"
        cmd = command(args.scenario.resolve(), args.requests, args.extra, out)
        where = subprocess.run([sys.executable, "-c", "import kvsim; print(kvsim.__file__)"], env=env,
                               cwd=cwd, capture_output=True, text=True).stdout.strip()
        print(f"kvsim from {where}\n{' '.join(cmd[1:-1])} TMP")
        timed_run(cmd, env, cwd)  # warm-up: file cache, bytecode
        walls, cpus = [], []
        for _ in range(args.runs):
            wall, cpu = timed_run(cmd, env, cwd)
            walls.append(wall)
            cpus.append(cpu)
        print(f"{args.runs} runs: wall min {min(walls):.3f} s, median {statistics.median(walls):.3f} s; "
              f"CPU (user+sys) min {min(cpus):.3f} s, median {statistics.median(cpus):.3f} s")
        print(f"  each: wall {' '.join(f'{w:.3f}' for w in walls)}; CPU {' '.join(f'{c:.3f}' for c in cpus)}")
        if args.importtime_runs <= 0:
            return
        prof = import_profile(cmd, env, cwd, args.importtime_runs)
    by_package: Counter = Counter()
    for name, (own, _, _) in prof.items():
        by_package[name.split(".")[0]] += own
    print(f"\nimports ({len(prof)} modules, min over {args.importtime_runs} runs): self time "
          f"{sum(by_package.values()) / 1000:.1f} ms in all; by package: "
          + ", ".join(f"{k} {v / 1000:.1f}" for k, v in by_package.most_common(12)))
    print(f"top {args.top} by cumulative time (ms, cumulative / self):")
    for name, (own, cum, depth) in sorted(prof.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"  {cum / 1000:8.1f} {own / 1000:7.1f}  {'  ' * depth}{name}")


if __name__ == "__main__":
    main()
