"""KV tiers in a run (docs/tiers.md), on a hand-made case: a prompt evicted from a tiny GPU cache is found on
the CPU tier, loaded over the host link (the wait = bytes / bandwidth), counted by source; blocking loads
delay only the request, pipelined ones the iteration; bad tier settings are one-line errors."""

from __future__ import annotations

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.metrics.summary import build_summary
from kvsim.scenario import load_scenario
from kvsim.workload.request import Request

BASE = ["model=llama-3-8b", "hardware=h100-sxm", "kv.block_size=16", "kv.num_gpu_blocks_override=8",
        "kv.prefix_cache=hash", "scheduler.max_num_batched_tokens=512", "scheduler.max_num_seqs=8"]


def run(*overrides: str):
    sim = Simulation(load_scenario(None, [*BASE, *overrides]))
    # A (64 tokens of content 7), then B (112 tokens of content 8) takes the whole pool and evicts A's
    # cached blocks, then C repeats A's prompt
    sim.build_requests = lambda: [
        Request(0, 0.0, 64, 2, segments=((7, 64),)),
        Request(1, 1.0, 112, 2, segments=((8, 112),)),
        Request(2, 2.0, 64, 2, segments=((7, 64),)),
    ]
    result = sim.run()
    return sim, result, build_summary(result.requests, result.timeline, result.meta)


def test_an_evicted_prompt_is_found_on_the_cpu_tier():
    sim, result, summary = run("kv.tiers=[{medium: cpu, capacity_gb: 1}]", "kv.check_invariants=true")
    r = result.requests.set_index("rid")
    # C may hit (64 - 1) // 16 = 3 blocks; the GPU cache lost them to B, the CPU tier has them
    assert (int(r.loc[2, "hit_tokens_gpu"]), int(r.loc[2, "hit_tokens_cpu"])) == (0, 48)
    # 48 tokens x 131,072 B (Llama-3-8B, bf16) over the idle host link
    expected = 48 * 131_072 / sim.hw.host_link_bandwidth
    assert r.loc[2, "load_wait_s"] == pytest.approx(expected)
    hits = r["hit_tokens_gpu"] + r["hit_tokens_cpu"]
    assert (hits == r["cached_tokens"]).all()  # the sources add up to the prefix-cache hit
    assert list(r["loaded_tokens_cpu"]) == [0, 0, 48]  # one admission each: loaded = its tier hit
    tl = result.timeline
    assert tl["tier_cpu_blocks"].max() >= 3 and (tl["tier_cpu_blocks"] <= summary["tiers"]["per_tier"]["cpu"][
        "capacity_blocks"]).all()
    tiers = summary["tiers"]
    src = tiers["prompt_tokens_by_source"]
    assert src["cpu"] == 48 and sum(src.values()) == 64 + 112 + 64
    assert tiers["links"]["h2d"]["bytes"] == 48 * 131_072
    cpu = tiers["per_tier"]["cpu"]
    assert cpu["capacity_blocks"] == int(1e9 // (16 * 131_072)) and cpu["loads"] == 3
    assert cpu["loaded_tokens"] == 3 * 16 == int(r["loaded_tokens_cpu"].sum())
    assert cpu["bytes_loaded"] == 3 * 16 * 131_072  # bytes moved = blocks moved x bytes per block
    assert cpu["bytes_stored"] == cpu["stores"] * 16 * 131_072


def test_without_tiers_the_same_requests_recompute():
    _, result, _ = run()
    assert int(result.requests.set_index("rid").loc[2, "cached_tokens"]) == 0


def test_blocking_delays_the_request_pipelined_the_iteration():
    _, blocking, _ = run("kv.tiers=[{medium: cpu, capacity_gb: 1}]", "kv.tier_load=blocking")
    _, pipelined, _ = run("kv.tiers=[{medium: cpu, capacity_gb: 1}]", "kv.tier_load=pipelined")
    b = blocking.requests.set_index("rid").loc[2]
    p = pipelined.requests.set_index("rid").loc[2]
    # blocking: scheduled first, prefilled once the KV arrived; pipelined: prefilled at once, the
    # iteration lasting at least the load
    assert b["first_scheduled_s"] == p["first_scheduled_s"]
    assert b["first_token_s"] > p["first_token_s"] - 1e-12 or b["first_token_s"] >= b["first_scheduled_s"]
    tl = pipelined.timeline
    assert (tl["dt_s"] >= 48 * 131_072 / 64e9 * 0.99).any()


@pytest.mark.parametrize(("tiers", "match"), [
    ("[{medium: disk, capacity_gb: 1}]", r"kv\.tiers\.0\.medium"),
    ("[{medium: cpu, capacity_gb: -1}]", r"kv\.tiers\.0\.capacity_gb"),
    ("[{medium: ssd, capacity_gb: 1}, {medium: cpu, capacity_gb: 1}]",
     r"kv\.tiers\.1\.medium: 'cpu' after"),
    ("[{medium: cpu, capacity_gb: 1}, {medium: cpu, capacity_gb: 2}]",
     r"kv\.tiers\.1\.medium: 'cpu' appears"),
    ("[{medium: remote, capacity_gb: 1}]", r"kv\.tiers\.0\.bandwidth_gbps"),
    ("[{medium: cpu, capacity_gb: 100000}]",
     r"^kv\.tiers\.0\.capacity_gb: 100000 GB exceeds the host DRAM"),
])
def test_bad_tiers_are_one_line_errors(tiers, match):
    with pytest.raises(KvsimError, match=match) as err:
        Simulation(load_scenario(None, [*BASE, f"kv.tiers={tiers}"]))
    assert "\n" not in str(err.value)


def test_tiers_need_the_hash_cache():
    with pytest.raises(KvsimError, match=r"kv\.tiers: .*prefix_cache: hash"):
        load_scenario(None, ["kv.prefix_cache=none", "kv.tiers=[{medium: cpu, capacity_gb: 1}]"])


def test_swap_preemption_uses_the_cpu_tier():
    # with a cpu tier, swapped-out blocks live in the tier's memory (its capacity, not kv.swap_space_gb),
    # pushing cached blocks down or out while they are there
    overrides = ["kv.tiers=[{medium: cpu, capacity_gb: 0.02}]", "kv.swap_space_gb=0",
                 "scheduler.preemption_mode=swap", "kv.check_invariants=true",
                 "kv.num_gpu_blocks_override=12",
                 "simulation.requests=30", "workload.arrival.rate=50",
                 "workload.prompt_len={dist: uniform, low: 16, high: 80}",
                 "workload.output_len={dist: uniform, low: 20, high: 80}"]
    sim = Simulation(load_scenario(None, [*BASE, *overrides]))
    kv_cpu_blocks = int(0.02e9 // (16 * 131_072))  # 9 blocks of 2 MiB
    result = sim.run()
    kv = sim.replicas[0].sched.kv
    assert kv.swap_capacity_blocks == kv_cpu_blocks and kv.swap_used_blocks == 0
    assert result.timeline["swapped"].max() > 0  # swapping happened although swap_space_gb is 0
    assert kv.tiers.tiers[0].capacity_blocks == kv_cpu_blocks  # all the room is back for cached blocks
    assert result.requests["finish_s"].notna().all()


def test_every_block_loaded_from_a_tier_is_credited_to_a_request():
    # a tight pool: requests are preempted (recompute) and a re-admission may load its own evicted KV
    # back from the tiers, which its first admission's hit columns do not count; loaded_tokens_<medium>
    # counts every admission, so over the run it is the tier's loads x block_size
    sim = Simulation(load_scenario(None, [
        "model=llama-3-8b", "hardware=h100-sxm", "kv.block_size=16", "kv.prefix_cache=hash",
        "kv.num_gpu_blocks_override=300", "kv.tiers=[{medium: cpu, capacity_gb: 0.5}, "
        "{medium: ssd, capacity_gb: 2}]", "kv.check_invariants=true", "workload.kind=chat",
        "workload.arrival.rate=20", "simulation.requests=120"]))
    result = sim.run()
    q = result.requests
    summary = build_summary(q, result.timeline, result.meta)
    assert q["preemptions"].sum() > 0
    for m in ("cpu", "ssd"):
        tier = summary["tiers"]["per_tier"][m]
        assert tier["loads"] > 0
        assert tier["loaded_tokens"] == int(q[f"loaded_tokens_{m}"].sum()) == tier["loads"] * 16
        assert (q[f"loaded_tokens_{m}"] >= q[f"hit_tokens_{m}"]).all()
    assert (q["loaded_tokens_cpu"] + q["loaded_tokens_ssd"] > q["hit_tokens_cpu"] + q["hit_tokens_ssd"]).any()
