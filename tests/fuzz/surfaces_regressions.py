"""Fixed fuzz cases for issue 25 (plan, sweep, the Python API, fleets, tiers, layer-group models,
DeepSeek-V4, KV precision, SLO and pricing): the inputs the issue names and the bugs the new strategies
found, each under its surface's category (so the tally counts them there). `SURFACE_REGRESSIONS` maps a
short id to its case.

Cases the fix-residual branch settles (a decode pool with no prefill pool, tier capacities that cannot
hold one block) and the pd-tiers branch's (P/D pools with tiers) are expect="any" here: they must keep
the contract (a run or one error line), whatever those branches decide."""

from __future__ import annotations

import json

from cases import Case
from strategies.common import PASSWD_LINE, run_argv, small_scenario, to_yaml
from strategies.layer_models import DSV4, HF_HYBRIDS

SC = to_yaml(small_scenario(4))
SLO = ["--slo", "ttft_s.p99=2"]
PLAN_OK = to_yaml(small_scenario(600, workload__arrival={"rate": 2}))


def _plan(cid: str, *args: str, expect: str = "fail", files: dict | None = None, **kw) -> tuple[str, Case]:
    return cid, Case("plan", ["plan", "s.yaml", *args], {"s.yaml": SC, **(files or {})}, expect=expect,
                     why=cid, progress=True, **kw)


def _sweep(cid: str, doc: dict | str, *args: str, expect: str = "fail", **kw) -> tuple[str, Case]:
    text = doc if isinstance(doc, str) else to_yaml(doc)
    return cid, Case("sweep", ["sweep", "g.yaml", "--no-progress", "--out", "sw", *args],
                     {"s.yaml": to_yaml(small_scenario(3)), "g.yaml": text}, expect=expect, why=cid, **kw)


def _api(cid: str, call: str, expect: str = "fail", returns: str = "") -> tuple[str, Case]:
    return cid, Case("api", [], {"s.yaml": SC}, expect=expect, why=cid, call=f"result = {call}",
                     returns=returns)


def _run(category: str, cid: str, expect: str = "fail", argv: list[str] | None = None, files=None,
         **sections) -> tuple[str, Case]:
    sc = small_scenario(4)
    for key, value in sections.items():
        sc[key] = value
    return cid, Case(category, argv or run_argv("s.yaml", "--no-plots"),
                     {"s.yaml": to_yaml(sc), **(files or {})}, expect=expect, why=cid,
                     validate_first=argv is None,
                     outputs=("out/summary.json",) if expect == "pass" and argv is None else ())


_CASES: list[tuple[str, Case]] = [
    # ---- kvsim plan
    _plan("plan-precision-1e-17", "--find", "max_rate", *SLO, "--precision", "1e-17", "--out", "p"),
    _plan("plan-precision-nan", "--find", "max_rate", *SLO, "--precision", "nan", "--out", "p"),
    _plan("plan-repeats-1000", "--find", "max_rate", *SLO, "--repeats", "1000", "--out", "p"),
    _plan("plan-no-slo", "--find", "max_rate", "--out", "p"),
    _plan("plan-slo-twice-on-one-metric", "--find", "max_rate", *SLO, "--slo", "ttft_s.p50=1", "--out", "p"),
    _plan("plan-min-cost-without-candidates", "--find", "min_cost", *SLO, "--out", "p"),
    _plan("plan-min-cost-tp-0", "--find", "min_cost", *SLO, "--hardware", "h100-sxm", "--tp", "0", "--out",
          "p"),
    _plan("plan-max-rate-with-qps", "--find", "max_rate", *SLO, "--qps", "5", "--out", "p"),
    _plan("plan-max-rate-with-hardware", "--find", "max_rate", *SLO, "--hardware", "h200", "--out", "p"),
    _plan("plan-min-replicas-with-tp", "--find", "min_replicas", *SLO, "--tp", "2", "--out", "p"),
    _plan("plan-qps-1e300", "--find", "min_replicas", *SLO, "--qps", "1e300", "--out", "p"),
    _plan("plan-out-is-the-scenario", "--find", "max_rate", *SLO, "--out", "s.yaml"),
    _plan("plan-max-rate-of-a-trace", "--find", "max_rate", *SLO, "--out", "p", "--set",
          "workload.kind=trace",
          "--set", "workload.trace={path: t.jsonl, format: mooncake}",
          files={"t.jsonl": json.dumps({"timestamp": 0, "input_length": 600, "output_length": 4,
                                        "hash_ids": [0, 1]}) + "\n"}),
    ("plan-min-replicas-answer",
     Case("plan",
          ["plan", "s.yaml", "--find", "min_replicas", "--slo", "e2e_s.p50=30", "--max-extension", "2",
           "--out", "p"], {"s.yaml": PLAN_OK}, expect="pass", why="plan-min-replicas-answer", progress=True,
           outputs=("p/plan.json", "p/report.html"))),
    ("plan-min-cost-answer",
     Case("plan",
          ["plan", "s.yaml", "--find", "min_cost", "--slo", "e2e_s.p50=30", "--hardware",
           "h100-sxm,a100-80gb", "--tp", "1", "--qps", "2", "--max-extension", "2", "--out", "p"],
           {"s.yaml": PLAN_OK}, expect="pass", why="plan-min-cost-answer", progress=True,
           outputs=("p/plan.json",))),
    # ---- kvsim sweep
    _sweep("sweep-grid-1e14", {"scenario": "s.yaml", "grid": {f"k{i}": list(range(10)) for i in range(14)}}),
    _sweep("sweep-grid-100001", {"scenario": "s.yaml", "grid": {"simulation.seed": list(range(100_001))}}),
    _sweep("sweep-huge-grid-bad-backend",
           {"scenario": "s.yaml", "grid": {"simulation.seed": list(range(20_000))}},
           "--backend", "nope"),
    _sweep("sweep-seed-grid-and-repeats",
           {"scenario": "s.yaml", "grid": {"simulation.seed": [0, 1]}, "repeats": 2}),
    _sweep("sweep-identical-points",
           {"scenario": "s.yaml", "points": [{"kv.block_size": 16}, {"kv.block_size": 16}]}),
    _sweep("sweep-point-key-in-grid",
           {"scenario": "s.yaml", "grid": {"kv.block_size": [16]}, "points": [{"kv.block_size": 0}]}),
    _sweep("sweep-address-without-ray", {"scenario": "s.yaml"}, "--address", "127.0.0.1:6379"),
    _sweep("sweep-ray-nothing-listening", {"scenario": "s.yaml"}, "--backend", "ray", "--address",
           "127.0.0.1:1"),
    # (the "N runs: ..." line comes first: Ray is asked once the runs are counted)
    _sweep("sweep-ray-auto-without-a-cluster", {"scenario": "s.yaml"}, "--backend", "ray", "--address",
           "auto", progress=True),
    _sweep("sweep-repeats-true", {"scenario": "s.yaml", "repeats": True}),
    _sweep("sweep-mapping-axis",
           {"scenario": "s.yaml", "grid": {"slo": [{"ttft_s": {"p99": 2}}, {"e2e_s": {"p50": 9}}]},
            "repeats": 2}, expect="pass", outputs=("sw/sweep.parquet", "sw/sweep.json")),
    ("sweep-rerun-skips-its-rows",
     Case("sweep", ["sweep", "g.yaml", "--no-progress", "--out", "sw"],
          {"s.yaml": to_yaml(small_scenario(3)),
           "g.yaml": to_yaml({"scenario": "s.yaml", "grid": {"kv.block_size": [16, 32]}})}, expect="pass",
           why="sweep-rerun-skips-its-rows", setup=[["sweep", "g.yaml", "--no-progress", "--out", "sw"]],
           outputs=("sw/sweep.parquet",))),
    # (refused on main; the fix-residual branch resumes and keeps the file: either way it stays unchanged)
    ("sweep-out-with-a-user-file",
     Case("sweep", ["sweep", "g.yaml", "--no-progress", "--out", "sw"],
          {"s.yaml": to_yaml(small_scenario(3)), "g.yaml": to_yaml({"scenario": "s.yaml"})}, expect="any",
          why="sweep-out-with-a-user-file", setup=[["sweep", "g.yaml", "--no-progress", "--out", "sw"]],
          after_setup={"sw/notes.md": "mine\n"})),
    # ---- the Python API
    _api("api-run-123", "kvsim.run(123)"),
    _api("api-overrides-str", "kvsim.run('s.yaml', overrides='x')"),
    _api("api-overrides-int-key", "kvsim.load('s.yaml', overrides={1: 2})"),
    _api("api-deep-dict", "d = {}\nfor _ in range(10_000):\n    d = {'x': d}\nresult = kvsim.run(d)"),
    _api("api-compare-none-value", "kvsim.compare('s.yaml', {'kv.block_size': None})"),
    _api("api-compare-string-value", "kvsim.compare('s.yaml', {'kv.block_size': '16'})"),
    _api("api-compare-object-value", "kvsim.compare('s.yaml', {'kv.block_size': [object()]})"),
    _api("api-compare-a-dict-scenario", "kvsim.compare({'kv': {}}, {'kv.block_size': [16]})"),
    _api("api-compare-jobs-string", "kvsim.compare('s.yaml', {'kv.block_size': [16]}, jobs='2')"),
    _api("api-compare-comma-value", "kvsim.compare('s.yaml', {'name': ['a,b', 'c']})\n"
         "assert list(result['name']) == ['a,b', 'c'], list(result['name'])", expect="pass",
         returns="DataFrame"),
    _api("api-sweep-int", "kvsim.sweep(5)"),
    _api("api-sweep-jobs-0", "kvsim.sweep({'scenario': 's.yaml'}, jobs=0)"),
    _api("api-sweep-address-without-ray", "kvsim.sweep({'scenario': 's.yaml'}, address='127.0.0.1:6379')"),
    _api("api-plan-min-cost-tps-0",
         "kvsim.plan('s.yaml', 'min_cost', {'ttft_s': {'p99': 2}}, hardware=['h200'], "
         "tps=[0])"),
    _api("api-plan-precision-1e-17",
         "kvsim.plan('s.yaml', 'max_rate', {'ttft_s': {'p99': 2}}, precision=1e-17)"),
    _api("api-plan-overrides-str", "kvsim.plan('s.yaml', 'max_rate', {'ttft_s': {'p99': 2}}, overrides='x')"),
    _api("api-plan-find-list", "kvsim.plan('s.yaml', ['max_rate'], {'ttft_s': {'p99': 2}})"),
    _api("api-plan-max-extension-str", "kvsim.plan('s.yaml', 'max_rate', {'ttft_s': {'p99': 2}}, "
         "max_extension='2')"),
    _api("api-plan-qps-str", "kvsim.plan('s.yaml', 'min_replicas', {'ttft_s': {'p99': 2}}, qps='x')"),
    _api("api-kvsim-error-importable", "__import__('kvsim').KvsimError\nfrom kvsim import KvsimError\n"
         "result = KvsimError('x')", expect="pass", returns="KvsimError"),
    _api("api-run-a-scenario-object", "kvsim.run(kvsim.load('s.yaml'), kv__block_size=32)", expect="pass",
         returns="Result"),
    # ---- fleets
    _run("fleet", "fleet-decode-pool-only", "any", cluster={"pools": [{"role": "decode"}]}),
    _run("fleet", "fleet-pd-transfer-1e-300",
         cluster={"pools": [{"role": "prefill"}, {"role": "decode"}],
                  "kv_transfer": {"bandwidth_gbps": 1e-300}}),
    _run("fleet", "fleet-pd-nvlink-layerwise", "pass",
         cluster={"pools": [{"role": "prefill"}, {"role": "decode", "data_parallel_size": 2}],
                  "kv_transfer": {"mode": "layerwise", "link": "nvlink", "latency_s": 0.001}},
         router={"policy": "least_loaded", "decode_policy": "power_of_two"}),
    _run("fleet", "fleet-pd-with-tiers", "any", cluster={"pools": [{"role": "prefill"}, {"role": "decode"}]},
         kv={"prefix_cache": "hash", "tiers": [{"medium": "cpu", "capacity_gb": 1}]}),
    _run("fleet", "fleet-two-profiles-shared-store", "pass",
         cluster={"pools": [{"hardware": "h100-sxm"}, {"hardware": "h200"}]},
         kv={"prefix_cache": "hash",
             "tiers": [{"medium": "remote", "capacity_gb": 10, "bandwidth_gbps": 25, "shared": True}]},
             router={"policy": "store_aware"}),
    _run("fleet", "fleet-pd-and-mixed",
         cluster={"pools": [{"role": "prefill"}, {"role": "decode"}, {"role": "mixed"}]}),
    # ---- KV tiers
    _run("tiers", "tiers-cpu-bandwidth-1-mb-per-s", "pass",
         kv={"prefix_cache": "hash",
             "tiers": [{"medium": "cpu", "capacity_gb": 1, "bandwidth_gbps": 0.001, "latency_s": 0.5}]}),
    _run("tiers", "tiers-ssd-bandwidth-1e-300", kv={"prefix_cache": "hash", "tiers": [
        {"medium": "ssd", "capacity_gb": 1, "bandwidth_gbps": 1e-300}]}),
    _run("tiers", "tiers-capacity-below-one-block", "any", kv={"prefix_cache": "hash", "tiers": [
        {"medium": "cpu", "capacity_gb": 1e-9}]}),
    _run("tiers", "tiers-upside-down", kv={"prefix_cache": "hash", "tiers": [
        {"medium": "ssd", "capacity_gb": 1}, {"medium": "cpu", "capacity_gb": 1}]}),
    _run("tiers", "tiers-without-hash-cache", kv={"tiers": [{"medium": "cpu", "capacity_gb": 1}]}),
    _run("tiers", "tiers-every-key", "pass", kv={
        "prefix_cache": "hash", "block_size": 16, "tier_placement": "inclusive",
        "tier_store": "write_through",
        "tier_load": "pipelined", "tier_chunk_tokens": 32, "tier_store_min_uses": 2, "tiers": [
            {"medium": "cpu", "capacity_gb": 1, "eviction": "arc", "bandwidth_gbps": 10, "latency_s": 1e-4},
            {"medium": "ssd", "capacity_gb": 2, "eviction": "s3fifo", "bandwidth_gbps": 5, "latency_s": 1e-3},
            {"medium": "remote", "capacity_gb": 4, "eviction": "lfu", "bandwidth_gbps": 1, "latency_s": 0.01,
             "shared": False}]}),
    # ---- layer-group models
    _run("layers", "layers-all-none",
         model={"name": "t", "num_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
                "num_kv_heads": 2, "num_params": 1e8, "layer_types": ["none", "none"]}),
    _run("layers", "layers-hf-all-mlp", argv=["validate", "s.yaml"], model="config.json", files={
        "config.json": json.dumps({**HF_HYBRIDS["nemotron_h"], "hybrid_override_pattern": "------"})}),
    _run("layers", "layers-mamba-only", "any", model="config.json", files={  # state layers alone: no KV pages
        "config.json": json.dumps({**HF_HYBRIDS["nemotron_h"], "hybrid_override_pattern": "MMMMMM"})}),
    _run("layers", "layers-nemotron-hash-cache", model="nemotron-h-8b", hardware="h200",
         kv={"prefix_cache": "hash"}),
    _run("layers", "layers-mistral-disable-hybrid", "pass", model="mistral-7b", hardware="h200",
         kv={"disable_hybrid_kv_cache_manager": True, "prefix_cache": "hash"}),
    # ---- DeepSeek-V4
    _run("dsv4", "dsv4-flash-tp2-h200", "pass", model="deepseek-v4-flash", hardware="h200",
         parallelism={"tensor_parallel_size": 2}, kv={"dtype": {"rope": "bf16", "rest": "fp8"}}),
    _run("dsv4", "dsv4-flash-tp1-does-not-fit", model="deepseek-v4-flash", hardware="h200"),
    _run("dsv4", "dsv4-config-hash-cache", model="config.json", kv={"prefix_cache": "hash"},
         files={"config.json": json.dumps(DSV4)}),
    _run("dsv4", "dsv4-ratios-short", argv=["footprint", "config.json", "--tokens", "100"],
         files={"config.json": json.dumps({**DSV4, "compress_ratios": [0, 4]})}),
    # ---- KV precision
    ("kvdtype-hitrate-mapping",
     Case("kvdtype",
          ["hitrate", "t.jsonl", "--model", "llama-3-8b", "--kv-dtype", "{bits: 4}", "--unit", "gib",
           "--capacities", "1", "--out", "h"],
           {"t.jsonl": json.dumps({"timestamp": 0, "input_length": 600, "output_length": 4,
                                   "hash_ids": [0, 1]}) + "\n"}, expect="pass",
                                   why="kvdtype-hitrate-mapping", outputs=("h/hitrate.csv",))),
    _run("kvdtype", "kvdtype-footprint-per-part", "pass",
         argv=["footprint", "deepseek-v2-lite", "--tokens", "100", "--kv-dtype",
               "{rope: bf16, rest: {bits: 6}}"]),
    _run("kvdtype", "kvdtype-group-without-scale", kv={"dtype": {"bits": 4, "group_size": 32}}),
    _run("kvdtype", "kvdtype-quantization-int4", quantization="int4"),
    # ---- SLO and pricing
    _run("slo", "slo-flag-twice", argv=run_argv("s.yaml", "--slo", "ttft_s.p99=2", "--slo", "ttft_s.p50=1")),
    _run("slo", "slo-every-request-refused", "pass", slo={"ttft_s": {"p99": 2}},
         scheduler={"max_model_len": 16}),
    _run("slo", "slo-p100-and-p0.1", "pass", slo={"ttft_s": {"p100": 5}, "e2e_s": {"p0.1": 100}}),
    _run("pricing", "pricing-typo", pricing={"usd_per_gpu_hour": {"h100-sx": 2.5}}),
    _run("pricing", "pricing-by-profile-pools", "pass",
         pricing={"usd_per_gpu_hour": {"h100-sxm": 2, "h200": 3}},
         cluster={"pools": [{"hardware": "h100-sxm"}, {"hardware": "h200"}]}),
    _run("pricing", "pricing-unknown-key", pricing={"usd_per_gpu_hour": 2, "usd_per_hour": 50}),
]
SURFACE_REGRESSIONS: dict[str, Case] = dict(_CASES)
assert len(SURFACE_REGRESSIONS) == len(_CASES), "duplicate case ids"
for _case in SURFACE_REGRESSIONS.values():
    _case.forbid = (*_case.forbid, PASSWD_LINE)
