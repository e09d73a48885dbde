"""The fleet in a run (docs/fleet.md): routing of every request, disaggregated prefill / decode with a
timed KV transfer (hand-checked bytes and times, admission only after arrival, NICs never over their
bandwidth), a shared store across replicas, heterogeneous pools, and the one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.metrics.summary import build_summary
from kvsim.scenario import load_scenario
from kvsim.workload.request import Request

PD = "cluster={pools: [{role: prefill, data_parallel_size: %d}, {role: decode, data_parallel_size: %d}]%s}"


def sim(*overrides: str, requests: list[Request] | None = None) -> Simulation:
    s = Simulation(load_scenario(None, list(overrides)))
    if requests is not None:
        s.build_requests = lambda: [Request(r.rid, r.arrival_s, r.prompt_len, r.output_len,
                                            segments=r.segments, session=r.session) for r in requests]
    return s


def chat(*overrides: str):
    s = sim("workload.kind=chat", "simulation.requests=150", "workload.arrival.rate=20",
            "kv.check_invariants=true", *overrides)
    return s, s.run()


def test_one_request_hand_off_by_hand():
    # Llama-3-8B bf16: 131,072 B of KV per token; a 1,601-token prompt moves 1,600 tokens' KV
    s = sim(PD % (1, 1, ", kv_transfer: {bandwidth_gbps: 10, latency_s: 0.001}"), "kv.check_invariants=true",
            requests=[Request(0, 0.0, 1601, 5)])
    r = s.run().requests.iloc[0]
    nbytes = 1600 * 131_072
    assert r["kv_transfer_bytes"] == nbytes
    assert r["prefill_replica"] == 0 and r["replica"] == 1
    # the decode replica is idle: it admits at once, pulls over idle NICs: latency + bytes / bandwidth
    assert r["decode_admit_s"] == pytest.approx(r["prefill_done_s"])
    assert r["kv_arrival_s"] - r["decode_admit_s"] == pytest.approx(0.001 + nbytes / 10e9)
    assert r["kv_transfer_s"] == pytest.approx(0.001 + nbytes / 10e9)
    # the first token comes from the decode replica's first step after the KV arrived
    assert r["first_token_s"] > r["kv_arrival_s"]
    assert r["finish_s"] > r["first_token_s"]


def test_layerwise_overlaps_the_transfer_with_the_last_prefill_iteration():
    reqs = [Request(0, 0.0, 1601, 5)]
    after = sim(PD % (1, 1, ", kv_transfer: {bandwidth_gbps: 10}"), requests=reqs).run().requests.iloc[0]
    layer = sim(PD % (1, 1, ", kv_transfer: {bandwidth_gbps: 10, mode: layerwise}"),
                requests=reqs).run().requests.iloc[0]
    nbytes = 1600 * 131_072
    # one prefill iteration: the stream starts with it; it ends no earlier than the last layer's share
    start = 0.0
    assert layer["kv_arrival_s"] == pytest.approx(max(start + 1e-5 + nbytes / 10e9,
                                                      layer["prefill_done_s"] + 1e-5 + nbytes / 32 / 10e9))
    assert layer["kv_transfer_s"] < after["kv_transfer_s"]
    assert layer["first_token_s"] < after["first_token_s"]


@pytest.mark.parametrize("mode", ["after_prefill", "layerwise"])
def test_pd_every_request_finishes_once_and_never_decodes_before_its_kv(mode):
    s, res = chat(PD % (1, 2, f", kv_transfer: {{mode: {mode}, bandwidth_gbps: 5}}"))
    q = res.requests
    assert len(q) == s.total_requests and q["rid"].is_unique
    assert q["finish_s"].notna().all()
    moved = q[q["prefill_replica"] >= 0]
    assert (moved["output_len"] > 1).all() and len(moved) == (q["output_len"] > 1).sum()
    assert set(moved["prefill_replica"]) == {0} and set(moved["replica"]) <= {1, 2}
    assert (moved["decode_admit_s"] >= moved["prefill_done_s"]).all()
    assert (moved["first_token_s"] > moved["kv_arrival_s"]).all()
    # the decode-replica iteration that gave the first token started once the KV was there
    tl = res.timeline
    steps = tl[tl["iteration"] >= 0].assign(end=lambda d: d["t_s"] + d["dt_s"])
    for _, r in moved.iterrows():
        step = steps[(steps["replica"] == r["replica"]) & (abs(steps["end"] - r["first_token_s"]) < 1e-9)]
        assert len(step) == 1 and step["t_s"].iloc[0] >= r["kv_arrival_s"] - 1e-12
    if mode == "after_prefill":
        assert (moved["kv_arrival_s"] > moved["decode_admit_s"]).all()


def test_transfers_never_exceed_a_nic_bandwidth():
    s, res = chat(PD % (2, 2, ", kv_transfer: {bandwidth_gbps: 2, latency_s: 0}"))
    q = res.requests
    moved = q[q["prefill_replica"] >= 0].copy()
    moved["start"] = moved["kv_arrival_s"] - moved["kv_transfer_bytes"] / 2e9
    for col in ("prefill_replica", "replica"):  # the sender's NIC and the receiver's
        for _, rows in moved.groupby(col):
            rows = rows.sort_values("start")
            # FCFS at full bandwidth: one transfer at a time on each NIC, so the intervals never overlap
            starts, ends = rows["start"].to_numpy(), rows["kv_arrival_s"].to_numpy()
            assert (starts[1:] >= ends[:-1] - 1e-9).all()
    meta = res.meta["fleet"]["kv_transfer"]
    assert meta["transfers"] == len(moved)
    assert meta["bytes"] == pytest.approx(moved["kv_transfer_bytes"].sum())


def test_a_one_token_request_ends_on_the_prefill_replica():
    res = sim(PD % (1, 1, ""), requests=[Request(0, 0.0, 100, 1)]).run()
    r = res.requests.iloc[0]
    assert r["replica"] == 0 and r["prefill_replica"] == -1 and r["kv_transfer_bytes"] == 0


def test_follow_ups_are_routed_and_affinity_keeps_sessions():
    s, res = chat("parallelism.replicas=4", "router.policy=session_affinity")
    reqs = {r.rid: r for r in s.build_requests()}
    q = res.requests
    q["session"] = [reqs[r].session for r in q["rid"]]
    assert (q.groupby("session")["replica"].nunique() == 1).all()
    s2, rr = chat("parallelism.replicas=4")
    rr = rr.requests
    rr["session"] = [reqs[r].session for r in rr["rid"]]
    assert (rr.groupby("session")["replica"].nunique() > 1).any()  # round robin splits sessions
    assert res.meta["fleet"]["router"] == "session_affinity"
    assert sum(x["routed"] for x in res.meta["fleet"]["replicas"]) == len(q)


def test_prefix_aware_beats_round_robin_on_hits():
    hits = {}
    for policy in ("round_robin", "prefix_aware"):
        _, res = chat("parallelism.replicas=4", "kv.prefix_cache=hash", f"router.policy={policy}")
        q = res.requests
        hits[policy] = q["cached_tokens"].sum() / q["prompt_len"].sum()
    assert hits["prefix_aware"] > hits["round_robin"]


def test_a_shared_store_serves_another_replica_prefill():
    tiers = "kv.tiers=[{medium: remote, capacity_gb: 10, bandwidth_gbps: 10, shared: %s}]"
    reqs = [Request(0, 0.0, 161, 2, segments=((7, 161),)), Request(1, 1.0, 161, 2, segments=((7, 161),))]
    got = {}
    for shared in ("true", "false"):
        res = sim("parallelism.replicas=2", "kv.prefix_cache=hash", "kv.tier_store=write_through",
                  tiers % shared, "kv.check_invariants=true", requests=reqs).run()
        r = res.requests.set_index("rid")
        assert list(r["replica"]) == [0, 1]
        got[shared] = int(r.loc[1, "hit_tokens_remote"])
        assert list(r["loaded_tokens_remote"]) == [0, got[shared]]
        remote = build_summary(res.requests, res.timeline, res.meta)["tiers"]["per_tier"]["remote"]
        assert remote["loaded_tokens"] == got[shared] == remote["loads"] * 16  # the store counted once
        assert res.meta["tiers"]["tiers"]["remote"]["stores"] == (10 if shared == "true" else 20)
    # 161 tokens: (161 - 1) // 16 = 10 blocks the second replica finds in the store, none in its own
    assert got == {"true": 160, "false": 0}


def test_heterogeneous_pools():
    s, res = chat("cluster={pools: [{name: big, hardware: h200, data_parallel_size: 1}, "
                  "{name: small, hardware: h100-sxm, tensor_parallel_size: 2, data_parallel_size: 2}]}",
                  "router.policy=least_loaded")
    fleet = res.meta["fleet"]
    assert [p["name"] for p in fleet["pools"]] == ["big", "small"]
    assert [x["pool"] for x in fleet["replicas"]] == ["big", "small", "small"]
    assert fleet["pools"][0]["capacity_blocks"] != fleet["pools"][1]["capacity_blocks"]
    assert set(res.requests["replica"]) == {0, 1, 2}
    assert res.meta["replicas"] == 3


@pytest.mark.parametrize(("overrides", "message"), [
    (["parallelism.replicas=2", "cluster={pools: [{}]}"], "parallelism.replicas: with cluster:"),
    (["cluster={pools: [{role: prefill}, {role: mixed}]}"], "cluster.pools.1.role: mixed replicas"),
    (["cluster={pools: [{role: decode}]}"], "cluster.pools.0.role: decode pool 'pool0' has no prefill pool "
                                             "feeding it (disaggregated serving needs a pool of role prefill "
                                             "too; role mixed prefills and decodes on one replica)"),
    (["cluster={pools: [{name: d1, role: decode}, {name: d2, role: decode}]}"],
     "cluster.pools.0.role: decode pool 'd1' has no prefill pool feeding it"),
    (["cluster={pools: [{name: p, role: prefill, data_parallel_size: 3}]}"],
     "cluster.pools.0.role: prefill pool 'p' has no decode pool to hand its KV to (disaggregated serving "
     "needs a pool of role decode too"),
    (["cluster={pools: [{name: a}, {name: b, kv: {tiers: [{medium: cpu, capacity_gb: 0.001}]}}]}",
      "kv.prefix_cache=hash", "kv.tiers=[{medium: cpu, capacity_gb: 1}]"],
     "cluster.pools.1.kv.tiers.0.capacity_gb: 0.001 GB holds no KV block of 2.10 MB (pool 'b')"),
    (["cluster={pools: [{name: a}, {name: b, kv: {gpu_memory_utilization: 0.01}}]}"],
     "cluster.pools.1 ('b'): llama-3-8b weights (16.1 GB per GPU) exceed the 0.8 GB budget"),
    (["cluster={pools: [{name: a}, {name: a}]}"], "cluster.pools.1.name: 'a' names two pools"),
    (["cluster={pools: [{kv: {block_size: 0}}]}"], "cluster.pools.0.kv.block_size: Input should be"),
    (["cluster={pools: [{kv: {gpu_memory_utilisation: 1}}]}"], "cluster.pools.0.kv.gpu_memory_utilisation: "
                                                              "unknown key"),
    (["router.policy=nearest"], "router.policy: Input should be"),
    ([PD % (1, 1, ""), "kv.sparsity.policy=h2o"],
     "cluster.pools.0.kv.sparsity.policy: token-level policies are not modelled with disaggregated"),
    ([PD % (1, 1, ""), "workload.n=2"], "workload.n: parallel sampling"),
    (["cluster={pools: [{kv: {tiers: [{medium: cpu, capacity_gb: 1}]}}, {}]}", "kv.prefix_cache=hash"],
     "cluster.pools.1.kv.tiers: every pool has the same tier media"),
])
def test_bad_fleets_are_one_line_errors(overrides, message):
    with pytest.raises(KvsimError) as err:
        Simulation(load_scenario(None, overrides))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_prompt_the_decode_replica_holds_moves_nothing_and_frees_the_prefill_copy():
    # five equal prompts: from the second on, the decode replica's cache has the prompt's blocks
    reqs = [Request(i, float(i), 161, 4, segments=((7, 161),)) for i in range(5)]
    s = sim(PD % (1, 1, ""), "kv.prefix_cache=hash", "kv.check_invariants=true", requests=reqs)
    q = s.run().requests.set_index("rid")
    assert q["finish_s"].notna().all()
    # 160 tokens: all ten full blocks cached there, nothing to move, the prefill replica holds nothing
    assert list(q["kv_transfer_bytes"]) == [160 * 131_072] + [0.0] * 4
    assert not s.replicas[0].sched.handoff.held and s.replicas[0].sched.kv.used_blocks == 0


def test_a_decode_replica_load_from_its_cpu_tier_is_credited_to_the_request():
    # the decode replica holds 11 blocks: A's 161-token prompt fills them; B's (other content) evicts A's
    # 10 cached blocks to its cpu tier; C repeats A: the prefill replica (a large pool) hits its 10 blocks on
    # its GPU, the decode replica loads them from its cpu tier, so nothing moves over the NICs
    reqs = [Request(0, 0.0, 161, 2, segments=((7, 161),)), Request(1, 1.0, 161, 2, segments=((8, 161),)),
            Request(2, 2.0, 161, 2, segments=((7, 161),))]
    s = sim("cluster={pools: [{role: prefill}, {role: decode, kv: {num_gpu_blocks_override: 11}}]}",
            "kv.prefix_cache=hash", "kv.tiers=[{medium: cpu, capacity_gb: 1}]", "kv.check_invariants=true",
            requests=reqs)
    res = s.run()
    q = res.requests.set_index("rid")
    assert list(q["kv_transfer_bytes"]) == [160 * 131_072, 160 * 131_072, 0.0]
    # the prefill replica's first admission: the hit columns (they add up to cached_tokens)
    assert (list(q["hit_tokens_gpu"]), list(q["hit_tokens_cpu"])) == ([0, 0, 160], [0, 0, 0])
    # every block loaded from a tier, on whichever replica: 10 blocks x 16 tokens for C
    assert list(q["loaded_tokens_cpu"]) == [0, 0, 160]
    # over the decode replica's idle host link
    assert q.loc[2, "load_wait_s"] == pytest.approx(160 * 131_072 / s.hw.host_link_bandwidth)
    cpu = build_summary(res.requests, res.timeline, res.meta)["tiers"]["per_tier"]["cpu"]
    assert (cpu["loads"], cpu["loaded_tokens"]) == (10, 160)


def test_blocks_on_their_way_are_hit_by_nobody():
    # B (same prompt, 50 ms later) must not hit A's blocks on the decode replica while A's KV is in flight
    reqs = [Request(0, 0.0, 3201, 4, segments=((7, 3201),)), Request(1, 0.05, 3201, 4, segments=((7, 3201),))]
    s = sim(PD % (1, 1, ", kv_transfer: {bandwidth_gbps: 0.2}"), "kv.prefix_cache=hash", requests=reqs)
    q = s.run().requests.set_index("rid")
    assert (q["first_token_s"] > q["kv_arrival_s"]).all()
    assert q.loc[1, "kv_transfer_bytes"] == 3200 * 131_072  # it moved its own KV: nothing to hit yet


def test_a_request_waiting_for_its_kv_is_not_preempted():
    s, res = chat("cluster={pools: [{role: prefill, data_parallel_size: 2}, "
                  "{role: decode, data_parallel_size: 2, kv: {num_gpu_blocks_override: 700}}], "
                  "kv_transfer: {bandwidth_gbps: 0.5}}",
                  "workload.kind=synthetic", "workload.arrival.rate=50",
                  "workload.prompt_len={dist: lognormal, mean: 1500, p50: 1000, max: 6000}")
    q = res.requests
    moved = q[q["prefill_replica"] >= 0]
    assert q["preemptions"].sum() > 0  # the decode pool is tight
    assert (moved["first_token_s"] > moved["kv_arrival_s"]).all()


def test_each_pool_caps_outputs_by_its_own_max_model_len():
    reqs = [Request(i, i * 0.01, 500, 2000) for i in range(4)]
    res = sim("cluster={pools: [{name: big, scheduler: {max_model_len: 4096}}, "
              "{name: small, scheduler: {max_model_len: 1024}}]}", requests=reqs).run()
    q = res.requests.set_index("rid")
    assert [int(q.loc[i, "output_len"]) for i in range(4)] == [2000, 524, 2000, 524]


def test_layerwise_moves_what_the_decode_replica_lacks():
    reqs = [Request(i, float(i), 1601, 4, segments=((7, 1200), (100 + i, 401))) for i in range(3)]
    res = sim(PD % (1, 1, ", kv_transfer: {mode: layerwise}"), "kv.prefix_cache=hash", requests=reqs).run()
    # the first moves 1,600 tokens; the next find the 1,200-token prefix (75 blocks) there: 400 tokens
    assert list(res.requests["kv_transfer_bytes"]) == [1600 * 131_072, 400 * 131_072, 400 * 131_072]


def test_a_pool_without_the_link_figure_fails_at_construction(tmp_path):
    hw = tmp_path / "nonet.yaml"
    hw.write_text("memory_gb: 80\nhbm_bandwidth: 3.35 TB/s\npeak_flops: {bf16: 989 TFLOPS}\n"
                  "host_link_bandwidth: 64 GB/s\nhost_dram_bytes: 256 GiB\nssd_bytes: 3.84 TB\n"
                  "ssd_bandwidth: 7 GB/s\ninterconnect_bandwidth: 450 GB/s\n")
    with pytest.raises(KvsimError, match="has no network_bandwidth; give the link's GB/s"):
        Simulation(load_scenario(None, [f"hardware={hw}", PD % (1, 1, "")]))


def test_replicas_named_twice_is_an_error():
    with pytest.raises(KvsimError, match="give replicas or data_parallel_size"):
        load_scenario(None, ["parallelism={replicas: 2, data_parallel_size: 2}"])


def test_a_preemption_in_an_iteration_that_runs_nothing_is_in_the_next_timeline_row():
    """A prefill replica whose blocks are held for hand-offs preempts the prompt it was growing and then
    has nothing to run: that preemption was in no timeline row (timeline 0, requests.parquet 1 here;
    4 vs 11 on the stress check's seed 142, which found it). Now it is in the replica's next row."""
    import kvsim

    trace = Path(__file__).parents[3] / "workloads" / "traces" / "mooncake" / "conversation_trace.jsonl"
    sc = {"model": "llama-3.1-8b", "hardware": "h100-sxm",
          "kv": {"block_size": 32, "prefix_cache": "hash", "num_gpu_blocks_override": 600},
          "scheduler": {"policy": "sarathi"},
          "workload": {"kind": "trace",
                       "output_len": {"dist": "lognormal", "mean": 4, "p50": 2.32, "max": 16},
                       "trace": {"path": str(trace), "format": "mooncake", "limit": 10, "time_scale": 0.79}},
          "simulation": {"seed": 142, "requests": 10},
          "cluster": {"pools": [{"name": "p", "role": "prefill"},
                                {"name": "d", "role": "decode", "data_parallel_size": 2}],
                      "kv_transfer": {"mode": "layerwise"}},
          "router": {"decode_policy": "least_loaded"}}
    res = kvsim.run(sc)
    assert int(res.requests["preemptions"].sum()) == 1
    assert int(res.timeline["preempted"].sum()) == res.summary["preemptions"] == 1
