"""AIConfigurator 0.12.0's side of bench_aisimulate.py: run by the AIConfigurator venv's python (never by
kvsim's), prints one JSON line.

    /work/aisim/.venv/bin/python benchmarks/aisimulate_child.py --repeats 5

What it times (aiconfigurator 0.12.0 ships no request replay; see benchmarks/README.md, "AISimulate"):

- `estimate_cpu_s`: `aiconfigurator.cli.api.cli_estimate(model_path, "h200_sxm", mode="agg",
  backend_name=..., isl=1024, osl=128, batch_size=16, tp_size=1)`, the SDK twin of
  `aiconfigurator cli estimate --estimate-mode agg`: build the model, then `InferenceSession.run_agg`,
  AIConfigurator's steady-state continuous-batching (IFB) estimate at 16 requests in flight. The first call
  also loads the perf database; the later ones reuse it (the figure is each call's CPU time).
- `run_agg_cpu_s`: `InferenceSession.run_agg` alone inside those calls (its memo cleared before each, so it
  computes every time): the mean-field formula over one mixed and one decode-only step latency from the Rust
  engine.
- `mixed_step_us` / `decode_step_us`: one call of the compiled per-iteration step model
  (`EngineHandle.mixed_step_latency(ctx_tokens, gen_tokens, isl, osl, prefix)` /
  `decode_step_latency(gen_tokens, isl, osl)`, the Rust `AicEngine`), averaged over `--step-calls` calls
  with the context length varying call to call: the cost of one iteration's step time if a replay drove
  AIConfigurator's step model per iteration.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings

T_START = time.process_time()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--model", default="meta-llama/Meta-Llama-3.1-8B")
    ap.add_argument("--system", default="h200_sxm")
    ap.add_argument("--backend", default="vllm")
    ap.add_argument("--isl", type=int, default=1024)
    ap.add_argument("--osl", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--step-calls", type=int, default=2000)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)

    t0 = time.process_time()
    import aiconfigurator
    from aiconfigurator.cli.api import cli_estimate
    from aiconfigurator.sdk.inference_session import InferenceSession
    from aiconfigurator_core.sdk import rust_engine_step
    import_cpu = time.process_time() - t0

    agg_times: list[float] = []
    seen: dict = {}
    original = InferenceSession.run_agg

    def timed_run_agg(self, runtime_config, **kwargs):
        self._backend._agg_cache.clear()
        seen["session"] = self
        seen["runtime_config"] = runtime_config
        a = time.process_time()
        out = original(self, runtime_config, **kwargs)
        agg_times.append(time.process_time() - a)
        return out

    InferenceSession.run_agg = timed_run_agg
    estimate_times: list[float] = []
    result = None
    for _ in range(args.repeats):
        a = time.process_time()
        result = cli_estimate(args.model, args.system, mode="agg", backend_name=args.backend,
                              isl=args.isl, osl=args.osl, batch_size=args.concurrency, tp_size=1)
        estimate_times.append(time.process_time() - a)
    InferenceSession.run_agg = original

    session = seen["session"]
    handle = rust_engine_step._cached_engine_handle(session._model, session._database)
    n = args.step_calls
    a = time.process_time()
    for i in range(n):  # arguments vary as in a replay (a memo of the last call would not help)
        gen = 1 + i % (args.concurrency - 1)
        handle.mixed_step_latency(args.isl, gen, args.isl + i % args.osl, args.osl, 0)
    mixed_us = (time.process_time() - a) / n * 1e6
    a = time.process_time()
    for i in range(n):
        handle.decode_step_latency(args.concurrency, args.isl + i % args.osl, args.osl)
    decode_us = (time.process_time() - a) / n * 1e6

    raw = result.raw
    print(json.dumps({
        "version": aiconfigurator.__version__ if hasattr(aiconfigurator, "__version__") else "0.12.0",
        "backend": f"{raw.get('backend')} {raw.get('version')}",
        "call": (f"cli_estimate({args.model!r}, {args.system!r}, mode='agg', backend_name={args.backend!r}, "
                 f"isl={args.isl}, osl={args.osl}, batch_size={args.concurrency}, tp_size=1)"),
        "import_cpu_s": import_cpu,
        "estimate_cpu_s": estimate_times,
        "run_agg_cpu_s": agg_times,
        "mixed_step_us": mixed_us,
        "decode_step_us": decode_us,
        "ttft_ms": float(raw["ttft"]),
        "tpot_ms": float(raw["tpot"]),
        "request_latency_ms": float(raw["request_latency"]),
        "output_tokens_per_s": float(raw["tokens/s"]),
        "requests_per_s": float(raw["seq/s"]),
        "concurrency": float(raw["concurrency"]),
        "memory_gb": float(raw["memory"]),
        "process_cpu_s": time.process_time() - T_START,
    }), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
