"""The parallelism keys of expert parallelism (kvsim/scenario.py `Parallelism`, `_expert_parallel_rule`;
the model's rules in kvsim/engine/fleet/deployment.py; vLLM's names in kvsim/aliases.py): one-line errors,
the aliases, and one small run whose KV capacity per DP rank and MoE totals are checked by hand."""

from __future__ import annotations

import pytest

import kvsim
from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.scenario import build_scenario
from kvsim.specs.catalog import get_model
from kvsim.specs.footprint import kv_capacity
from kvsim.specs.hardware import load_hardware

EP8 = {"tensor_parallel_size": 1, "data_parallel_size": 8, "enable_expert_parallel": True}


def _sc(par: dict, **extra) -> dict:
    return {"model": "gpt-oss-120b", "hardware": "h200", "parallelism": par,
            "workload": {"kind": "synthetic", "prompt_len": {"dist": "fixed", "value": 64},
                         "output_len": {"dist": "fixed", "value": 4}},
            "simulation": {"requests": 16}, **extra}


def _error(data: dict) -> str:
    with pytest.raises(KvsimError) as exc:
        Simulation(build_scenario(data, "s.yaml"))
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_defaults_and_the_derived_size():
    par = build_scenario(_sc(EP8)).parallelism
    assert (par.enable_expert_parallel, par.expert_parallel_size, par.all2all_backend) == (
        True, None, "allgather_reducescatter")
    assert par.expert_load_factor == 1.0 and par.replicas == 8
    assert build_scenario(_sc({**EP8, "expert_parallel_size": 8})).parallelism.expert_parallel_size == 8
    assert build_scenario(_sc({})).parallelism.enable_expert_parallel is False


@pytest.mark.parametrize(("par", "extra", "expected"), [
    ({**EP8, "expert_parallel_size": 4}, {},
     "s.yaml: parallelism.expert_parallel_size: 4, but vLLM derives EP = tensor_parallel_size x "
     "data_parallel_size = 8; give 8 or leave it out"),
    ({"expert_parallel_size": 8}, {},
     "s.yaml: parallelism.expert_parallel_size: needs parallelism.enable_expert_parallel: true"),
    ({"expert_load_factor": 2.0}, {},
     "s.yaml: parallelism.expert_load_factor: needs parallelism.enable_expert_parallel: true"),
    ({**EP8, "expert_load_factor": 9.0}, {},
     "s.yaml: parallelism.expert_load_factor: 9 exceeds EP = 8 (the busiest rank receives at most every "
     "routed token)"),
    ({**EP8, "data_parallel_size": 1}, {"cluster": {"pools": [{"data_parallel_size": 2}]}},
     "s.yaml: parallelism.enable_expert_parallel: not modelled with cluster: pools"),
])
def test_scenario_rules(par, extra, expected):
    assert _error(_sc(par, **extra)) == expected


def test_bad_backend_and_load_factor_are_schema_errors():
    assert "parallelism.all2all_backend" in _error(_sc({**EP8, "all2all_backend": "mori"}))
    assert "parallelism.expert_load_factor" in _error(_sc({**EP8, "expert_load_factor": 0.5}))


def test_model_rules():
    assert _error({**_sc(EP8), "model": "llama-3.1-8b"}) == (
        "parallelism.enable_expert_parallel: model llama-3.1-8b has no routed experts (num_experts, "
        "experts_per_token); expert parallelism needs a mixture-of-experts model")
    assert "do not split evenly" in _error(_sc({**EP8, "data_parallel_size": 3}))
    toy = {"name": "toy-ep", "num_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "num_kv_heads": 2,
           "intermediate_size": 1024, "vocab_size": 1000, "num_params": 10_000_000,
           "active_params": 8_820_352, "num_experts": 8, "experts_per_token": 2, "moe_intermediate_size": 128}
    on_cpu = {**_sc({**EP8, "data_parallel_size": 2}, cost={"model": "calibrated"}), "model": toy,
              "hardware": "cpu"}  # the one profile with a calibration
    assert _error(on_cpu) == (
        "parallelism.enable_expert_parallel: not modelled with cost.model: calibrated; use auto, kernels or "
        "roofline")


def test_vllm_names():
    # --enable-expert-parallel and --all2all-backend, in an engine: section or at the top level
    sc = build_scenario({**_sc({"data_parallel_size": 8}), "engine": {
        "enable_expert_parallel": True, "all2all_backend": "deepep_low_latency"}})
    assert sc.parallelism.enable_expert_parallel and sc.parallelism.all2all_backend == "deepep_low_latency"
    sc = build_scenario({**_sc({"data_parallel_size": 2}), "enable-expert-parallel": True})
    assert sc.parallelism.enable_expert_parallel


def test_a_small_run_by_hand():
    data = _sc({"tensor_parallel_size": 1, "data_parallel_size": 2, "enable_expert_parallel": True},
               cost={"model": "roofline"})
    result = kvsim.run(data)
    s = result.summary
    # KV per DP rank: one GPU holding the non-expert weights and 128 / 2 = 64 experts of every layer
    cap = kv_capacity(get_model("gpt-oss-120b"), load_hardware("h200"), "auto", 1, expert_parallel=2)
    assert s["kv"]["capacity_tokens"] == cap.tokens
    ep = s["cost_model"]["expert_parallel"]
    assert (ep["expert_parallel_size"], ep["data_parallel_size"], ep["experts_per_gpu"]) == (2, 2, 64)
    # every iteration that computed tokens on either DP rank is one step of the MoE layers
    tl = result.timeline
    computing = int(((tl["prefill_tokens"] + tl["decode_seqs"]) > 0).sum())
    assert ep["steps"] == computing
    assert ep["alltoall_s_per_step"] == pytest.approx(ep["alltoall_s_total"] / ep["steps"])
    assert ep["collectives"] == ["all_gather over 2 GPUs: links", "reduce_scatter over 2 GPUs: links"]
    assert kvsim.run(result.scenario).summary == s  # the resolved scenario (every default set) runs again



def test_scenario_dict_echoes_the_expert_parallel_keys_only_with_expert_parallelism():
    """summary.json's scenario echo of a run without expert parallelism is the one it had before the keys
    existed; with it, every key is echoed (the echo reruns alike)."""
    from kvsim.scenario import build_scenario, scenario_dict

    plain = scenario_dict(build_scenario({}))["parallelism"]
    assert set(plain) == {"tensor_parallel_size", "replicas"}
    ep = scenario_dict(build_scenario({"model": "gpt-oss-120b", "parallelism": {
        "data_parallel_size": 2, "enable_expert_parallel": True}}))["parallelism"]
    assert ep["enable_expert_parallel"] is True and ep["all2all_backend"] == "allgather_reducescatter"
    assert ep["expert_load_factor"] == 1.0 and "expert_parallel_size" in ep
