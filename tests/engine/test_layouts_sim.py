"""End-to-end runs of every KV layout with parallel sampling and beam search under the runtime invariant
checks (allocator state, breakdown summing to capacity), plus the breakdown invariants over the timeline."""

from __future__ import annotations

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.metrics.summary import build_summary
from kvsim.scenario import Scenario, build_scenario
from kvsim.workload.request import Request

BASE = {
    "model": "llama-3-8b",
    "hardware": "h100-sxm",
    "kv": {"block_size": 8, "num_gpu_blocks_override": 60, "check_invariants": True},
    "scheduler": {"max_num_seqs": 16, "max_num_batched_tokens": 256, "max_model_len": 160},
    "workload": {"kind": "synthetic", "arrival": {"process": "poisson", "rate": 40.0},
                 "prompt_len": {"dist": "uniform", "low": 4, "high": 60},
                 "output_len": {"dist": "uniform", "low": 1, "high": 90}},
    "simulation": {"seed": 11, "requests": 30},
}
LAYOUTS = ["paged", "contiguous:max", "contiguous:pow2", "contiguous:oracle"]
PARTS = ["kv_token_states", "kv_reservation", "kv_internal_frag", "kv_external_frag", "kv_free"]


def run(layout: str, placement: str = "first_fit", **workload):
    data = {**BASE, "kv": {**BASE["kv"], "layout": layout, "placement": placement},
            "workload": {**BASE["workload"], **workload}}
    result = Simulation(build_scenario(data)).run()
    return result, build_summary(result.requests, result.timeline, result.meta)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("workload", [{}, {"n": 3}, {"beam_width": 3}], ids=["single", "n3", "beam3"])
def test_layouts_complete_with_invariants(layout, workload):
    result, summary = run(layout, **workload)
    assert summary["requests"]["completed"] == 30 and summary["requests"]["rejected"] == 0
    tl = result.timeline
    capacity = 60 * 8
    assert (tl[PARTS].sum(axis=1) == capacity).all()
    assert (tl[PARTS] >= 0).all().all()
    assert (tl["kv_unshared_blocks"] >= tl["kv_used_blocks"]).all()
    if layout == "paged":
        assert (tl["kv_reservation"] == 0).all() and (tl["kv_external_frag"] == 0).all()
        # the unfilled tail of each sequence's last block: below one block per sequence in the batch
        assert (tl["kv_internal_frag"] < 8 * tl["num_seqs"].clip(lower=1)).all()
        if workload:
            assert summary["kv"]["sharing_saving"] > 0
    else:
        assert summary["kv"]["sharing_saving"] == 0
        assert summary["preemptions"] == 0  # whole reservations never run out mid-request


def test_best_fit_runs():
    _, summary = run("contiguous:oracle", "best_fit")
    assert summary["requests"]["completed"] == 30


@pytest.mark.parametrize("layout", ["contiguous:oracle", "contiguous:pow2", "contiguous:max"])
def test_buddy_runs(layout):
    res, summary = run(layout, "buddy")  # (allocator and breakdown invariants checked every iteration)
    assert summary["requests"]["completed"] == 30
    if layout == "contiguous:max":
        # max_model_len 160 -> 256-slot buddy blocks; 480 slots = chunks 256 + 128 + 64 + 32: one at a time
        assert res.timeline["running_reqs"].max() == 1


def test_contiguous_max_batches_fewer_requests_than_paged():
    _, paged = run("paged")
    _, cmax = run("contiguous:max")
    assert cmax["concurrency"]["max"] == 480 // 160
    assert paged["concurrency"]["mean"] > cmax["concurrency"]["mean"]
    internal = "internal_fragmentation"
    assert cmax["kv"]["breakdown"][internal] > paged["kv"]["breakdown"][internal]


def test_beam_width_runs_width_sequences():
    result, summary = run("paged", beam_width=2)
    assert set(result.requests["n"]) == {1}  # one result per request
    assert result.timeline["num_seqs"].max() > result.timeline["running_reqs"].max()
    assert summary["cow_copies"] > 0


def test_reservation_larger_than_pool_is_rejected():
    data = {**BASE, "kv": {**BASE["kv"], "layout": "contiguous:pow2", "num_gpu_blocks_override": 10},
            "simulation": {"seed": 1, "requests": 5}}
    sim = Simulation(build_scenario(data))
    sim.run()
    # 80 slots: prompt 40 + next_pow2(30) = 72 fits, prompt 40 + next_pow2(40) = 104 does not
    assert sim.reject_reason(Request(0, 0.0, 40, 30)) is None
    assert "exceeds the KV capacity of 80 slots" in sim.reject_reason(Request(1, 0.0, 40, 40))


def test_config_errors():
    with pytest.raises(KvsimError, match="kv.layout"):
        build_scenario({"kv": {"layout": "contiguous:min"}})
    with pytest.raises(KvsimError, match="kv.placement"):
        build_scenario({"kv": {"placement": "worst_fit"}})
    with pytest.raises(KvsimError, match="either n .* or beam_width"):
        build_scenario({"workload": {"n": 2, "beam_width": 2}})
    data = {**BASE, "kv": {**BASE["kv"], "layout": "contiguous:max"}, "scheduler": {"max_model_len": 1000}}
    with pytest.raises(KvsimError, match="reserves max_model_len"):
        Simulation(build_scenario(data)).run()


@pytest.mark.parametrize(("kv", "expected"), [
    ({"layout": "contiguous:pow2", "prefix_cache": "hash"},
     "kv.prefix_cache: 'hash' needs kv.layout: paged (got 'contiguous:pow2')"),
    ({"layout": "contiguous:max", "sparsity": {"policy": "h2o"}},
     "kv.sparsity.policy: 'h2o' needs kv.layout: paged (got 'contiguous:max')"),
])
def test_a_scenario_built_directly_gets_the_schema_rules(kv, expected):
    """The rules across keys live in the schema (scenario.cross_check); a Scenario built without
    load_scenario meets them when the Simulation is constructed, not in the KV factory."""
    sc = Scenario.model_validate({**BASE, "kv": {**BASE["kv"], **kv}})
    with pytest.raises(KvsimError) as info:
        Simulation(sc)
    assert str(info.value) == expected
