"""kvsim beside NVIDIA AIConfigurator 0.12.0 (the AISimulate estimator, Rust core) on one workload both can
express: Llama-3.1-8B on one H200, bf16, 1,024 input / 128 output tokens, 16 requests in flight, 1,000
requests. CPU time, never wall (the machine is shared).

    .venv/bin/python benchmarks/bench_aisimulate.py                       # 5 repeats per side
    .venv/bin/python benchmarks/bench_aisimulate.py --repeats 3 --json /tmp/ais.json
    .venv/bin/python benchmarks/bench_aisimulate.py --aisim-python /path/to/venv/bin/python

kvsim: benchmarks/aisimulate_llama8b_h200.yaml (`kind: bench_serve`, `max_concurrency: 16`, fixed lengths).
Per repeat, the simulation alone (`Simulation(scenario).run()` in this process: workload generation and
the engine loop, time.process_time), its set-up apart (`Simulation(scenario)`: the cost model and its
kernel tables, the KV pool), and the whole process (`kvsim run FILE --out TMP --no-progress
--no-plots` in a child: start-up, imports, simulation, summary, Parquet and report.md; user + system CPU
from os.wait4).

AIConfigurator: benchmarks/aisimulate_child.py run by `--aisim-python` (its own venv; skipped with a message
when that python is missing). 0.12.0 has no request replay (the replay, "AISimulate", ships in Dynamo's
`aisimulate` distribution, which is not installable from PyPI here); the closest it offers is the agg
estimate, `cli_estimate(..., mode="agg", batch_size=16)`: a closed-form steady state of continuous
batching at 16 in flight from one mixed step and one decode-only step, whose cost does not depend on
the request count. Its "simulation alone" is `InferenceSession.run_agg` (warm: the perf database loaded,
the model built); it is credited with the same 1,000 requests. Its whole process is the command line,
`aiconfigurator cli estimate --model-path meta-llama/Meta-Llama-3.1-8B --system h200_sxm --backend vllm
--isl 1024 --osl 128 --batch-size 16 --tp-size 1 --estimate-mode agg` (the `aiconfigurator` script beside
`--aisim-python`). Also reported: the CPU cost of one call of its compiled step model, times kvsim's
mixed (prefill) and decode-only iteration counts: what a per-iteration replay on that step model would
spend in the step model alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "aisimulate_llama8b_h200.yaml"
CHILD = HERE / "aisimulate_child.py"
DEFAULT_AISIM_PYTHON = "/work/aisim/.venv/bin/python"
MODEL = "meta-llama/Meta-Llama-3.1-8B"  # AIConfigurator's bundled config of Llama-3.1-8B
KVSIM_MAIN = "import sys; from kvsim.cli import main; sys.argv[0] = 'kvsim'; main()"


def run_child(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str, int]:
    """Run argv to its end; return (user + system CPU seconds, stdout, exit status)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read()
        if proc.returncode:
            sys.stderr.write(err.read()[-3000:])
    return usage.ru_utime + usage.ru_stime, text, proc.returncode


def kvsim_side(repeats: int, requests: int, python: str) -> dict:
    import pyarrow.parquet as pq

    from kvsim.engine.simulation import Simulation
    from kvsim.scenario import load_scenario

    overrides = [f"simulation.requests={requests}", f"workload.bench_serve.num_prompts={requests}"]
    sim_cpu: list[float] = []
    setup_cpu: list[float] = []
    for _ in range(repeats):
        sc = load_scenario(str(SCENARIO), overrides)
        t0 = time.process_time()
        simulation = Simulation(sc)
        t1 = time.process_time()
        result = simulation.run()
        sim_cpu.append(time.process_time() - t1)
        setup_cpu.append(t1 - t0)
        if len(result.requests) != requests:
            raise SystemExit(f"kvsim simulated {len(result.requests)} requests, expected {requests}")

    proc_cpu: list[float] = []
    summary: dict = {}
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            argv = [python, "-c", KVSIM_MAIN, "run", str(SCENARIO), "--out", f"{tmp}/out", "--no-progress",
                    "--no-plots", *[a for o in overrides for a in ("--set", o)]]
            cpu, _, code = run_child(argv, env)
            if code:
                raise SystemExit(f"kvsim run exited {code}")
            proc_cpu.append(cpu)
            summary = json.loads(Path(f"{tmp}/out/summary.json").read_text())
            timeline = pq.read_table(f"{tmp}/out/timeline.parquet", columns=["prefill_tokens"])
            prefill_iterations = sum(1 for t in timeline.column(0).to_pylist() if t > 0)
    bs = summary["bench_serve"]
    return {
        "requests": requests, "sim_cpu_s": sim_cpu, "setup_cpu_s": setup_cpu, "process_cpu_s": proc_cpu,
        "iterations": summary["iterations"], "prefill_iterations": prefill_iterations,
        "cost_model": summary["cost_model"]["model"],
        "ttft_ms": bs["mean_ttft_ms"], "median_ttft_ms": bs["median_ttft_ms"], "tpot_ms": bs["mean_tpot_ms"],
        "e2el_ms": bs["mean_e2el_ms"], "output_tokens_per_s": bs["output_throughput"],
        "requests_per_s": bs["request_throughput"], "duration_s": bs["duration_s"],
    }


def aisim_side(repeats: int, python: str, calls: int) -> dict | None:
    if not Path(python).exists():
        print(f"AIConfigurator skipped: no python at {python} (pip install aiconfigurator==0.12.0 in a venv "
              "of its own and pass --aisim-python)", flush=True)
        return None
    runs: list[dict] = []
    proc_cpu: list[float] = []
    cli = [str(Path(python).parent / "aiconfigurator"), "cli", "estimate", "--model-path", MODEL,
           "--system", "h200_sxm", "--backend", "vllm", "--isl", "1024", "--osl", "128", "--batch-size", "16",
           "--tp-size", "1", "--estimate-mode", "agg"]
    for _ in range(repeats):
        cpu, text, code = run_child([python, str(CHILD), "--repeats", str(calls), "--model", MODEL])
        if code:
            print(f"AIConfigurator skipped: its child exited {code}", flush=True)
            return None
        runs.append(json.loads(text.strip().splitlines()[-1]))
        cpu, text, code = run_child(cli)
        if code:
            print(f"AIConfigurator skipped: {' '.join(cli[1:3])} exited {code}", flush=True)
            return None
        proc_cpu.append(cpu)
    last = runs[-1]
    # the first call of each process loads the perf database and builds the compiled engine: not "warm"
    warm_agg = [t for r in runs for t in r["run_agg_cpu_s"][1:]]
    warm_est = [t for r in runs for t in r["estimate_cpu_s"][1:]]
    return {
        "call": last["call"], "backend": last["backend"],
        "run_agg_cpu_s": warm_agg, "estimate_cpu_s": warm_est,
        "first_estimate_cpu_s": [r["estimate_cpu_s"][0] for r in runs],
        "cli": " ".join(["aiconfigurator", *cli[1:]]), "process_cpu_s": proc_cpu,
        "import_cpu_s": [r["import_cpu_s"] for r in runs],
        "mixed_step_us": statistics.median(r["mixed_step_us"] for r in runs),
        "decode_step_us": statistics.median(r["decode_step_us"] for r in runs),
        "ttft_ms": last["ttft_ms"], "tpot_ms": last["tpot_ms"], "e2el_ms": last["request_latency_ms"],
        "output_tokens_per_s": last["output_tokens_per_s"], "requests_per_s": last["requests_per_s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs per side (medians reported)")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--aisim-python", default=DEFAULT_AISIM_PYTHON)
    ap.add_argument("--aisim-calls", type=int, default=3, help="estimates per AIConfigurator process")
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args()
    med = statistics.median
    n = args.requests

    kv = kvsim_side(args.repeats, n, sys.executable)
    ai = aisim_side(args.repeats, args.aisim_python, max(2, args.aisim_calls))
    sim, setup, kproc = med(kv["sim_cpu_s"]), med(kv["setup_cpu_s"]), med(kv["process_cpu_s"])
    print(f"workload: Llama-3.1-8B, one H200, bf16, {n} requests of 1,024 in / 128 out, 16 in flight; "
          f"CPU seconds, median of {args.repeats}")
    print(f"kvsim ({kv['cost_model']} cost model, {kv['iterations']} iterations): "
          f"simulation (run) {sim:.3f} s ({n / sim:,.0f} req/CPU-s), "
          f"set-up (Simulation(scenario)) {setup:.3f} s, "
          f"whole process (kvsim run) {kproc:.2f} s ({n / kproc:,.0f} req/CPU-s)")
    print(f"  mean TTFT {kv['ttft_ms']:.1f} ms (median {kv['median_ttft_ms']:.1f}), mean TPOT "
          f"{kv['tpot_ms']:.2f} ms, E2E {kv['e2el_ms']:.0f} ms, "
          f"{kv['output_tokens_per_s']:,.0f} output tok/s, {kv['requests_per_s']:.2f} req/s")
    if ai is not None:
        agg, proc = med(ai["run_agg_cpu_s"]), med(ai["process_cpu_s"])
        mixed = kv["prefill_iterations"]
        decode = kv["iterations"] - mixed
        step_s = (mixed * ai["mixed_step_us"] + decode * ai["decode_step_us"]) * 1e-6
        print(f"AIConfigurator 0.12.0 ({ai['backend']}): {ai['call']}")
        est, first = med(ai["estimate_cpu_s"]), med(ai["first_estimate_cpu_s"])
        print(f"  run_agg (warm) {agg * 1e3:.2f} ms (credited with {n} requests: {n / agg:,.0f} req/CPU-s), "
              f"cli_estimate warm {est:.2f} s, first {first:.2f} s")
        print(f"  whole process ({ai['cli']}) {proc:.2f} s ({n / proc:,.0f} req/CPU-s)")
        print(f"  step model: mixed {ai['mixed_step_us']:.1f} us, decode {ai['decode_step_us']:.1f} us per "
              f"call; x kvsim's {mixed} mixed + {decode} decode iterations = {step_s * 1e3:.1f} ms "
              f"({n / step_s:,.0f} req/CPU-s) in the step model alone")
        print(f"  TTFT {ai['ttft_ms']:.1f} ms, TPOT {ai['tpot_ms']:.2f} ms, E2E {ai['e2el_ms']:.0f} ms, "
              f"{ai['output_tokens_per_s']:,.0f} output tok/s, {ai['requests_per_s']:.2f} req/s")
        print(f"ratio kvsim / AIConfigurator, requests per CPU-second: simulation vs run_agg "
              f"{agg / sim:.4f}, vs step model x iterations {step_s / sim:.3f}, "
              f"set-up + simulation vs cli_estimate warm {est / (setup + sim):.2f}, "
              f"whole process {proc / kproc:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"requests": n, "repeats": args.repeats, "kvsim": kv,
                                               "aiconfigurator": ai}, indent=1))


if __name__ == "__main__":
    main()
