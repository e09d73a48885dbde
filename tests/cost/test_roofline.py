"""Roofline cost terms on a toy model and device small enough to compute by hand."""

from __future__ import annotations

import pytest

from kvsim.cost.batch import Batch
from kvsim.cost.roofline import ALLREDUCE_LATENCY_S, RooflineCost
from kvsim.errors import KvsimError
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware

# 2 layers, hidden 64, 4 heads x 16, 2 KV heads: KV bytes/token at fp16 = 2 * 2 * 2 * 16 * 2 = 256
MODEL = dict(name="toy", num_layers=2, hidden_size=64, num_attention_heads=4, num_kv_heads=2, head_dim=16,
             intermediate_size=128, vocab_size=100, num_params=1_000_000, active_params=1_000_000,
             attention="gqa", max_position_embeddings=4096, weight_dtype="fp16")
HW = dict(name="toy-gpu", memory_bytes=1e9, hbm_bandwidth=1e9, peak_flops={"fp16": 1e12},
          host_link_bandwidth=1e8, host_dram_bytes=1e10, ssd_bytes=1e11, ssd_bandwidth=1e8,
          interconnect_bandwidth=1e9)


def cost(tp=1, **kw):
    m = get_model(MODEL)
    hw = load_hardware(HW)
    params = dict(iteration_overhead_s=0.001, gemm_efficiency_max=0.5, gemm_efficiency_m_half=10.0,
                  bandwidth_efficiency=1.0, attention_efficiency=0.5)
    params.update(kw)
    return RooflineCost(m, hw, tp, "fp16", bytes_per_block=256 * 16, **params), m


def test_empty_batch_costs_the_overhead():
    c, _ = cost()
    assert c.step_time(Batch()) == pytest.approx(0.001)


def test_decode_is_weight_bandwidth_bound_plus_kv_reads():
    c, m = cost()
    # 1 decode token: the weights one step streams, 2 MB less the untied input embedding (100 x 64 params,
    # only looked up) = 1,987,200 B / 1 GB/s; compute 2e6 FLOP / (1e12 * 0.5 * 1/11) = 4.4e-5 s
    b = Batch(num_seqs=1, decode_seqs=1, decode_context_tokens=1000, decode_blocks=63)
    kv = 1000 * 256 / 1e9
    assert m.weight_bytes() == 2_000_000 and m.weight_stream_bytes() == 1_987_200
    assert c.step_time(b) == pytest.approx(0.001 + 0.0019872 + kv)


def test_large_prefill_is_compute_bound():
    c, m = cost()
    t = 10_000
    b = Batch(num_seqs=1, prefill_seqs=1, prefill_tokens=t, prefill_attn_pairs=t * (t + 1) / 2)
    eff = 0.5 * t / (t + 10)
    linear = m.linear_flops_per_token() * t / (1e12 * eff)
    attn = m.attention_flops_per_pair() * t * (t + 1) / 2 / (1e12 * 0.5)
    assert linear > 0.002  # beyond the weight-read time
    assert c.step_time(b) == pytest.approx(0.001 + linear + attn)


def test_allreduce_ring_term_for_tp2():
    c, m = cost(tp=2)
    tokens = 100
    # 2 all-reduces per layer of tokens x hidden x 2 bytes; ring moves 2 (tp-1)/tp of it
    ring = 2 * 1 / 2 * (2 * 64 * 2 * 2) * tokens / 1e9
    assert c.allreduce_time(tokens) == pytest.approx(ring + 4 * ALLREDUCE_LATENCY_S)
    assert cost(tp=1)[0].allreduce_time(tokens) == 0.0


def test_swap_and_copy_terms():
    c, _ = cost()
    b = Batch(swap_in_bytes=1e6, swap_out_bytes=1e6, copy_blocks=2)
    assert c.step_time(b) == pytest.approx(0.001 + 2e6 / 1e8 + 2 * 2 * 4096 / 1e9)


def test_time_is_monotone_in_context_and_batch():
    c, _ = cost()
    for ctx in (100, 1000):
        ts = [c.step_time(decode(n, ctx)) for n in (1, 8, 64)]
        assert ts == sorted(ts)
    for n in (1, 64):
        ts = [c.step_time(decode(n, ctx)) for ctx in (1, 100, 1000)]
        assert ts == sorted(ts)


def decode(n: int, ctx: int) -> Batch:
    return Batch(num_seqs=n, decode_seqs=n, decode_context_tokens=n * ctx)


@pytest.mark.parametrize("key, value, message", [
    ("iteration_overhead_s", float("inf"), "cost.iteration_overhead_s must be a finite number >= 0, got inf"),
    ("iteration_overhead_s", -1.0, "cost.iteration_overhead_s must be a finite number >= 0"),
    ("gemm_efficiency_m_half", float("nan"), "cost.gemm_efficiency_m_half must be a finite number > 0"),
    ("bandwidth_efficiency", 1.5, r"cost.bandwidth_efficiency must be a number in \(0, 1\], got 1.5"),
    ("attention_efficiency", True, r"cost.attention_efficiency must be a number in \(0, 1\]"),
])
def test_tunables_out_of_range_are_one_line_errors(key, value, message):
    with pytest.raises(KvsimError, match=message):
        cost(**{key: value})
