"""Speed suite of the simulator: per scenario, simulated requests per wall-second, process wall, peak RSS.

    .venv/bin/python benchmarks/suite.py                          # every scenario once
    .venv/bin/python benchmarks/suite.py --quick                  # every request count / 10
    .venv/bin/python benchmarks/suite.py --only chat_hash --only chat_radix --repeat 3
    .venv/bin/python benchmarks/suite.py --compare /tmp/ref --quick --json cmp.json

Each run is a fresh child process (benchmarks/child.py) that does what `kvsim run` does: load the scenario,
simulate, summarise, write every output (Parquet, plots, report). Three figures per run:

- sim req/s: simulated requests per wall-second of `Simulation(...).run()` alone (workload generation and
  the engine; no start-up, summary or outputs);
- process wall: from starting the child's Python to its exit, outputs written (imports included);
- peak RSS: the child's maximum resident set (os.wait4's resource usage of that child).

`--compare REF` runs every scenario on this tree and on REF (another checkout, e.g. `git worktree add
/tmp/ref main` or a `git archive` export), alternately, `--repeat` times each pair (default 3), and prints
per scenario the median of each side and the ratio this / REF. Both sides run this tree's child.py and
read this tree's scenario files (benchmarks/scenarios.py); only the `kvsim` package differs: PYTHONPATH is
the tree and every child runs in a temporary folder outside both trees (the child reports which package
it imported, and the suite checks it). Nothing here asserts a speed: the figures are printed and, with
`--json`, written to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios  # noqa: E402
from scenarios import RATIOS, SCENARIOS, BenchScenario  # noqa: E402

ROOT = scenarios.ROOT
CHILD = Path(__file__).resolve().parent / "child.py"
FIGURES = ("sim_req_per_s", "process_wall_s", "peak_rss_mib")

out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, markup=False, width=None if sys.stderr.isatty() else 160)


class ChildFailed(RuntimeError):
    pass


def run_child(tree: Path, sc: BenchScenario, quick: bool) -> dict:
    """One run of `sc` with the kvsim package of `tree`: the child's JSON figures plus process wall time
    and peak RSS."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONSTARTUP", None)
    with tempfile.TemporaryDirectory(prefix="kvsim-bench-") as cwd:
        stdout_path, stderr_path = Path(cwd) / "stdout", Path(cwd) / "stderr"
        cmd = [sys.executable, str(CHILD), sc.name, *(["--quick"] if quick else [])]
        with stdout_path.open("wb") as so, stderr_path.open("wb") as se:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=so, stderr=se)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        stdout, stderr = stdout_path.read_text(), stderr_path.read_text()
    if proc.returncode != 0:
        raise ChildFailed(f"{sc.name} with {tree} exited {proc.returncode}:\n{stderr[-4000:]}")
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise ChildFailed(f"{sc.name} with {tree}: no JSON line on stdout:\n{stderr[-4000:]}")
    res = json.loads(lines[-1])
    expected = (tree / "kvsim" / "__init__.py").resolve()
    if Path(res["kvsim"]).resolve() != expected:
        raise ChildFailed(f"{sc.name}: the child imported {res['kvsim']}, not {expected}")
    res["process_wall_s"] = wall
    res["peak_rss_mib"] = usage.ru_maxrss / 1024  # KiB on Linux
    return res


def tree_info(tree: Path) -> dict:
    """Commit and count of changed files of a git checkout (None for an export without .git)."""
    def git(*args: str) -> str | None:
        try:
            p = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return p.stdout if p.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != tree.resolve():
        return {"path": str(tree), "commit": None, "changed_files": None}
    commit = git("rev-parse", "HEAD")
    status = git("status", "--short")
    return {"path": str(tree), "commit": commit.strip() if commit else None,
            "changed_files": len(status.splitlines()) if status is not None else None}


def median(runs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def select(only: list[str]) -> list[BenchScenario]:
    if not only:
        return list(SCENARIOS)
    names = [n for item in only for n in item.split(",") if n]
    known = {s.name for s in SCENARIOS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown scenario {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [s for s in SCENARIOS if s.name in names]


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", metavar="REF", help="another checkout: run both, alternately, and compare")
    ap.add_argument("--quick", action="store_true", help="every scenario's request count divided by 10")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="run only these scenarios (repeatable, or comma-separated)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs per scenario (per side with --compare); default 1, with --compare 3")
    ap.add_argument("--json", metavar="PATH", help="write every run's figures and the medians here")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = ap.parse_args()
    if args.list:
        for s in SCENARIOS:
            out.print(f"{s.name}: {s.request_count(args.quick):,} requests; {s.note}")
        return
    ref = Path(args.compare).resolve() if args.compare else None
    if ref is not None and not (ref / "kvsim" / "__init__.py").exists():
        raise SystemExit(f"{ref}: no kvsim package there")
    repeat = args.repeat if args.repeat is not None else (3 if ref is not None else 1)
    if repeat < 1:
        raise SystemExit("--repeat must be at least 1")
    sides = {"current": ROOT} if ref is None else {"current": ROOT, "ref": ref}
    meta = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "quick": args.quick,
            "repeat": repeat, "python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(),
            "trees": {side: tree_info(tree) for side, tree in sides.items()}}
    results = []
    for sc in select(args.only):
        entry: dict = {"name": sc.name, "note": sc.note, "requests": sc.request_count(args.quick)}
        missing = sc.missing()
        if missing:
            entry["skipped"] = f"missing {', '.join(map(str, missing))}"
            err.print(f"{sc.name}: skipped, {entry['skipped']}")
            results.append(entry)
            continue
        runs: dict[str, list[dict]] = {side: [] for side in sides}
        try:
            for i in range(repeat):
                order = list(sides) if i % 2 == 0 else list(reversed(sides))  # alternate who goes first
                for side in order:
                    res = run_child(sides[side], sc, args.quick)
                    runs[side].append(res)
                    err.print(f"{sc.name} [{side} {i + 1}/{repeat}]: {res['requests']:,} requests, "
                              f"{res['sim_req_per_s']:,.0f} sim req/s, {res['process_wall_s']:.2f} s "
                              f"process, {res['peak_rss_mib']:,.0f} MiB")
        except ChildFailed as exc:
            entry["failed"] = str(exc)
            err.print(f"{sc.name}: FAILED: {exc}")
        entry["runs"] = runs
        entry["median"] = {side: {k: median(rs, k) for k in FIGURES} for side, rs in runs.items()}
        if ref is not None:
            entry["ratio"] = {k: ratio(entry["median"]["current"][k], entry["median"]["ref"][k])
                              for k in FIGURES}
        results.append(entry)

    table = Table(title="kvsim speed suite" + (" (--quick)" if args.quick else "")
                  + (f", median of {repeat}" if repeat > 1 else ""))
    table.add_column("scenario")
    table.add_column("requests", justify="right")
    if ref is None:
        for col in ("sim req/s", "sim s", "process wall s", "peak RSS MiB"):
            table.add_column(col, justify="right")
    else:
        for col in ("sim req/s", "ref", "ratio", "process s", "ref", "ratio", "RSS MiB", "ref", "ratio"):
            table.add_column(col, justify="right")
    for e in results:
        if "skipped" in e or not e["runs"].get("current"):
            table.add_row(e["name"], f"{e['requests']:,}", e.get("skipped") or "failed")
            continue
        cur = e["median"]["current"]
        if ref is None:
            sim_s = median(e["runs"]["current"], "sim_s")
            table.add_row(e["name"], f"{e['requests']:,}", fmt(cur["sim_req_per_s"], ",.0f"),
                          fmt(sim_s, ".2f"), fmt(cur["process_wall_s"], ".2f"),
                          fmt(cur["peak_rss_mib"], ",.0f"))
        else:
            old, r = e["median"]["ref"], e["ratio"]
            table.add_row(e["name"], f"{e['requests']:,}",
                          fmt(cur["sim_req_per_s"], ",.0f"), fmt(old["sim_req_per_s"], ",.0f"),
                          fmt(r["sim_req_per_s"], ".3f"),
                          fmt(cur["process_wall_s"], ".2f"), fmt(old["process_wall_s"], ".2f"),
                          fmt(r["process_wall_s"], ".3f"),
                          fmt(cur["peak_rss_mib"], ",.0f"), fmt(old["peak_rss_mib"], ",.0f"),
                          fmt(r["peak_rss_mib"], ".3f"))
    out.print(table)
    if ref is not None:
        out.print("ratio = current / ref: sim req/s above 1 is faster; process s and RSS below 1 are better.")

    pairs = []
    by = {e["name"]: e for e in results}
    for slow, base, what in RATIOS:
        for side in sides:
            a = by.get(slow, {}).get("median", {}).get(side, {}).get("sim_req_per_s")
            b = by.get(base, {}).get("median", {}).get(side, {}).get("sim_req_per_s")
            cost = ratio(b, a)  # per-request cost of `slow` over `base` = base's rate / slow's rate
            if cost is None:
                continue
            pairs.append({"slow": slow, "base": base, "side": side, "cost_ratio": cost, "what": what})
            out.print(f"{side}: {slow} costs {cost:.2f}x {base} per simulated request ({what})")
    for side, info in meta["trees"].items():
        out.print(f"{side}: {info['path']} commit {info['commit'] or '-'}, "
                  f"{info['changed_files'] if info['changed_files'] is not None else '-'} changed files")

    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "scenarios": results, "ratios": pairs},
                                              indent=2) + "\n")
        out.print(f"wrote {args.json}")
    if any("failed" in e for e in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
