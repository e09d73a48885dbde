"""Multi-LoRA in a run (docs/lora.md), on hand-made cases: the adapter slots' KV capacity, vLLM's
distinct-adapter rule (a request whose adapter would be one too many waits, later ones go), adapter loads
from disk and host memory (seconds = bytes / bandwidth), the summary's lora section, the router."""

from __future__ import annotations

import pytest

from kvsim.engine.fleet.replica_view import ReplicaView
from kvsim.engine.fleet.router import build_router
from kvsim.engine.simulation import Simulation
from kvsim.kvcache.factory import build_kv_manager
from kvsim.lora.slots import AdapterSlots
from kvsim.metrics.summary import build_summary
from kvsim.scenario import KVConfig, load_scenario
from kvsim.workload.request import Request

BASE = ["model=llama-3.1-8b", "hardware=h100-sxm", "kv.block_size=16", "scheduler.max_num_seqs=8",
        "scheduler.max_num_batched_tokens=2048", "kv.check_invariants=true"]
LORA = "lora={max_loras: 1, adapters: [{name: a}, {name: b}]}"
# one rank-16 adapter of Llama-3.1-8B: 83,886,080 B (tests/lora/test_sizing.py); from disk at 7 GB/s then
# over the 64 GB/s host link (the h100-sxm profile): 0.011984 + 0.0013107 s
LOAD_S = 83_886_080 / 7e9 + 83_886_080 / 64e9


def run(*overrides, requests=None):
    sim = Simulation(load_scenario(None, [*BASE, *overrides]))
    if requests is not None:
        sim.build_requests = lambda: requests
    result = sim.run()
    return sim, result, build_summary(result.requests, result.timeline, result.meta)


def test_the_slots_take_their_bytes_from_the_kv_pool():
    plain = Simulation(load_scenario(None, BASE))
    lora = Simulation(load_scenario(None, [*BASE, "lora={max_loras: 3}"]))
    # 3 slots x 80 MiB = 240 MiB = 120 blocks of 16 tokens x 128 KiB
    assert plain.num_blocks - lora.num_blocks == 120
    assert lora.capacity.lora_bytes == 3 * 83_886_080
    assert "LoRA slots 240.0 MiB" in lora.capacity.describe()


def reqs():
    # all at t = 0: r0 (a), r1 (b), r2 (a); r3 the base model
    return [Request(0, 0.0, 100, 20, adapter=0), Request(1, 0.0, 100, 20, adapter=1),
            Request(2, 0.0, 100, 20, adapter=0), Request(3, 0.0, 100, 20)]


def test_a_request_whose_adapter_would_exceed_max_loras_waits_and_later_ones_go():
    sim, res, summary = run(LORA, requests=reqs())
    r = res.requests.set_index("rid")
    # r0, r2 (a) and r3 (base) start in the first iteration; r1 (b) is skipped until both a requests end
    assert r.loc[[0, 2, 3], "first_scheduled_s"].tolist() == [0.0, 0.0, 0.0]
    assert r.loc[1, "first_scheduled_s"] >= max(r.loc[0, "finish_s"], r.loc[2, "finish_s"])
    assert r.loc[1, "lora_skips"] > 0 and r.loc[[0, 2, 3], "lora_skips"].tolist() == [0, 0, 0]
    # found: r0 reads a from disk, r2 finds it in the slot, r1 reads b from disk (max_cpu_loras 1: a left)
    assert r["lora_found"].tolist() == [2, 2, 0, -1]
    assert r["lora_loads"].tolist() == [1, 1, 0, 0]
    assert r.loc[0, "lora_load_wait_s"] == pytest.approx(LOAD_S)
    assert r.loc[1, "lora_load_wait_s"] == pytest.approx(LOAD_S)
    tl = res.timeline
    assert tl["lora_load_s"].iloc[0] == pytest.approx(LOAD_S)  # the first iteration waited for a's load
    sec = summary["lora"]
    assert sec["found"] == {"gpu": 1, "host": 0, "disk": 2}
    assert sec["gpu_hit_rate"] == pytest.approx(1 / 3)
    assert sec["load_stall_s"] == pytest.approx(2 * LOAD_S)
    assert sec["loads"] == 2 and sec["load_bytes_per_gpu"] == 2 * 83_886_080
    assert sec["skipped_requests"] == 1
    assert sec["kv_capacity_lost"] == {"bytes_per_gpu": 83_886_080, "blocks": 40, "tokens": 640}
    # vLLM v1 punica: 32 layers x 4 modules x 3 kernels (buffer zero_, shrink, expand)
    assert summary["cost_model"]["lora"]["kernels_per_step"] == 384


def test_host_memory_keeps_an_adapter_its_slot_lost():
    # max_cpu_loras 2: after b took the one slot, a comes back from host memory over the link only
    _, res, summary = run("lora={max_loras: 1, max_cpu_loras: 2, adapters: [{name: a}, {name: b}]}",
                          requests=[Request(0, 0.0, 100, 4, adapter=0), Request(1, 1.0, 100, 4, adapter=1),
                                    Request(2, 2.0, 100, 4, adapter=0)])
    r = res.requests.set_index("rid")
    assert r["lora_found"].tolist() == [2, 2, 1]
    assert r.loc[2, "lora_load_wait_s"] == pytest.approx(83_886_080 / 64e9)
    assert summary["lora"]["host_hit_rate"] == pytest.approx(1 / 3)


def test_lora_costs_time_and_a_run_without_it_has_no_lora_columns():
    base = [Request(0, 0.0, 100, 20)]
    _, plain, s0 = run(requests=base)
    assert "adapter" not in plain.requests.columns and "lora" not in s0
    _, with_a, s1 = run(LORA, requests=[Request(0, 0.0, 100, 20, adapter=0)])
    # the load (13.3 ms) plus, every iteration, the LoRA kernels (v1: 384 x 2 us), the slot and activation
    # bytes (at least the kernels over its 20 iterations: the prefill one and 19 decodes)
    assert s1["latency"]["e2e_s"]["mean"] > s0["latency"]["e2e_s"]["mean"] + LOAD_S + 20 * 384 * 2e-6


def test_lora_affinity_prefers_the_replica_holding_the_adapter_and_changes_nothing():
    class Sched:
        def __init__(self, lora, waiting):
            self.kv = build_kv_manager(KVConfig(block_size=4), 8, 2, 4096, bytes_per_block=1e9)
            self.waiting, self.running, self.swapped, self.lora = [None] * waiting, [], [], lora

    a = AdapterSlots(1, 2, [1, 1], [1, 1], 1.0, 1.0)
    a.activate(0, 0, True)
    a.release(0)
    b = AdapterSlots(1, 2, [1, 1], [1, 1], 1.0, 1.0)
    views = [ReplicaView(0, "p", "mixed", Sched(a, 3)), ReplicaView(1, "p", "mixed", Sched(b, 0))]
    router = build_router("lora_affinity", seed=0)
    before = (list(a.gpu), list(a.host), a.totals(), list(b.gpu), b.totals())
    assert router.route(Request(5, 0.0, 10, 2, adapter=0), views) == 0  # a in its slot, despite its queue
    assert router.route(Request(6, 0.0, 10, 2, adapter=1), views) == 1  # nobody has it: least loaded
    assert router.route(Request(7, 0.0, 10, 2), views) == 1  # base model: least loaded
    assert (list(a.gpu), list(a.host), a.totals(), list(b.gpu), b.totals()) == before


def test_lora_affinity_passes_over_a_replica_whose_batch_is_full_of_other_adapters():
    class Sched:
        def __init__(self, lora, waiting):
            self.kv = build_kv_manager(KVConfig(block_size=4), 8, 2, 4096, bytes_per_block=1e9)
            self.waiting, self.running, self.swapped, self.lora = [None] * waiting, [], [], lora

    # replica 0: max_loras 1, adapter 1 running, adapter 0 still in host memory (it had the slot before);
    # replica 1: adapter 0 nowhere, nothing running, but a longer queue
    a = AdapterSlots(1, 2, [1, 1, 1], [1, 1, 1], 1.0, 1.0)
    a.activate(0, 0, True)
    a.release(0)
    a.activate(1, 1, True)
    b = AdapterSlots(1, 2, [1, 1, 1], [1, 1, 1], 1.0, 1.0)
    views = [ReplicaView(0, "p", "mixed", Sched(a, 0)), ReplicaView(1, "p", "mixed", Sched(b, 5))]
    assert views[0].lora_adapter(0) == 1 and not views[0].lora_admissible(0)
    assert views[0].lora_admissible(1) and views[0].lora_admissible(-1) and views[1].lora_admissible(0)
    router = build_router("lora_affinity", seed=0)
    before = (list(a.gpu), list(a.host), a.totals(), dict(a.active), b.totals())
    # adapter 0: in host memory on 0 but it would be skipped there (1 of 1 adapters running, not 0):
    # replica 1 (disk, admissible) wins despite its queue of 5
    assert router.route(Request(5, 0.0, 10, 2, adapter=0), views) == 1
    assert router.route(Request(6, 0.0, 10, 2, adapter=1), views) == 0  # 1 is running on 0: it joins
    # adapter 2 is nowhere: 0 is blocked (full of adapter 1), 1 is not
    assert router.route(Request(7, 0.0, 10, 2, adapter=2), views) == 1
    assert (list(a.gpu), list(a.host), a.totals(), dict(a.active), b.totals()) == before


def test_the_prefix_cache_is_shared_only_within_an_adapter():
    from kvsim.lora.adapters import adapter_table, tag_requests
    from kvsim.scenario import lora_config

    sim = Simulation(load_scenario(None, [*BASE, "kv.prefix_cache=hash",
                                          "lora={max_loras: 2, adapters: [{name: a}, {name: b}]}"]))
    # the same 64-token prompt (content 9) under a, then b, then a again, one at a time
    reqs = [Request(i, float(i), 64, 2, segments=((9, 64),), adapter_name=n) for i, n in enumerate("aba")]
    cfg = lora_config(sim.sc)
    sim.build_requests = lambda: tag_requests(reqs, cfg, adapter_table(cfg), 0)
    r = sim.run().requests.set_index("rid")
    # (64 - 1) // 16 = 3 full blocks may hit: b finds none of a's, the second a finds all three
    assert r["cached_tokens"].tolist() == [0, 0, 48]


@pytest.mark.parametrize("policy, era, kernels, k_s", [("vllm_v1", "v1", 384, 2e-6),
                                                       ("vllm_v0", "v0", 672, 1.1e-4)])
def test_the_punica_era_follows_the_scheduler_policy(policy, era, kernels, k_s):
    # Llama-3.1-8B: v1 32 x 12 kernels, v0 32 x 21; kernel_overhead_s defaults to the era's value
    # (kvsim/lora/config.py KERNEL_OVERHEAD_S), graph_kernel_overhead_s to 2 us; activation bytes at
    # rank 16, tp 1: 8,038,400 per adapter token (tests/lora/test_sizing.py)
    _, _, summary = run(LORA, f"scheduler.policy={policy}", requests=[Request(0, 0.0, 100, 4, adapter=0)])
    d = summary["cost_model"]["lora"]
    assert (d["punica_era"], d["kernels_per_step"], d["kernel_overhead_s"]) == (era, kernels, k_s)
    assert d["graph_kernel_overhead_s"] == 2e-6 and d["activation_bytes_per_token"] == 8_038_400
    _, _, s2 = run(LORA.replace("max_loras: 1,", "max_loras: 1, kernel_overhead_s: 5.0e-6,"),
                   f"scheduler.policy={policy}", requests=[Request(0, 0.0, 100, 4, adapter=0)])
    assert s2["cost_model"]["lora"]["kernel_overhead_s"] == 5e-6
