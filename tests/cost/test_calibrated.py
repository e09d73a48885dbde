"""The calibrated cost model by hand on the toy model of test_roofline: fitted terms, per-term roofline
fallback, dtype matching, and what describe() reports."""

from __future__ import annotations

import datetime
import json

import pytest

from kvsim.cost.batch import Batch
from kvsim.cost.calibrated import TERMS, CalibratedCost, pick_fit
from kvsim.cost.roofline import RooflineCost
from kvsim.errors import KvsimError
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware

MODEL = dict(name="toy", num_layers=2, hidden_size=64, num_attention_heads=4, num_kv_heads=2, head_dim=16,
             intermediate_size=128, vocab_size=100, num_params=1_000_000, active_params=1_000_000,
             attention="gqa", max_position_embeddings=4096, weight_dtype="fp16")
DECODE = {"fixed_s": 1e-5, "per_seq_head_s": 1e-6, "per_block_head_s": 1e-7, "per_kv_byte_s": 1e-9,
          "per_flop_s": 1e-12}
CAL = {
    "source": "calibration/toy/measurements.csv", "sha256": "ab", "provenance": {"device": "toy"},
    "terms": {"decode_attention": "paged_decode_torch", "linear": "gemm_torch", "swap_out": "copy_d2h"},
    "kernels": {
        "paged_decode_torch": {"fp16": {"params": DECODE, "heldout_mape": 0.05}},
        "gemm_torch": {"bf16": {"params": {"fixed_s": 2e-6, "per_weight_byte_s": 1e-9, "per_flop_s": 1e-11},
                                "heldout_mape": 0.1}},
        "copy_d2h": {"bf16": {"params": {"fixed_s": 1e-5, "per_byte_s": 1e-10}, "heldout_mape": 0.02}},
    },
}
HW = dict(name="toy-gpu", memory_bytes=1e9, hbm_bandwidth=1e9, peak_flops={"fp16": 1e12},
          host_link_bandwidth=1e8, host_dram_bytes=1e10, ssd_bytes=1e11, ssd_bandwidth=1e8,
          interconnect_bandwidth=1e9)


def cost(calibration=CAL):
    m, hw = get_model(MODEL), load_hardware(dict(HW, calibration=calibration))
    rl = RooflineCost(m, hw, 1, "fp16", 256 * 16, iteration_overhead_s=0.001, bandwidth_efficiency=1.0,
                      attention_efficiency=0.5, layer_overhead_s=0.0, eager_layer_overhead_s=0.0,
                      seq_overhead_s=0.0)
    return CalibratedCost(m, hw, 1, "fp16", 256 * 16, rl), rl


def test_decode_step_by_hand():
    c, _ = cost()
    b = Batch(num_seqs=3, decode_seqs=3, decode_context_tokens=100, decode_blocks=9)
    # 4 x 2 layers + LM head = 9 GEMMs; the weights streamed leave out the untied input embedding
    linear = 9 * 2e-6 + (2e6 - 2 * 100 * 64) * 1e-9 + 2 * (1e6 - 100 * 64) * 3 * 1e-11
    decode = 2 * (1e-5 + 1e-6 * 3 * 2 + 1e-7 * 9 * 2) + 1e-9 * 100 * 256 + 1e-12 * 100 * 4 * 2 * 4 * 16
    assert c.step_time(b) == pytest.approx(0.001 + linear + decode, rel=1e-12)


def test_terms_without_a_fit_fall_back_to_the_roofline():
    c, rl = cost()
    b = Batch(num_seqs=1, prefill_seqs=1, prefill_tokens=10, prefill_attn_pairs=55, copy_blocks=2,
              swap_in_bytes=1e6)
    expected = (0.001 + c.linear_time(10) + 512 * 55 / (1e12 * 0.5)  # prefill: roofline FLOPs / (F e_attn)
                + 2 * 2 * 4096 / 1e9 + 1e6 / 1e8)  # copy-on-write and swap-in: roofline
    assert c.step_time(b) == pytest.approx(expected, rel=1e-12)
    assert c.copy_time("swap_out", 1e6) == pytest.approx(1e-5 + 1e-4)  # fitted


def test_sparsity_traffic_is_timed_as_copies():
    c, _ = cost()
    b = Batch(offload_bytes=1e6, recall_bytes=2e6, kv_copy_bytes=1e5)
    # offload: fitted d2h 1e-5 + 1e6 x 1e-10; recall and compaction: roofline (host link; read + write)
    expected = 0.001 + (1e-5 + 1e-4) + 2e6 / 1e8 + 2 * 1e5 / 1e9
    assert c.step_time(b) == pytest.approx(expected, rel=1e-12)


def test_sparsity_traffic_uses_every_fitted_copy_kernel():
    cal = dict(CAL, terms=dict(CAL["terms"], cow_copy="copy_d2d", swap_in="copy_h2d"),
               kernels=dict(CAL["kernels"],
                            copy_d2d={"fp16": {"params": {"fixed_s": 3e-6, "per_byte_s": 5e-11},
                                               "heldout_mape": 0.01}},
                            copy_h2d={"fp16": {"params": {"fixed_s": 2e-5, "per_byte_s": 2e-10},
                                               "heldout_mape": 0.03}}))
    c, _ = cost(cal)
    b = Batch(offload_bytes=1e6, recall_bytes=2e6, kv_copy_bytes=1e5)
    offload = 1e-5 + 1e6 * 1e-10  # 1.1e-4 s (d2h fit, as swap out)
    recall = 2e-5 + 2e6 * 2e-10  # 4.2e-4 s (h2d fit, as swap in)
    compact = 3e-6 + 1e5 * 5e-11  # 8e-6 s (d2d fit, as copy-on-write)
    assert c.step_time(b) == pytest.approx(0.001 + offload + recall + compact, rel=1e-12)
    # with swap traffic in the same iteration each kind is one more call: the fixed cost is paid again
    both = Batch(swap_out_bytes=1e6, offload_bytes=1e6)
    assert c.step_time(both) == pytest.approx(0.001 + 2 * offload, rel=1e-12)


def test_dtype_falls_back_to_the_same_width_then_any():
    assert pick_fit(CAL, "linear", "fp16")[:2] == ("gemm_torch", "bf16")
    assert pick_fit(CAL, "decode_attention", "fp8")[:2] == ("paged_decode_torch", "fp16")
    assert pick_fit(CAL, "prefill_attention", "fp16") is None


def test_describe_names_the_calibration_and_every_term():
    c, _ = cost()
    d = c.describe()
    assert d["model"] == "calibrated" and d["calibration"]["sha256"] == "ab"
    assert d["terms"]["decode_attention"] == "paged_decode_torch/fp16 (held-out MAPE 0.050)"
    assert d["terms"]["prefill_attention"] == "roofline" and d["terms"]["allreduce"] == "roofline"


def test_profile_without_calibration_is_a_one_line_error():
    with pytest.raises(KvsimError, match="needs a calibration in hardware profile 'toy-gpu'"):
        cost(None)


def _with(**changes):
    """CAL with kernels.<kernel>.<dtype> entries replaced: changes maps 'kernel/dtype' -> fit."""
    kernels = {k: dict(v) for k, v in CAL["kernels"].items()}
    for where, fit in changes.items():
        kernel, dtype = where.split("/")
        kernels[kernel] = {dtype: fit}
    return dict(CAL, kernels=kernels)


GEMM = CAL["kernels"]["gemm_torch"]["bf16"]


@pytest.mark.parametrize("calibration, message", [
    ({"source": "x.csv", "terms": {}, "kernels": {}},
     r"hardware profile 'toy-gpu': calibration: no usable kernel fit \(terms is empty"),
    ({"source": "x.csv", "kernels": {}}, "hardware profile 'toy-gpu': calibration: no 'terms' mapping"),
    (dict(CAL, kernels=None), "calibration: no 'kernels' mapping"),
    (dict(CAL, terms=dict(CAL["terms"], decode="paged_decode_torch")),
     "calibration.terms: unknown term 'decode'; known: linear, decode_attention"),
    (dict(CAL, terms=dict(CAL["terms"], prefill_attention="prefill_torch")),
     "calibration.terms.prefill_attention names kernel 'prefill_torch', which has no fit under"),
    (dict(CAL, terms=dict(CAL["terms"], linear=["gemm_torch"])), r"terms.linear must name a kernel"),
    (_with(**{"gemm_torch/bf16": {"heldout_mape": 0.1}}),
     "calibration.kernels.gemm_torch.bf16: a fit needs a 'params' mapping"),
    (_with(**{"gemm_torch/bf16": dict(GEMM, params={"fixed_s": 1e-6, "per_flop_s": 1e-11})}),
     "calibration.kernels.gemm_torch.bf16.params.per_weight_byte_s is missing"),
    (_with(**{"gemm_torch/bf16": dict(GEMM, params=dict(GEMM["params"], per_flop_s=float("nan")))}),
     "params.per_flop_s must be a finite number in \\[0, 1000\\], got nan"),
    (_with(**{"gemm_torch/bf16": dict(GEMM, params=dict(GEMM["params"], per_flop_s="1e-11"))}),
     "params.per_flop_s must be a finite number in \\[0, 1000\\], got '1e-11'"),
    (_with(**{"gemm_torch/bf16": dict(GEMM, params=dict(GEMM["params"], fixed_s=-1e-6))}),
     "params.fixed_s must be a finite number in \\[0, 1000\\], got -1e-06"),
    (_with(**{"gemm_torch/bf16": dict(GEMM, params=dict(GEMM["params"], fixed_s=1e300))}),
     "params.fixed_s must be a finite number in \\[0, 1000\\], got 1e\\+300"),
    (_with(**{"gemm_torch/bf16": dict(GEMM, heldout_mape=float("inf"))}),
     "gemm_torch.bf16.heldout_mape must be a finite number >= 0, got inf"),
    (_with(**{"gemm_torch/bf16": dict(GEMM, model="copy")}),
     "gemm_torch.bf16: a 'copy' fit cannot time linear \\(needs a gemm fit\\)"),
])
def test_unusable_calibration_is_a_one_line_error_naming_the_profile_and_key(calibration, message):
    with pytest.raises(KvsimError, match=message) as exc:
        cost(calibration)
    assert "\n" not in str(exc.value)


def test_terms_the_calibration_does_not_list_stay_roofline_and_say_so():
    c, _ = cost(dict(CAL, terms={"swap_out": "copy_d2h"}))  # a documented partial calibration
    assert c.describe()["terms"]["linear"] == "roofline"
    assert c.describe()["terms"]["swap_out"].startswith("copy_d2h/bf16")


def test_the_shipped_cpu_calibration_is_usable():
    m, hw = get_model("llama-3.1-8b"), load_hardware("cpu")
    c = CalibratedCost(m, hw, 1, "bf16", 131072 * 16, RooflineCost(m, hw, 1, "bf16", 131072 * 16))
    terms = c.describe()["terms"]
    assert [t for t in TERMS if terms[t] == "roofline"] == [] and terms["allreduce"] == "roofline"


def test_provenance_in_the_summary_is_json_safe():
    cal = dict(CAL, provenance={"device": "toy", "date": datetime.date(2026, 11, 29), "x": float("nan")})
    c, _ = cost(cal)
    assert json.loads(json.dumps(c.describe(), allow_nan=False))["calibration"]["provenance"] == {
        "device": "toy", "date": "2026-11-29", "x": "nan"}


def test_prefetch_overlaps_the_calibrated_forward_pass():
    """The decode step of test_decode_step_by_hand (C = linear + decode, no layer overhead) with a prefetch
    over 2 layers: max(C + F / 2, F + C / 2); F as bytes / host link without a swap_in fit, else one
    fitted host -> GPU call per layer (2 x fixed + per_byte x bytes)."""
    c, _ = cost()
    b = Batch(num_seqs=3, decode_seqs=3, decode_context_tokens=100, decode_blocks=9)
    compute = c.step_time(b) - 0.001
    assert c.forward_time(b) == pytest.approx(compute, rel=1e-12)
    small = b._replace(prefetch_bytes=1e4)  # F = 1e-4 s < C (2.13 ms): first layer's fetch only
    assert c.step_time(small) == pytest.approx(0.001 + compute + 5e-5, rel=1e-12)
    large = b._replace(prefetch_bytes=1e6)  # F = 10 ms > C
    assert c.step_time(large) == pytest.approx(0.001 + 0.01 + compute / 2, rel=1e-12)
    h2d = {"fp16": {"params": {"fixed_s": 2e-5, "per_byte_s": 2e-10}, "heldout_mape": 0.03}}
    fitted, _ = cost(dict(CAL, terms=dict(CAL["terms"], swap_in="copy_h2d"),
                          kernels=dict(CAL["kernels"], copy_h2d=h2d)))
    transfer = 2 * 2e-5 + 1e6 * 2e-10  # 2.4e-4 s < C
    assert fitted.prefetch_overlap(large) == pytest.approx((compute, transfer, transfer / 2), rel=1e-12)
    assert fitted.step_time(large) == pytest.approx(0.001 + compute + transfer / 2, rel=1e-12)
    big = b._replace(prefetch_bytes=1e8)  # F = 4e-5 + 0.02 s > C
    assert fitted.step_time(big) == pytest.approx(0.001 + 4e-5 + 0.02 + compute / 2, rel=1e-12)
