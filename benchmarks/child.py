"""Run one suite scenario the way `kvsim run` does and print one JSON line with its figures.

    python benchmarks/child.py NAME [--quick] [--out DIR]

The scenario (benchmarks/scenarios.py: file, overrides, request count) is run through kvsim's own command
line, `kvsim run FILE --set ... --out DIR --no-progress`, in this process, with `Simulation.run` wrapped
to time the simulation loop alone. The last stdout line is JSON: the simulated requests, the loop's wall
seconds and requests per wall-second, and the `kvsim` package imported (so a caller that set PYTHONPATH
can check which tree ran). Whole-process wall time and peak RSS are the caller's to measure (suite.py
times the child from its start and reads its resource usage from os.wait4). The command line's own
output goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scenarios.py beside this file (before kvsim)

import scenarios  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("--quick", action="store_true", help="request count divided by 10")
    ap.add_argument("--out", help="output folder (default: a temporary one, removed)")
    args = ap.parse_args()
    sc = scenarios.by_name(args.name)
    missing = sc.missing()
    if missing:
        raise SystemExit(f"{sc.name}: missing {', '.join(map(str, missing))}")

    import kvsim
    import kvsim.cli
    from kvsim.engine.simulation import Simulation

    loops: list[tuple[float, int]] = []
    inner = Simulation.run

    def timed_run(self, *a, **kw):
        t0 = time.perf_counter()
        result = inner(self, *a, **kw)
        loops.append((time.perf_counter() - t0, len(result.requests)))
        return result

    Simulation.run = timed_run
    with contextlib.ExitStack() as stack:
        out = args.out or str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "out")
        argv = ["kvsim", "run", str(sc.path), "--out", out, "--no-progress"]
        for item in sc.all_overrides(args.quick):
            argv += ["--set", item]
        sys.argv = argv
        code = 0
        with contextlib.redirect_stdout(sys.stderr):
            try:
                kvsim.cli.main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        if code:
            raise SystemExit(f"{sc.name}: kvsim run exited {code}")
        if len(loops) != 1:
            raise SystemExit(f"{sc.name}: expected one Simulation.run, saw {len(loops)}")
        wall, n = loops[0]
        print(json.dumps({"scenario": sc.name, "quick": args.quick, "requests": n, "sim_s": wall,
                          "sim_req_per_s": n / wall if wall > 0 else None, "kvsim": kvsim.__file__}),
              flush=True)


if __name__ == "__main__":
    main()
