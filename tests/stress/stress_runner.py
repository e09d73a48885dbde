"""Run random configurations (stress_configs.py) in check mode, each in its own process with a wall-clock
budget, and classify each: `ok`, `invariant` (an allocator / scheduler invariant failed: an AssertionError
from kv.check_invariants), `inconsistent` (a summary figure disagrees with requests / timeline: the
consistency checker, kvsim/metrics/consistency.py), `stall` (past its budget: how far it got, in simulated
seconds, requests finished of N and iterations), `error` (anything else: a KvsimError or a crash).

    .venv/bin/python tests/stress/stress_runner.py --configs 200 --jobs 2            # the long run (>= 200)
    .venv/bin/python tests/stress/stress_runner.py --seeds 17,42 --budget 600 -v     # re-run single seeds

tests/stress/test_stress.py runs a sample of seeds (KVSIM_STRESS=long: 200) through `run_many`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import signal
import statistics
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import stress_configs as configs  # noqa: E402

BUDGET_S = 120.0
"""A configuration still running after this many wall seconds is a stall."""
CLASSES = ("ok", "invariant", "inconsistent", "stall", "error")


class _Stall(Exception):
    pass


def _alarm(_sig, _frame):
    raise _Stall


def run_one(seed: int, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """One configuration in this process, stopped by SIGALRM after budget_s: its class and details."""
    import kvsim
    from kvsim.engine.simulation import Simulation
    from kvsim.metrics.consistency import ConsistencyError
    from kvsim.metrics.summary import build_summary

    t0 = time.perf_counter()
    sc_map, labels, redraws = configs.draw_valid(seed)
    out: dict[str, Any] = {**labels, "redraws": redraws}
    sim = None
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, budget_s)
    try:
        sc = kvsim.load(sc_map)
        sim = Simulation(sc)
        res = sim.run()
        summary = build_summary(res.requests, res.timeline, res.meta)  # check mode: raises on a mismatch
        out.update(cls="ok", completed=summary["requests"]["completed"], total=summary["requests"]["total"],
                   iterations=summary["iterations"], preemptions=summary["preemptions"],
                   rejected=summary["requests"]["rejected"],
                   tier_hit_tokens=sum(v for k, v in (summary.get("tiers") or {}).get(
                       "prompt_tokens_by_source", {}).items() if k not in ("gpu", "computed")),
                   handed_off=((summary.get("fleet") or {}).get("kv_transfer") or {}).get("handed_off", 0))
    except _Stall:
        out.update(cls="stall", why=f"past {budget_s:g} s: {_progress(sim)}")
    except ConsistencyError as e:
        out.update(cls="inconsistent", why=str(e))
    except AssertionError as e:
        out.update(cls="invariant", why=f"{e} at {_where(e)}")
    except Exception as e:  # noqa: BLE001 - every other failure is reported, not raised
        out.update(cls="error", why=f"{type(e).__name__}: {e} at {_where(e)}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    return out


def _where(e: BaseException) -> str:
    tb = [f for f in traceback.extract_tb(e.__traceback__) if "/kvsim/" in f.filename] or \
        traceback.extract_tb(e.__traceback__)
    return f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"


def _progress(sim) -> str:
    """How far a stopped simulation got: simulated seconds, requests finished of N, iterations."""
    if sim is None or not hasattr(sim, "env"):
        return "before the simulation started"
    iters = sum(r.sched.iterations for r in getattr(sim, "replicas", []))
    return (f"simulated {sim.env.now:.4g} s, {sim._completed} of {sim.total_requests} requests finished, "
            f"{iters} iterations")


def run_many(seeds: list[int], jobs: int = 2, budget_s: float = BUDGET_S, log=None) -> list[dict[str, Any]]:
    """The seeds on `jobs` forked worker processes; results in seed order. A configuration that does not
    answer within budget + 60 s is a stall too (its SIGALRM never fired)."""
    ctx = multiprocessing.get_context("fork")
    results: dict[int, dict[str, Any]] = {}
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        futures = {s: pool.submit(run_one, s, budget_s) for s in seeds}
        for s, f in futures.items():
            try:
                results[s] = f.result(timeout=budget_s + 60)
            except FutureTimeout:
                results[s] = {"seed": s, "cls": "stall", "why": "no answer (the alarm did not fire)",
                              "wall_s": budget_s + 60}
            except Exception as e:  # noqa: BLE001 - a crashed worker
                results[s] = {"seed": s, "cls": "error", "why": f"worker: {type(e).__name__}: {e}",
                              "wall_s": 0.0}
            if log is not None:
                log(results[s])
    return [results[s] for s in seeds]


def tally(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per class, and the wall-time distribution (s) of the configurations."""
    walls = sorted(r["wall_s"] for r in results)
    q = statistics.quantiles(walls, n=100, method="inclusive") if len(walls) > 1 else walls * 99
    return {"configs": len(results), **{c: sum(r["cls"] == c for r in results) for c in CLASSES},
            "wall_s": {"total": round(sum(walls), 1), "min": walls[0] if walls else None,
                       "p50": round(q[49], 2) if walls else None, "p90": round(q[89], 2) if walls else None,
                       "max": walls[-1] if walls else None}}


def _line(r: dict[str, Any]) -> str:
    head = (f"seed {r['seed']:>6} {r['cls']:<12} {r['wall_s']:>7.2f}s  {r.get('shape', '?')}"
            f" x{r.get('replicas', '?')} {r.get('workload', '?')} {r.get('model', '?')}"
            f" cache={r.get('cache')} tiers={r.get('tiers')}"
            f" {r.get('sampling')} {r.get('preemption')} {r.get('policy')} sparsity={r.get('sparsity')}"
            f" spec={r.get('speculative')} lora={r.get('lora')} ep={r.get('ep')}")
    return head + (f"\n        {r['why']}" if r.get("why") else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", type=int, default=200, help="configurations (seeds start..start+N-1)")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seeds", default=None, help="comma-separated seeds instead of a range")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="wall seconds per configuration")
    ap.add_argument("--json", default=None, help="write every result to this JSON file")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print every configuration, not only failures")
    a = ap.parse_args(argv)
    seeds = ([int(s) for s in a.seeds.split(",")] if a.seeds else list(range(a.start, a.start + a.configs)))

    def log(r: dict[str, Any]) -> None:
        if a.verbose or r["cls"] != "ok":
            print(_line(r), flush=True)

    t0 = time.perf_counter()
    results = run_many(seeds, a.jobs, a.budget, log)
    summary = tally(results)
    summary["elapsed_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(summary, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "results": results}, indent=1) + "\n")
    return 0 if summary["ok"] == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
