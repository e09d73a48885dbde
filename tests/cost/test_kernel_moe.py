"""MoE layers of the kernel cost model (kvsim/cost/kernel_moe.py, hooked into kvsim/cost/kernels.py): the
routed experts read off a synthetic moe table by hand (a measured point, log-log between, the fastest
kernel, the balanced distribution), the roofline outside it (counted), the non-expert GEMM list, and the
shipped H200 tables for gpt-oss and DeepSeek models."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kvsim.cost.batch import Batch
from kvsim.cost.kernel_heldout import FAMILIES, held_out_errors
from kvsim.cost.kernel_moe import MoeKernels, nonexpert_gemms
from kvsim.cost.kernels import KERNEL_DEFAULTS, KernelCost
from kvsim.cost.roofline import RooflineCost
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware
from kvsim.specs.kernel_tables import TABLES, KernelTables, load_kernel_tables

MOE = dict(name="toy-moe", num_layers=3, hidden_size=256, num_attention_heads=4, num_kv_heads=2,
           head_dim=64, intermediate_size=1024, vocab_size=1000, num_params=10_000_000,
           active_params=9_000_000, attention="gqa", max_position_embeddings=4096, num_experts=8,
           experts_per_token=2, moe_intermediate_size=128, num_shared_experts=1,
           shared_expert_intermediate_size=128, moe_layers=(1, 2))
"""3 layers, the first dense; 8 experts of 256 x 128, top-2, one shared expert of the same width."""
HW = load_hardware("h200")
LAT = {1: 1e-5, 4: 2e-5, 16: 8e-5}
"""The synthetic fused-MoE layer's seconds by tokens (balanced)."""


def _row(tokens, latency, kernel="fused", dtype="bfloat16", distribution="balanced", tp=1, experts=8):
    return {"kernel": kernel, "dtype": dtype, "tokens": tokens, "hidden": 256, "inter": 128, "topk": 2,
            "experts": experts, "tp": tp, "ep": 1, "distribution": distribution, "latency_s": latency}


def _tables(rows=None) -> KernelTables:
    if rows is None:
        rows = [_row(t, s) for t, s in LAT.items()]
        rows += [_row(t, 3 * s, kernel="slower") for t, s in LAT.items()]  # the fastest kernel is taken
        rows += [_row(t, s / 2, distribution="power_law_1.2") for t, s in LAT.items()]  # not balanced
        rows += [_row(t, s, tp=2) for t, s in LAT.items()]
    moe = pd.DataFrame(rows)
    assert list(moe.columns) == list(TABLES["moe"].columns)
    return KernelTables("test", {"moe": moe}, {"project": "test tables", "commit": "0" * 40})


def _cost(tables=None, model=MOE, tp=1) -> KernelCost:
    return KernelCost(get_model(model), HW, tp, "auto", 1.0, tables or _tables())


def test_routing_factor_by_hand():
    moe = MoeKernels(get_model(MOE), 1, _tables())
    # D(T) = 8 (1 - (3/4)^T) uniform picks against min(8, 2 T) balanced ones
    assert moe.routing_factor(1) == pytest.approx(1.0, rel=1e-12)  # D = 2 = 2 x 1
    assert moe.routing_factor(2) == pytest.approx(8 * (1 - 9 / 16) / 4, rel=1e-12)  # 3.5 of 4
    assert moe.routing_factor(4) == pytest.approx(8 * (1 - 81 / 256) / 8, rel=1e-12)  # 5.47 of 8
    assert moe.routing_factor(10_000) == pytest.approx(1.0, rel=1e-12)


def test_lookup_equals_the_table_at_a_measured_point():
    moe = MoeKernels(get_model(MOE), 1, _tables())
    assert moe.why is None and moe.kernel == "fused, slower (bfloat16, balanced)"
    for tokens, seconds in LAT.items():  # 2 MoE layers
        assert moe.time(tokens) == pytest.approx(2 * seconds * moe.routing_factor(tokens), rel=1e-12)
    assert moe.time(1) == pytest.approx(2 * 1e-5, rel=1e-12)


def test_lookup_interpolates_log_log_between_measured_points():
    moe = MoeKernels(get_model(MOE), 1, _tables())
    # tokens 2 between 1 and 4: log t = log 1e-5 + (log 2 / log 4) (log 2e-5 - log 1e-5) -> 1e-5 x sqrt(2)
    assert moe.time(2) == pytest.approx(2 * 1e-5 * math.sqrt(2) * 0.875, rel=1e-12)
    # halfway (log) from 4 to 16: 2e-5 x 4^0.5
    assert moe.time(8) == pytest.approx(2 * 2e-5 * 2 * moe.routing_factor(8), rel=1e-12)
    assert moe.time(17) is None and moe.time(0) is None


def test_without_balanced_rows_the_mildest_power_law_is_taken():
    rows = [_row(t, s, distribution="power_law_1.2") for t, s in LAT.items()]
    rows += [_row(t, 2 * s, distribution="power_law_1.01") for t, s in LAT.items()]
    moe = MoeKernels(get_model(MOE), 1, _tables(rows))
    assert moe.kernel.endswith("(bfloat16, power_law_1.01)") and moe.routing_factor(4) == 1.0
    assert moe.time(4) == pytest.approx(8e-5, rel=1e-12)  # not scaled: its experts read are unknown


def test_kernel_cost_adds_the_moe_op_and_counts_its_fallbacks():
    c = _cost()
    d = c.describe()
    assert "moe" in d["ops_on_tables"] and d["kernels"]["moe"].startswith("fused")
    decode = Batch(num_seqs=4, decode_seqs=4, decode_context_tokens=400, decode_blocks=28)
    moe = 2 * 2e-5 * 8 * (1 - 81 / 256) / 8  # 2 layers x the table at 4 tokens x the routing factor
    assert c.moe_kernel_time(4) == pytest.approx(moe, rel=1e-12)
    assert c.step_time(decode) == pytest.approx(
        c.overhead_time(decode) + c.dense_linear_time(4) + moe + c.attn.decode_bytes(decode) / c.bw,
        rel=1e-12)  # no gemm or attention table here: their roofline terms
    assert c.describe()["roofline_fallback_iterations"]["moe"] == 0
    assert c.moe_kernel_time(32) == c.expert_linear_time(32)  # beyond the measured tokens: roofline
    assert c.describe()["roofline_fallback_iterations"]["moe"] == 1


def test_an_unmeasured_moe_class_falls_back_to_the_roofline_and_says_so():
    c = _cost(tp=4)  # the table has tp 1 and 2 only
    d = c.describe()
    assert "moe" not in d["ops_on_tables"] and "tp 4, ep 1" in d["ops_on_roofline"]["moe"]
    assert c.moe_kernel_time(4) == c.expert_linear_time(4)
    assert c.describe()["roofline_fallback_iterations"]["moe"] == 1


def test_dense_models_have_no_moe_op():
    d = KernelCost(get_model("llama-3-8b"), HW, 1, "auto", 1.0, _tables()).describe()
    assert "moe" not in d["roofline_fallback_iterations"] and "moe" not in d["ops_on_roofline"]


def test_nonexpert_gemms_list_attention_dense_mlp_router_and_shared_experts():
    assert nonexpert_gemms(get_model(MOE), 2) == [
        ((4 + 2 * 2) * 64 // 2, 256, 3), (256, 4 * 64 // 2, 3),  # qkv, o on every layer
        (8, 256, 2),  # the router on the 2 MoE layers
        (2 * 1024 // 2, 256, 1), (256, 1024 // 2, 1),  # the dense MLP of layer 0
        (2 * 128 // 2, 256, 2), (256, 128 // 2, 2)]  # the shared expert on the MoE layers
    assert "MLA" in nonexpert_gemms(get_model("deepseek-v3"), 8)
    assert "does not give its experts" in nonexpert_gemms(get_model(dict(
        MOE, num_experts=0, experts_per_token=0, moe_intermediate_size=0, num_shared_experts=0,
        shared_expert_intermediate_size=0, moe_layers=())), 1)


@pytest.fixture(scope="module")
def h200():
    return load_kernel_tables("h200")


def test_gpt_oss_120b_on_h200_reads_its_mxfp4_class(h200):
    c = KernelCost(get_model("gpt-oss-120b"), HW, 1, "auto", 1.0, h200)
    d = c.describe()
    assert {"linear", "moe"} <= set(d["ops_on_tables"])
    assert d["kernels"]["moe"].endswith("(w4a16_mxfp4, balanced)")
    df = h200["moe"]
    row = df[(df["dtype"] == "w4a16_mxfp4") & (df["hidden"] == 2880) & (df["experts"] == 128)
             & (df["tp"] == 1) & (df["ep"] == 1) & (df["distribution"] == "balanced") & (df["tokens"] == 4)]
    uniform = 128 * (1 - (1 - 4 / 128) ** 4)  # of the 16 experts the balanced rows read at 4 tokens
    assert c.moe_kernel_time(4) == pytest.approx(36 * row["latency_s"].min() * uniform / 16, rel=1e-9)


def test_deepseek_v3_takes_the_block_fp8_class_and_v2_lite_the_roofline(h200):
    v3 = KernelCost(get_model("deepseek-v3"), HW, 8, "auto", 1.0, h200).describe()
    assert "moe" in v3["ops_on_tables"] and "(fp8_block, balanced)" in v3["kernels"]["moe"]
    lite = KernelCost(get_model("deepseek-v2-lite"), HW, 1, "auto", 1.0, h200).describe()
    assert "hidden 2048, inter 1408, top-6 of 64" in lite["ops_on_roofline"]["moe"]


def test_h200_balanced_moe_held_out_as_documented(h200):
    """docs/cost_model.md, the MoE section: every 5th token count held out of the balanced rows."""
    keys, axes = FAMILIES["moe"]
    df = h200["moe"]
    err, unreached = held_out_errors(df[df["distribution"] == "balanced"], keys, axes)
    assert (len(err), unreached) == (3010, 0)
    assert (round(100 * float(np.median(err)), 1), round(100 * float(np.quantile(err, 0.9)), 1),
            round(100 * float(err.mean()), 1)) == (3.0, 14.7, 6.3)


DOC_TABLE = [  # docs/cost_model.md, Mixture of experts: model, tp, b, D(b), before, roofline, kernels, MoE
    ("gpt-oss-120b", 1, 1, 4.0, 18.20, 3.96, 5.84, 2.19),
    ("gpt-oss-120b", 1, 8, 28.7, 18.40, 8.08, 9.94, 6.10),
    ("gpt-oss-120b", 1, 64, 111.2, 19.99, 23.20, 26.57, 20.78),
    ("deepseek-v3", 8, 1, 8.0, 26.39, 6.98, 11.58, 3.20),
    ("deepseek-v3", 8, 8, 57.4, 26.75, 11.21, 14.95, 5.39),
    ("deepseek-v3", 8, 64, 222.4, 29.67, 27.04, 27.01, 13.45),
]


@pytest.mark.parametrize("row", DOC_TABLE, ids=[f"{r[0]}-b{r[2]}" for r in DOC_TABLE])
def test_the_documented_decode_steps(row, h200):
    name, tp, b, distinct, before, after, kernels, moe_op = row
    m = get_model(name)
    rl = RooflineCost(m, HW, tp, "auto", 1.0)
    kc = KernelCost(m, HW, tp, "auto", 1.0, h200, **(rl.tunables() | KERNEL_DEFAULTS))
    batch = Batch(num_seqs=b, decode_seqs=b, decode_context_tokens=b * 2048, decode_blocks=b * 128)
    got_after = rl.step_time(batch)
    rl.moe = False  # every expert streamed: the roofline before expert routing
    got = (round(m.expected_experts(b), 1), round(1e3 * rl.step_time(batch), 2), round(1e3 * got_after, 2),
           round(1e3 * kc.step_time(batch), 2), round(1e3 * kc.moe_kernel_time(b), 2))
    assert got == (distinct, before, after, kernels, moe_op)
