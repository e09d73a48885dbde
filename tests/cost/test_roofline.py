"""Roofline cost terms on a toy model and device small enough to compute by hand."""

from __future__ import annotations

import pytest

from kvsim.cost.batch import Batch
from kvsim.cost.roofline import ALLREDUCE_LATENCY_S, CUDA_GRAPH_MAX_SEQS, RooflineCost
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
    # the per-layer and per-sequence overheads off, so that the hand-computed terms below stand alone
    params = dict(iteration_overhead_s=0.001, gemm_efficiency_max=0.5, gemm_efficiency_m_half=10.0,
                  bandwidth_efficiency=1.0, attention_efficiency=0.5, layer_overhead_s=0.0,
                  eager_layer_overhead_s=0.0, seq_overhead_s=0.0)
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


def test_overhead_scales_with_layers_and_sequences_and_graphs_cover_decode_only_batches():
    c, _ = cost(layer_overhead_s=1e-5, eager_layer_overhead_s=3e-5, seq_overhead_s=2e-6)
    layers = 2
    assert c.overhead_time(Batch()) == pytest.approx(0.001)  # nothing computed: the fixed term only
    assert c.overhead_time(decode(8, 100)) == pytest.approx(0.001 + layers * 1e-5 + 8 * 2e-6)
    mixed = Batch(num_seqs=9, prefill_seqs=1, prefill_tokens=50, decode_seqs=8, decode_context_tokens=800)
    assert c.overhead_time(mixed) == pytest.approx(0.001 + layers * 3e-5 + 9 * 2e-6)
    big = CUDA_GRAPH_MAX_SEQS + 1  # beyond the largest captured graph: eager
    assert c.overhead_time(decode(big, 10)) == pytest.approx(0.001 + layers * 3e-5 + big * 2e-6)
    assert c.step_time(decode(8, 100)) - cost()[0].step_time(decode(8, 100)) == pytest.approx(
        layers * 1e-5 + 8 * 2e-6)
    described = c.describe()
    assert (described["layer_overhead_s"], described["eager_layer_overhead_s"],
            described["seq_overhead_s"]) == (1e-5, 3e-5, 2e-6)


def test_defaults_are_the_fitted_terms():
    m, hw = get_model(MODEL), load_hardware(HW)
    d = RooflineCost(m, hw, 1, "fp16", 4096).describe()
    assert (d["iteration_overhead_s"], d["layer_overhead_s"], d["eager_layer_overhead_s"],
            d["seq_overhead_s"]) == (4.4e-4, 7.2e-5, 1.0e-4, 1.0e-5)


def test_mi300x_allreduce_bandwidth_follows_tp_and_nvswitch_does_not():
    m = get_model("llama-3-70b")
    mi300x, h100 = load_hardware("mi300x"), load_hardware("h100-sxm")
    bw = {tp: RooflineCost(m, mi300x, tp, "bf16", 1.0).ic_bw for tp in (2, 4, 8)}
    assert bw == {2: 64e9, 4: 192e9, 8: 448e9}
    assert RooflineCost(m, mi300x, 3, "bf16", 1.0).ic_bw == 448e9  # a size the profile does not list
    assert {RooflineCost(m, h100, tp, "bf16", 1.0).ic_bw for tp in (2, 4, 8)} == {450e9}
    ring = {tp: RooflineCost(m, mi300x, tp, "bf16", 1.0).allreduce_time(2048) - 160 * ALLREDUCE_LATENCY_S
            for tp in (2, 4)}
    assert ring[2] / ring[4] == pytest.approx((1 / 2 / 64e9) / (3 / 4 / 192e9))


@pytest.mark.parametrize("key, value, message", [
    ("iteration_overhead_s", float("inf"), "cost.iteration_overhead_s must be a finite number >= 0, got inf"),
    ("layer_overhead_s", -1e-6, "cost.layer_overhead_s must be a finite number >= 0, got -1e-06"),
    ("eager_layer_overhead_s", float("nan"), "cost.eager_layer_overhead_s must be a finite number >= 0"),
    ("seq_overhead_s", "1", "cost.seq_overhead_s must be a finite number >= 0, got '1'"),
    ("iteration_overhead_s", -1.0, "cost.iteration_overhead_s must be a finite number >= 0"),
    ("gemm_efficiency_m_half", float("nan"), "cost.gemm_efficiency_m_half must be a finite number > 0"),
    ("bandwidth_efficiency", 1.5, r"cost.bandwidth_efficiency must be a number in \(0, 1\], got 1.5"),
    ("attention_efficiency", True, r"cost.attention_efficiency must be a number in \(0, 1\]"),
])
def test_tunables_out_of_range_are_one_line_errors(key, value, message):
    with pytest.raises(KvsimError, match=message):
        cost(**{key: value})


def test_prefetch_overlaps_the_forward_pass_layer_by_layer():
    """1 decode sequence, context 1000: forward pass C = 1.9872 ms weights + 0.256 ms KV + 2 x 0.1 ms layer
    overhead = 2.4432 ms (the 1 ms fixed overhead is not overlapped). Over 2 layers the forward pass with
    a prefetch of F takes max(C + F / 2, F + C / 2)."""
    c, _ = cost(layer_overhead_s=1e-4)
    base = Batch(num_seqs=1, decode_seqs=1, decode_context_tokens=1000, decode_blocks=63)
    compute = 0.0019872 + 0.000256 + 2e-4
    assert c.step_time(base) == pytest.approx(0.001 + compute)
    assert c.forward_time(base) == pytest.approx(compute)
    small = base._replace(prefetch_bytes=1e5)  # F = 1 ms < C: hidden but for the first layer's 0.5 ms
    assert c.step_time(small) == pytest.approx(0.001 + compute + 0.0005)
    assert c.prefetch_overlap(small) == pytest.approx((compute, 0.001, 0.0005))
    large = base._replace(prefetch_bytes=1e6)  # F = 10 ms > C: transfer-bound, the last layer's compute shows
    assert c.step_time(large) == pytest.approx(0.001 + 0.01 + compute / 2)
    assert c.prefetch_overlap(large)[2] == pytest.approx(0.01 - compute / 2)
    # re-read recalls and swaps stay serial, on top of the overlapped prefetch
    both = large._replace(recall_bytes=1e5, swap_in_bytes=2e5)
    assert c.step_time(both) - c.step_time(large) == pytest.approx(0.001 + 0.002)


# ---- mixture of experts: a toy MoE of 2 layers, 4 experts of 1,000 parameters each, top-2 ----------------
MOE = dict(MODEL, name="toy-moe", num_params=1_000_000, active_params=996_000, num_experts=4,
           experts_per_token=2, moe_intermediate_size=8, tie_word_embeddings=True)
"""num_params - active_params = 2 layers x (4 - 2) idle experts x 1,000 -> expert_params 1,000; tied
embeddings: the whole 1e6 parameters (2e6 bytes at fp16) stream, 16,000 of them the routed experts."""


def moe_cost(**kw):
    params = dict(iteration_overhead_s=0.0, gemm_efficiency_max=0.5, gemm_efficiency_m_half=10.0,
                  bandwidth_efficiency=1.0, attention_efficiency=0.5, layer_overhead_s=0.0,
                  eager_layer_overhead_s=0.0, seq_overhead_s=0.0)
    params.update(kw)
    return RooflineCost(get_model(MOE), load_hardware(HW), 1, "fp16", 256 * 16, **params)


def test_moe_decode_reads_only_the_experts_its_tokens_pick():
    c = moe_cost()
    assert c.moe and c.expert_bytes == 2 * 4 * 1000 * 2 == 16_000
    # T = 1: D = k = 2 of 4 experts -> 2e6 - 16,000 + 16,000 x 2 / 4 = 1,992,000 bytes at 1e9 B/s
    dense_mem, _, expert_mem, _ = c._moe_terms(1)
    assert dense_mem + expert_mem == pytest.approx(1_992_000 / 1e9, rel=1e-12)
    # T = 2: D = 4 (1 - (1/2)^2) = 3 -> 1,984,000 + 12,000
    dense_mem, _, expert_mem, _ = c._moe_terms(2)
    assert (dense_mem, expert_mem) == (pytest.approx(1.984e-3, rel=1e-12), pytest.approx(1.2e-5, rel=1e-12))
    # many tokens: every expert, the dense figure (all weights streamed)
    dense_mem, _, expert_mem, _ = c._moe_terms(10_000)
    assert dense_mem + expert_mem == pytest.approx(2e6 / 1e9, rel=1e-12)


def test_moe_flops_stay_active_but_expert_gemms_run_at_their_own_tokens():
    c = moe_cost()
    # expert FLOPs per token 2 x 2 layers x 2 experts x 1,000 = 8,000; the rest 2 x 996,000 - 8,000
    assert c.expert_flops_per_token == 8_000
    assert c.dense_flops_per_token == 2 * 996_000 - 8_000
    # T = 64: D = 4 (1 - 2^-64) ~ 4, 64 x 2 / 4 = 32 tokens per expert -> e = 0.5 x 32 / 42
    _, dense_comp, _, expert_comp = c._moe_terms(64)
    assert dense_comp == pytest.approx(c.dense_flops_per_token * 64 / (1e12 * 0.5 * 64 / 74), rel=1e-12)
    assert expert_comp == pytest.approx(8_000 * 64 / (1e12 * 0.5 * 32 / 42), rel=1e-9)
    # T = 1: one token per read expert, the same efficiency as the dense part's
    _, dense_comp, _, expert_comp = c._moe_terms(1)
    assert expert_comp / dense_comp == pytest.approx(8_000 / c.dense_flops_per_token, rel=1e-12)
    mem = sum(c._moe_terms(1)[::2])
    assert c.linear_time(1) == max(mem, dense_comp + expert_comp)
    assert c.dense_linear_time(1) + c.expert_linear_time(1) >= c.linear_time(1)


def test_a_moe_spec_without_routing_streams_every_expert_as_before():
    plain = dict(MOE, num_experts=0, experts_per_token=0, moe_intermediate_size=0)
    c = RooflineCost(get_model(plain), load_hardware(HW), 1, "fp16", 256 * 16, bandwidth_efficiency=1.0)
    assert not c.moe and c.expert_linear_time(1) == 0.0 and c.dense_linear_time(5) == c.linear_time(5)
    assert c.linear_time(1) >= 2e6 / 1e9


def test_dense_models_keep_their_linear_term():
    c, m = cost(bandwidth_efficiency=1.0)
    assert not c.moe
    for t in (1, 64, 4096):
        mem = m.weight_stream_bytes() / 1e9
        comp = m.linear_flops_per_token() * t / (1e12 * 0.5 * t / (t + 10.0))
        assert c.linear_time(t) == max(mem, comp) == c.dense_linear_time(t)


def test_a_tp_group_beyond_the_nvlink_domain_all_reduces_over_the_network():
    model = get_model("llama-3-70b")
    bpb = 16 * model.kv_bytes_per_token("bf16", 8)
    inside = RooflineCost(model, load_hardware("h100-sxm"), 8, "bf16", bpb)
    beyond = RooflineCost(model, load_hardware("h100-sxm"), 16, "bf16", bpb)
    assert inside.describe()["allreduce_bandwidth"] == 450e9 and "allreduce_link" not in inside.describe()
    d = beyond.describe()
    assert d["allreduce_bandwidth"] == 50e9  # h100-sxm's network_bandwidth
    assert d["allreduce_link"] == "network (tensor_parallel_size 16 > nvlink_domain 8)"
    # by hand: 2 (tp - 1) / tp x 2 bytes x hidden x 2 per layer x layers x tokens / 50 GB/s + 160 calls x 8 us
    tokens = 100
    ring = 2 * 15 / 16 * (2 * 8192 * 2 * 80) * tokens / 50e9
    assert beyond.allreduce_time(tokens) == pytest.approx(ring + 160 * ALLREDUCE_LATENCY_S)
    # an NVL72 rack keeps tp 16 (and 64) on NVLink
    nvl = RooflineCost(model, load_hardware("gb200"), 16, "bf16", bpb).describe()
    assert nvl["allreduce_bandwidth"] == 900e9 and "allreduce_link" not in nvl
