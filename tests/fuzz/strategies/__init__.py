"""Hypothesis strategies that build fuzz cases (`harness.Case`) for the kvsim CLI and its Python API.

Each public `*_cases()` strategy yields complete cases: the files to create, the argument list and what
the outcome must be (`expect`: "pass", "fail" or "any"). Categories:

    valid        small valid scenarios (<= 30 requests, catalog or tiny models): must run
    broken       a valid scenario with one to three schema mutations written into the YAML file
    override     the same mutations given as `--set KEY=VALUE` instead
    cross        cross-field nonsense (n above max_num_seqs, prefix cache on a contiguous layout, ...)
    yaml         YAML-level abuse: alias bombs, deep nesting, duplicate keys, bad bytes, wrong shapes
    trace        Azure CSV and Mooncake JSONL traces with bad fields or bad structure
    model        inline model specs, model YAML files and Hugging Face config.json files with bad shapes
    hardware     inline hardware mappings and hardware profile folders with bad numbers or files
    cli          argument lists for every subcommand, bad flags and values
    out          --out targets that are files, the working folder, its parent, user folders, and earlier
                 output folders the user added to or changed
    markup       rich markup and emoji codes in names, file names and --vary values: printed verbatim
and the newer surfaces (issue 25):
    plan         `kvsim plan`: every --find kind, --slo, --qps, --hardware, --tp, --precision, --repeats,
                 --max-extension, --jobs, good and bad (few-request scenarios: probes are "too short" at once)
    sweep        `kvsim sweep` files (grid, points, repeats; bad axes, 10^15-run grids, duplicate runs) and
                 --backend / --address / --jobs / --seed / --out
    api          Python API calls (kvsim.run, load, compare, sweep, plan) with wrong types and values, run in
                 the worker's API mode: a return or a one-line KvsimError, never another exception
    fleet        cluster.pools (roles, replicas, hardware, TP, per-pool kv / scheduler), kv_transfer (the
                 NICs), routers
    tiers        every key of kv.tiers entries and of the chain (placement, store, load, chunks, min uses)
    lora         every key of the lora section and vLLM's names for them, adapter lists and groups, the
                 combinations not modelled (MLA / MoE models, P/D, contiguous, sparsity)
    layers       layer-group models: layer_types, sliding windows, Mamba-2 / GDN state layers, MLA; inline,
                 as model YAML and as Hugging Face config.json (Gemma-2/3, gpt-oss, Qwen2, Nemotron-H, ...)
    dsv4         DeepSeek-V4 specs: compress_ratios, index_*, per-part KV precision
    kvdtype      kv.dtype names and quantized formats (and `quantization`), in files, --set, --kv-dtype
    slo          slo: sections and `kvsim run --slo`
    pricing      pricing.usd_per_gpu_hour: one number or by hardware profile, on replicas and pools
    speculative  the `speculative` section (and vLLM's speculative_config): methods, k, acceptance forms,
                 draft models, and the combinations it does not model (issue 26)

Valid scenarios are kept tiny so a run takes well under a second; expensive commands (compare, run with
plots) are drawn less often than cheap ones (validate, errors).

The strategies live in one module per kind of input:

    common        building blocks: catalog names, `Raw` YAML scalars, to_yaml, set_path, run_argv, the
                  base and tiny scenarios every module starts from
    scenarios     valid scenarios (workloads, sparsity, ...): `valid`, and the base of `broken`/`override`
    mutations     schema mutations written into the file (`broken`) or given by --set (`override`)
    cross         cross-field nonsense (`cross`)
    yaml_abuse    YAML-level abuse (`yaml`)
    traces        Azure CSV, Mooncake JSONL and column traces (`trace`)
    models        model specs, model YAML files, Hugging Face config.json (`model`)
    hardware      inline hardware mappings and hardware profile folders (`hardware`)
    cli_args      argument lists for every subcommand (`cli`)
    out_folders   --out targets and earlier output folders (`out`)
    markup        rich markup and emoji codes in what kvsim echoes (`markup`)
    plan_args     `kvsim plan` command lines (`plan`)
    sweep_files   sweep files and `kvsim sweep` options (`sweep`)
    api_calls     Python API calls as source (`api`)
    fleets        cluster pools, KV transfer and routers (`fleet`)
    tiers         KV tiers (`tiers`)
    lora          multi-LoRA (`lora`)
    layer_models  layer-group models and DeepSeek-V4 specs (`layers`, `dsv4`)
    kv_slo_pricing  KV precision, SLO and pricing keys (`kvdtype`, `slo`, `pricing`)
    speculative   the speculative-decoding section (`speculative`)
"""

from __future__ import annotations

from cases import Case
from hypothesis import strategies as st

from .api_calls import api_cases
from .cli_args import cli_cases
from .cross import cross_cases
from .fleets import fleet_cases
from .hardware import hardware_cases
from .kv_slo_pricing import kvdtype_cases, pricing_cases, slo_cases
from .layer_models import dsv4_cases, layer_cases
from .lora import lora_cases
from .markup import markup_cases
from .models import model_cases
from .mutations import broken_cases, override_cases
from .out_folders import out_cases
from .plan_args import plan_cases
from .scenarios import valid_cases
from .speculative import speculative_cases
from .sweep_files import sweep_cases
from .tiers import tier_cases
from .traces import trace_cases
from .yaml_abuse import yaml_cases

# ---------------------------------------------------------------------------------------------------

CATEGORIES: dict[str, st.SearchStrategy[Case]] = {
    "valid": valid_cases(), "broken": broken_cases(), "override": override_cases(), "cross": cross_cases(),
    "yaml": yaml_cases(), "trace": trace_cases(), "model": model_cases(), "hardware": hardware_cases(),
    "cli": cli_cases(), "out": out_cases(), "markup": markup_cases(),
    "plan": plan_cases(), "sweep": sweep_cases(), "api": api_cases(),
    "fleet": fleet_cases(), "tiers": tier_cases(), "layers": layer_cases(),
    "dsv4": dsv4_cases(), "kvdtype": kvdtype_cases(), "slo": slo_cases(), "pricing": pricing_cases(),
    "speculative": speculative_cases(),
    "lora": lora_cases(),
}
"""Every case strategy by category name (report.py draws from each)."""
