"""Expert parallelism in the specs (kvsim/specs/expert_parallel.py) and the KV capacity it leaves
(kvsim/specs/footprint.py `expert_parallel`), by hand on a toy model and on the catalog's MoE models."""

from __future__ import annotations

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.catalog import get_model
from kvsim.specs.expert_parallel import (
    ALL2ALL_BACKENDS,
    dispatch_bytes_per_value,
    ep_weight_bytes,
    expert_parallel_problem,
    experts_per_gpu,
)
from kvsim.specs.footprint import GiB, kv_capacity
from kvsim.specs.footprint_report import footprint_rows
from kvsim.specs.hardware import load_hardware

H200 = load_hardware("h200")
TOY = dict(name="toy-ep", num_layers=2, hidden_size=256, num_attention_heads=4, num_kv_heads=2, head_dim=64,
           intermediate_size=1024, vocab_size=1000, num_params=10_000_000, active_params=8_820_352,
           attention="gqa", max_position_embeddings=4096, num_experts=8, experts_per_token=2,
           moe_intermediate_size=128)
"""One expert: (10,000,000 - 8,820,352) / (2 layers x (8 - 2)) = 98,304 parameters."""


def test_weights_per_gpu_by_hand():
    m = get_model(TOY)
    # routed experts: 2 layers x 8 experts x 98,304 parameters x 2 bytes = 3,145,728 bytes of the 20,000,000
    routed = 2 * 8 * 98_304 * 2
    assert routed == 3_145_728
    assert ep_weight_bytes(m, 2, 4) == pytest.approx((20_000_000 - routed) / 2 + routed / 4, rel=1e-12)
    assert ep_weight_bytes(m, 1, 1) == pytest.approx(m.weight_bytes(1), rel=1e-12)
    assert experts_per_gpu(m, 4) == 2


def test_gpt_oss_120b_on_8_h200_dp8_ep8_against_tp8():
    m = get_model("gpt-oss-120b")
    routed = 36 * 128 * m.expert_params * 0.53125  # 36 layers x 128 experts, mxfp4: 4.25 bits a parameter
    assert routed == pytest.approx(m.routed_expert_bytes(1), rel=1e-12)
    ep8 = ep_weight_bytes(m, 1, 8)
    assert ep8 == pytest.approx(m.weight_bytes(1) - routed + routed / 8, rel=1e-12)
    assert 8.7e9 < ep8 < 8.8e9 and m.weight_bytes(8) == pytest.approx(7.758e9, rel=1e-3)
    dp_rank = kv_capacity(m, H200, "bf16", 1, expert_parallel=8)
    tp8 = kv_capacity(m, H200, "bf16", 8)
    # each DP rank (one GPU) holds the whole KV of its own sequences: 8 x the bytes per token of a TP8 GPU;
    # the 8 ranks together hold a little less than the TP8 replica (the non-expert weights are replicated)
    assert dp_rank.weight_bytes == pytest.approx(ep8)
    assert dp_rank.kv_bytes_per_token == 8 * tp8.kv_bytes_per_token
    assert dp_rank.num_blocks == 201_508 and tp8.num_blocks == 1_625_483
    assert 8 * dp_rank.tokens < tp8.tokens


def test_problems_are_one_line_and_name_the_key():
    assert expert_parallel_problem(get_model("llama-3.1-8b"), 1, 8).startswith(
        "parallelism.enable_expert_parallel: model llama-3.1-8b has no routed experts")
    msg = expert_parallel_problem(get_model("gpt-oss-120b"), 1, 6)
    assert "do not split evenly over EP = tensor_parallel_size x data_parallel_size = 1 x 6 = 6" in msg
    assert "\n" not in msg
    assert expert_parallel_problem(get_model("deepseek-v3"), 1, 256) is None
    assert "256 routed experts" in expert_parallel_problem(get_model("deepseek-v3"), 2, 256)  # EP 512


def test_backends_and_dispatch_dtype():
    assert set(ALL2ALL_BACKENDS.values()) == {"gather", "alltoall"}
    assert ALL2ALL_BACKENDS["allgather_reducescatter"] == "gather"
    v3 = get_model("deepseek-v3")  # fp8
    assert dispatch_bytes_per_value(v3, "deepep_low_latency") == 1
    assert dispatch_bytes_per_value(v3, "pplx") == 2
    assert dispatch_bytes_per_value(get_model("qwen3-235b-a22b"), "deepep_low_latency") == 2  # bf16


def test_qwen3_235b_catalog_entry():
    m = get_model("qwen3-235b-a22b")
    # Qwen/Qwen3-235B-A22B config.json: 94 layers, every one MoE, 128 experts top-8 of 4096 x 1536
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads) == (94, 4096, 64, 4)
    assert (m.head_dim, m.vocab_size) == (128, 151936)
    assert (m.num_experts, m.experts_per_token, m.moe_intermediate_size) == (128, 8, 1536)
    assert m.moe_layer_count == 94
    assert m.expert_params == 3 * 4096 * 1536
    assert 234e9 < m.num_params < 236e9 and 21.5e9 < m.active_params < 22.5e9  # "235B total, 22B active"


def test_footprint_rows_with_ep():
    rows = dict(footprint_rows(get_model("gpt-oss-120b"), H200, "bf16", 1, 0.9, 16, 2048, ep=8))
    assert rows["weights per GPU"].startswith("8.15 GiB (non-expert") and "16 experts per GPU" in rows[
        "weights per GPU"]
    assert rows["KV capacity per DP rank (1 GPU; 8 DP ranks)"] == "3,224,128 token slots"
    with pytest.raises(KvsimError, match="--ep 6: the 128 routed experts"):
        footprint_rows(get_model("gpt-oss-120b"), H200, "bf16", 1, 0.9, 16, 2048, ep=6)
    with pytest.raises(KvsimError, match="--ep 6: expert_parallel_size must be"):
        footprint_rows(get_model("gpt-oss-120b"), H200, "bf16", 4, 0.9, 16, 2048, ep=6)
    assert GiB == 2**30
