"""The published end-to-end serving runs (published_serving_runs.yaml beside this file) as kvsim scenarios,
the kvsim figure that stands for each published metric, and the held-out comparison table
(docs/cost_model.md, "Published serving runs (held out)"; calibration/serving_runs_report.py writes it).

kvsim.cost may not import the engine (docs/architecture.md): `serving_scenario` builds plain scenario dicts
and `run_case` takes the function that simulates one and returns its summary.json as a dict. Nothing here
is fitted: every case is held out."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvsim.cost.overhead_fit import ratio_summary
from kvsim.errors import KvsimError
from kvsim.inputs import load_yaml
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import HardwareSpec, load_hardware

PUBLISHED_SERVING_RUNS = Path(__file__).with_name("published_serving_runs.yaml")
RESULTS = Path(__file__).with_name("published_serving_results.yaml")
REPO_ROOT = Path(__file__).resolve().parents[2]
SHAREGPT_LENGTHS = REPO_ROOT / "workloads" / "lengths" / "sharegpt_v3_vllm_bench_llama3.csv"
OFFLINE_GROUPS = ("trtllm-perf-overview", "rocm-vllm-mi300x")
"""Groups measured offline (trtllm-bench, benchmark_latency's LLM.generate): no serving front end, so
cost.request_overhead_s 0."""
NIM_PROMPTS_PER_CLIENT = 16
"""NIM's page does not give the request count per point: kvsim sends this many requests per client. The
TTFT of the concurrency-25 point depends on it (every client's first request is sent at t = 0, a burst the
later ones do not see): docs/cost_model.md, "Published serving runs (held out)"."""
COMPARED = ("output_throughput", "latency_mean", "ttft_mean", "ttft_median", "tpot_mean", "tpot_median",
            "itl_mean", "itl_median")
"""The published metrics the table compares, in this order. Left out: duration, request_throughput and
total_throughput (for the same tokens each is output_throughput's ratio again, up to the token totals)
and the token totals (inputs of the scenario, not predictions)."""
METRIC_MAP = {
    "output_throughput": ("output_throughput", 1.0),
    "request_throughput": ("request_throughput", 1.0),
    "total_throughput": ("total_token_throughput", 1.0),
    "duration": ("duration_s", 1.0),
    "latency_mean": ("duration_s", 1.0),
    "ttft_mean": ("mean_ttft_ms", 1.0),
    "ttft_median": ("median_ttft_ms", 1.0),
    "tpot_mean": ("mean_tpot_ms", 1.0),
    "tpot_median": ("median_tpot_ms", 1.0),
    "itl_mean": ("mean_itl_ms", 1.0),
    "itl_median": ("median_itl_ms", 1.0),
    "total_input_tokens": ("total_input_tokens", 1.0),
    "total_generated_tokens": ("total_output_tokens", 1.0),
}
"""Published metric -> (key of summary.json's bench_serve section, factor to the published unit)."""
COST_MODELS = ("roofline", "kernels")
BEGIN = "<!-- published-serving-table:begin (calibration/serving_runs_report.py writes this) -->"
END = "<!-- published-serving-table:end -->"


def load_serving_runs(path: str | Path = PUBLISHED_SERVING_RUNS) -> list[dict[str, Any]]:
    """The `cases` of the published serving runs file (KvsimError when it has none)."""
    data = load_yaml(path, "published serving runs")
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list) or not cases:
        raise KvsimError(f"{path}: needs a non-empty 'cases' list")
    return cases


def measured_output_len(case: dict[str, Any]) -> int:
    """The mean output a run without --ignore-eos generated: total_generated_tokens / completed requests
    (all num_prompts completed in every GPUStack block), rounded."""
    return round(case["metrics"]["total_generated_tokens"]["value"] / case["num_prompts"])


def num_prompts(case: dict[str, Any]) -> int:
    """The case's request count; NIM's unstated count: NIM_PROMPTS_PER_CLIENT per client."""
    if case["num_prompts"] is not None:
        return case["num_prompts"]
    return NIM_PROMPTS_PER_CLIENT * case["concurrency"]


def _bench_serve(case: dict[str, Any], n: int) -> dict[str, Any]:
    """workload.bench_serve of a case: dataset, lengths, rate or concurrency, num_prompts."""
    b: dict[str, Any] = {"num_prompts": n}
    if case["dataset"] == "sharegpt":
        b.update(dataset="sharegpt", dataset_path=str(SHAREGPT_LENGTHS))
    else:
        stated_ratio = (case.get("random_range_ratio") or 0.0) if case["dataset"] == "random" else 0.0
        measured = case["group"] == "gpustack-perf-lab" and "total_generated_tokens" in case["metrics"]
        b.update(dataset="random", random_input_len=case["input_len"],
                 random_output_len=measured_output_len(case) if measured else case["output_len"],
                 random_range_ratio=stated_ratio)
        if case["group"] == "gpustack-perf-lab":
            b["seed"] = 42  # the page's `vllm bench serve --seed 42`
    if case["concurrency"] is not None:
        b["max_concurrency"] = case["concurrency"]
    else:
        b["request_rate"] = case["request_rate"]
    return b


GIB = 1 << 30
VLLM_LARGE_GPU_BYTES = 70 * GIB
"""vLLM's large-GPU threshold on the device's total memory (EngineArgs.get_batch_defaults, from v0.9.0)."""
VLLM_DEFAULTS = {
    # (large GPU, usage) -> (max_num_seqs, max_num_batched_tokens) before the cap of seqs at tokens
    (True, "serve"): (1024, 8192), (True, "llm"): (1024, 16384),
    (False, "serve"): (256, 2048), (False, "llm"): (256, 8192),
}
VLLM_V0_MAX_NUM_SEQS = 256
"""V0's EngineArgs default max_num_seqs (vLLM < 0.8.0, `vllm serve` and the LLM class alike)."""
VLLM_V0_LONG_CONTEXT = 32768
"""Above this max_model_len V0 turned chunked prefill on by itself (EngineArgs.create_engine_config)."""


def _version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of an engine_version such as "0.10.2", "v0.9.0rc1" (KvsimError otherwise)."""
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", str(text).strip())
    if not m:
        raise KvsimError(f"published serving runs: engine_version {text!r} is not a version "
                         "(major.minor.patch)")
    return int(m[1]), int(m[2]), int(m[3] or 0)


def vllm_serve_defaults(engine: str, version: str, hardware: str | HardwareSpec, usage: str = "serve",
                        max_model_len: int | None = None) -> dict[str, Any] | None:
    """The scheduler keys vLLM's own defaults give when its command line states neither --max-num-seqs nor
    --max-num-batched-tokens, or None for an engine other than vLLM (kvsim's scheduler defaults stay).

    vLLM >= 0.9.0 (vllm-project/vllm vllm/engine/arg_utils.py, EngineArgs._set_default_args /
    get_batch_defaults; the "a100" exclusion is PR #17885, merged 2025-05-09 and taken as first released
    in v0.9.0, over PR #17073's memory rule; later releases may add branches, e.g. PR #51726's larger budget
    on >= 160 GiB devices, reverted by PR #51908, none checked here beyond the 0.11 line): on a device
    with >= 70 GiB (HardwareSpec.memory_bytes, the CUDA / HIP total) whose name does not contain "a100"
    (H100, H200, B200, GB200, MI300X), `vllm serve` (usage "serve", UsageContext OPENAI_API_SERVER) 1024
    sequences and 8192 tokens a step, the LLM class (usage "llm": LLM(), benchmark_throughput /
    benchmark_latency) 1024 and 16384; on any other device (A100, L40S, ...) 256 and 2048, LLM class 256
    and 8192; max_num_seqs is then capped at max_num_batched_tokens. -> {max_num_seqs,
    max_num_batched_tokens}.

    vLLM < 0.8.0 (the V0 engine; the same for both usages): 256 sequences, and with a `max_model_len` of at
    most 32K (the case's --max-model-len, else the model's context) chunked prefill off and a budget of
    max(max_model_len, 2048) tokens (V0's SchedulerConfig) -> also {policy: vllm_v0, chunked_prefill:
    false}. Not modelled, KvsimError (state --max-num-seqs and --max-num-batched-tokens in the case's
    engine_args): V0 above 32K context (chunked prefill on by itself, with a budget that changed across
    releases), and the 0.8.x releases (V1's first defaults: 1024 sequences on every GPU, then H100 / H200
    by name, PRs #12369, #16158, #17073)."""
    if engine != "vllm":
        return None
    if usage not in ("serve", "llm"):
        raise KvsimError(f"vllm_serve_defaults: usage {usage!r}: one of 'serve', 'llm'")
    v = _version(version)
    if v < (0, 8, 0) and max_model_len is not None and max_model_len <= VLLM_V0_LONG_CONTEXT:
        return {"policy": "vllm_v0", "chunked_prefill": False, "max_num_seqs": VLLM_V0_MAX_NUM_SEQS,
                "max_num_batched_tokens": max(max_model_len, 2048)}
    if v < (0, 9, 0):
        raise KvsimError(f"published serving runs: vLLM {version}'s default max_num_seqs / "
                         f"max_num_batched_tokens ({usage}, max_model_len {max_model_len}) are not modelled "
                         "(kvsim has vLLM >= 0.9.0's and V0's up to 32K context); state --max-num-seqs and "
                         "--max-num-batched-tokens in engine_args")
    hw = load_hardware(hardware)
    large = hw.memory_bytes >= VLLM_LARGE_GPU_BYTES and "a100" not in hw.name.lower()
    seqs, tokens = VLLM_DEFAULTS[(large, usage)]
    return {"max_num_seqs": min(seqs, tokens), "max_num_batched_tokens": tokens}


def _usage(case: dict[str, Any]) -> str:
    """"serve" for a `vllm serve` run, "llm" for one through the LLM class (benchmark_latency /
    benchmark_throughput, the offline groups)."""
    words = (case.get("engine_args") or "").split()
    return "serve" if words[:2] == ["vllm", "serve"] else "llm"


def _engine(case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(kv, scheduler) keys the case's engine arguments state and kvsim has; where they do not state
    max_num_seqs / max_num_batched_tokens, the engine's own defaults (`vllm_serve_defaults`; the cap of
    max_num_seqs at max_num_batched_tokens applied after an explicit value, as vLLM does); kvsim's defaults
    otherwise."""
    args = case.get("engine_args") or ""
    kv: dict[str, Any] = {"block_size": 16, "prefix_cache": "none"}
    scheduler: dict[str, Any] = {}
    words = args.split()
    for flag, key, cast in (("--gpu-memory-utilization", "gpu_memory_utilization", float),
                            ("--max-model-len", "max_model_len", int),
                            ("--max-num-seqs", "max_num_seqs", int),
                            ("--max-num-batched-tokens", "max_num_batched_tokens", int),
                            ("--kv-cache-dtype", "dtype", str)):
        if flag in words:
            value = cast(words[words.index(flag) + 1])
            (kv if key in ("gpu_memory_utilization", "dtype") else scheduler)[key] = value
    if "--dtype" in words and "dtype" not in kv:  # no --kv-cache-dtype: the KV cache is at the model dtype
        kv["dtype"] = {"float16": "fp16", "bfloat16": "bf16"}.get(words[words.index("--dtype") + 1], "bf16")
    if case.get("engine") == "vllm" and not {"max_num_seqs", "max_num_batched_tokens"} <= scheduler.keys():
        context = scheduler.get("max_model_len") or get_model(case["model"]).max_position_embeddings
        defaults = vllm_serve_defaults("vllm", case["engine_version"], case["hardware"], _usage(case),
                                       context)
        explicit_seqs = "max_num_seqs" in scheduler
        for key, value in defaults.items():
            scheduler.setdefault(key, value)
        if not explicit_seqs:  # vLLM caps its default at the budget, the stated one too
            scheduler["max_num_seqs"] = min(scheduler["max_num_seqs"], scheduler["max_num_batched_tokens"])
    return kv, scheduler


def _parallelism(case: dict[str, Any]) -> dict[str, Any]:
    """parallelism of a case: its tensor_parallel_size, and the engine arguments' --enable-expert-parallel
    and -dp / --data-parallel-size where stated (docs/moe.md)."""
    par: dict[str, Any] = {"tensor_parallel_size": case["tensor_parallel_size"]}
    words = (case.get("engine_args") or "").split()
    if "--enable-expert-parallel" in words:
        par["enable_expert_parallel"] = True
    for flag in ("-dp", "--data-parallel-size"):
        if flag in words:
            par["data_parallel_size"] = int(words[words.index(flag) + 1])
    return par


def serving_scenario(case: dict[str, Any], cost_model: str, **cost: float) -> dict[str, Any]:

    """The scenario (a dict for `kvsim.scenario.build_scenario`) of one published case under `cost_model`.

    model, hardware, tensor_parallel_size and quantization are the case's; the workload is kind bench_serve:
    fixed lengths -> random with random_range_ratio 0, GPUStack's random -> random at --seed 42 with the
    measured mean output (`measured_output_len`: those runs do not force output lengths), sharegpt -> the
    shipped ShareGPT lengths (workloads/lengths/sharegpt_v3_vllm_bench_llama3.csv, their own outputs,
    mean 199 against the measured 194-196); request_rate inf or the case's, concurrency ->
    max_concurrency; simulation.requests = num_prompts (it caps the stream). The engine arguments the case
    states that kvsim has (`_engine`); for vLLM, the max_num_seqs / max_num_batched_tokens vLLM itself
    picks when unstated (`vllm_serve_defaults`: 1024 / 8192 for `vllm serve` on H100); else kvsim's
    defaults (blocks of 16, bf16 KV, 0.9 of the memory, 256 sequences, 8192 tokens a step, chunked
    prefill). Offline groups get request_overhead_s 0; `cost` overrides the cost model's keys."""
    n = num_prompts(case)
    kv, scheduler = _engine(case)
    sc: dict[str, Any] = {
        "name": case["case"], "model": case["model"], "hardware": case["hardware"],
        "quantization": case["quantization"],
        "parallelism": _parallelism(case),
        "kv": kv, "scheduler": scheduler,
        "workload": {"kind": "bench_serve", "bench_serve": _bench_serve(case, n)},
        "simulation": {"seed": 0, "requests": n},
        "cost": {"model": cost_model},
    }
    if case["group"] in OFFLINE_GROUPS:
        sc["cost"]["request_overhead_s"] = 0.0
    sc["cost"].update(cost)
    return sc


def kvsim_metric(name: str, summary: dict[str, Any]) -> float | None:
    """kvsim's figure for published metric `name`, in the published unit, from a run's summary.json.

    output_throughput, request_throughput, total_throughput (tokens or requests / s of the whole run, all
    GPUs together) -> the bench_serve section's output_throughput, request_throughput,
    total_token_throughput; duration and latency_mean (benchmark_latency's batch: every prompt at t = 0,
    so the batch's latency is the makespan) -> duration_s; ttft / tpot / itl mean and median (ms) -> mean_
    / median_ttft_ms, _tpot_ms, _itl_ms; the token totals -> total_input_tokens, total_output_tokens.
    None where the section has no such figure (e.g. an ITL median the timeline cannot give exactly)."""
    if name not in METRIC_MAP:
        raise KvsimError(f"published metric {name!r}: kvsim maps only {sorted(METRIC_MAP)}")
    key, factor = METRIC_MAP[name]
    value = summary["bench_serve"].get(key)
    return None if value is None else value * factor


def cost_models_for(case: dict[str, Any], has_tables: Callable[[str], bool]) -> tuple[str, ...]:
    """The cost models a case runs under: roofline always, kernels where its hardware has tables."""
    return COST_MODELS if has_tables(case["hardware"]) else ("roofline",)


def run_case(case: dict[str, Any], cost_model: str, summarize: Callable[[dict[str, Any]], dict[str, Any]],
             **cost: float) -> dict[str, float | None]:
    """kvsim's figure for every compared metric the case publishes, under `cost_model` (`summarize` runs
    one scenario dict and returns its summary.json)."""
    summary = summarize(serving_scenario(case, cost_model, **cost))
    return {m: kvsim_metric(m, summary) for m in COMPARED if m in case["metrics"]}


def comparison_rows(cases: list[dict[str, Any]], figures: dict[str, dict[str, dict[str, Any] | str]]
                    ) -> list[dict[str, Any]]:
    """One row per case and compared metric: case, hardware, model, group, metric, published, unit and per
    cost model kvsim / published (None: no figure; a string: why the case did not run, e.g. too slow;
    'no tables' for kernels on a device without kernel tables). `figures`: case -> cost model -> the
    case's `run_case` figures or that string."""
    rows = []
    for case in cases:
        per_model = figures.get(case["case"], {})
        for metric in (m for m in COMPARED if m in case["metrics"]):
            pub = case["metrics"][metric]
            row = {"case": case["case"], "hardware": case["hardware"], "model": case["model"],
                   "group": case["group"], "metric": metric, "published": pub["value"], "unit": pub["unit"],
                   "roofline": "not run", "kernels": "no tables"}
            for cm, got in per_model.items():
                row[cm] = got if isinstance(got, str) else ratio(got.get(metric), pub["value"])
            rows.append(row)
    return rows


def implied_overhead_s(case: dict[str, Any], kvsim_ttft_ms: float) -> float:
    """The front-end latency a low-load run implies: its published mean TTFT minus kvsim's at
    request_overhead_s 0, in seconds (negative: kvsim's TTFT alone is already longer)."""
    return (case["metrics"]["ttft_mean"]["value"] - kvsim_ttft_ms) / 1000


def overhead_note(case: dict[str, Any], cost_model: str, ttft_ms: float) -> str:
    """The docs' line for one low-load run and cost model: the request_overhead_s it implies."""
    return (f"Implied cost.request_overhead_s ({case['case']}, {case['model']}, {cost_model}): "
            f"published TTFT {case['metrics']['ttft_mean']['value']:g} ms - kvsim {ttft_ms:.1f} ms at "
            f"overhead 0 = {implied_overhead_s(case, ttft_ms):.3f} s.")


def load_results(path: str | Path = RESULTS) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The report script's figures file: (case -> cost model -> figures or why none, the request_overhead
    entries)."""
    data = load_yaml(path, "published serving results")
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise KvsimError(f"{path}: needs a 'results' list (rerun calibration/serving_runs_report.py)")
    figures: dict[str, dict[str, Any]] = {}
    for entry in data["results"]:
        figures.setdefault(entry["case"], {})[entry["cost_model"]] = entry["figures"]
    return figures, list(data.get("request_overhead") or [])


def render_from_results(cases: list[dict[str, Any]], path: str | Path = RESULTS) -> str:
    """The docs' block rebuilt from the figures file."""
    figures, overheads = load_results(path)
    by_name = {c["case"]: c for c in cases}
    notes = tuple(overhead_note(by_name[o["case"]], o["cost_model"], o["ttft_mean_ms"]) for o in overheads)
    return render_table(comparison_rows(cases, figures), notes)


def ratio(kvsim: float | None, published: float) -> float | None:
    """kvsim / published (None when kvsim has no figure)."""
    return None if kvsim is None else kvsim / published


def error_summary(rows: list[dict[str, Any]], cost_model: str, by: str = "model"
                  ) -> dict[str, dict[str, float | int]]:
    """Per value of the rows' `by` key (model: the LLM; group: the source) and over all rows ('all'): how
    many of `cost_model`'s rows have a ratio, and the median and the max of their |ratio - 1|."""
    groups: dict[str, list[float]] = {}
    for row in rows:
        r = row.get(cost_model)
        if isinstance(r, float):
            for g in (row[by], "all"):
                groups.setdefault(g, []).append(r)
    out = {}
    for g, ratios in groups.items():
        s = ratio_summary(ratios)
        out[g] = {"n": len(ratios), "median": s["median_abs_err"], "max": s["max_abs_err"]}
    return out


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "n/a" if value is None else str(value)


def render_table(rows: list[dict[str, Any]], notes: tuple[str, ...] = ()) -> str:
    """The markdown of the comparison (rows: case, hardware, model, group, metric, published, unit, and per
    cost model a ratio, None for no figure, or a string saying why it did not run), the error summaries
    (absolute error: |ratio - 1|) and `notes` lines, between BEGIN and END."""
    out = [BEGIN, "", "| case | device | metric | published | roofline ratio | kernels ratio |",
           "|---|---|---|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['case']} | {r['hardware']} | {r['metric']} | {r['published']:g} {r['unit']} | "
                   f"{_cell(r['roofline'])} | {_cell(r['kernels'])} |")
    out += ["", "| cost model | rows of | rows | median abs error | max abs error |",
            "|---|---|---:|---:|---:|"]
    shared = [r for r in rows if isinstance(r["kernels"], float) and isinstance(r["roofline"], float)]
    for cm in COST_MODELS:
        for by in ("model", "group"):
            for g, e in sorted(error_summary(rows, cm, by).items()):
                if g != "all":
                    out.append(f"| {cm} | {by} {g} | {e['n']} | {e['median']:.1%} | {e['max']:.1%} |")
        for label, subset in (("all", rows), ("rows both models ran", shared)):
            e = error_summary(subset, cm).get("all")
            if e:
                out.append(f"| {cm} | {label} | {e['n']} | {e['median']:.1%} | {e['max']:.1%} |")
    out += ["", *notes, "", END] if notes else ["", END]
    return "\n".join(out)


def replace_between_markers(text: str, table: str) -> str:
    """`text` with the part from BEGIN to END replaced by `table` (KvsimError without the markers)."""
    start, stop = text.find(BEGIN), text.find(END)
    if start < 0 or stop < start:
        raise KvsimError(f"docs/cost_model.md: needs the markers {BEGIN!r} and {END!r}")
    return text[:start] + table + text[stop + len(END):]
