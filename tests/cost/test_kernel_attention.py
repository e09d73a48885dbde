"""KernelAttention (kvsim/cost/kernel_attention.py): each layer kind's op read off synthetic tables by
hand at measured points, the per-kind sum on a hand-built mixed model, the roofline per kind where no
table fits (counted, with its reason), ragged batches, and the shipped H200 MLA and sliding tables."""

from __future__ import annotations

import pandas as pd
import pytest

from kvsim.cost.attention import AttentionWork
from kvsim.cost.batch import Batch
from kvsim.cost.kernel_attention import (
    MIN_CORE_SHARE,
    KernelAttention,
    KindRoofline,
    whole_prompt,
    windowed_prompt,
)
from kvsim.cost.kernel_grid import fastest_grid
from kvsim.cost.kernels import KERNEL_DEFAULTS, KernelCost
from kvsim.specs.catalog import get_model
from kvsim.specs.compute import window_pairs
from kvsim.specs.hardware import load_hardware
from kvsim.specs.kernel_tables import TABLES, KernelTables, load_kernel_tables

BW, RATE = 4e12, 5e14
# 2 full + 2 sliding (window 128) + 2 Gated-DeltaNet layers; 8 query heads, 1 KV head of 128
MIX = get_model({
    "base": "llama-3-8b", "name": "mix", "num_layers": 6, "hidden_size": 1024, "num_attention_heads": 8,
    "num_kv_heads": 1, "head_dim": 128, "intermediate_size": 2048, "vocab_size": 1000, "num_params": 10**8,
    "active_params": 10**8, "layer_types": ["full", "sliding", "state"] * 2, "sliding_window": 128,
    "ssm_kind": "gdn", "ssm_num_heads": 4, "ssm_head_dim": 128, "ssm_state_size": 128, "ssm_groups": 2,
    "ssm_conv_kernel": 4})
LITE = get_model("deepseek-v2-lite")  # 27 MLA layers, 16 heads, kv_lora_rank 512, rope 64, head_dim 128


def _dec(b, c, window):  # one layer's decode time in the synthetic tables
    return 1e-6 * (2 if window else 1) * b * (1 + c / 100)


def _pre(b, t, window):
    return 1e-6 * (3 if window else 1) * b * t


def _attention_tables(windows=(0, 128)) -> dict[str, pd.DataFrame]:
    common = {"q_heads": 8, "kv_heads": 1, "head_dim": 128, "dtype": "bfloat16", "kv_dtype": "bfloat16"}
    decode = pd.DataFrame([{"kernel": "fa", "batch": b, "context": c, "query": 1, **common, "window": w,
                            "latency_s": _dec(b, c, w)}
                           for w in windows for b in (1, 2, 64) for c in (1, 64, 127, 4096)])
    prefill = pd.DataFrame([{"kernel": "fa", "batch": b, "tokens": t, "prefix": 0, **common, "window": w,
                             "latency_s": _pre(b, t, w)}
                            for w in windows for b in (1, 8) for t in (1, 2048)])
    return {"decode_attention": decode, "prefill_attention": prefill}


def _conv(b, s):
    return 1e-6 * (1 + b * s / 1000)


def _rule(b, s):
    return 2e-6 * (1 + b * s / 500)


def _gdn_table(k_heads=2, v_heads=4) -> pd.DataFrame:
    shape = {"d_conv": 4, "k_heads": k_heads, "k_dim": 128, "v_heads": v_heads, "v_dim": 128}
    rows = []
    for model, d_model, skew in (("A", 1024, 0.9), ("B", 2048, 1.1)):  # two models: the median is the mean
        for b in (1, 2, 8, 64):
            for kernel, f in (("causal_conv1d_update", _conv), ("fused_recurrent_gdn", _rule)):
                rows.append({"kernel": kernel, "phase": "generation", "model": model, "batch": b,
                             "seq_len": 1, "tokens": b, "d_model": d_model, **shape,
                             "latency_s": skew * f(b, 1)})
            for s in (16, 2048):
                for kernel, f in (("causal_conv1d_fn", _conv), ("chunk_gated_delta_rule", _rule)):
                    rows.append({"kernel": kernel, "phase": "context", "model": model, "batch": b,
                                 "seq_len": s, "tokens": b * s, "d_model": d_model, **shape,
                                 "latency_s": skew * f(b, s)})
    return pd.DataFrame(rows)


def _tables(**tables) -> KernelTables:
    for name, df in tables.items():
        assert list(df.columns) == list(TABLES[name].columns), name
    return KernelTables("test", tables, {"project": "test tables", "commit": "0" * 40})


def _attention(model, tables, tp=1, kv="auto") -> KernelAttention:
    return KernelAttention(model, tp, kv, tables, AttentionWork(model, kv, tp), BW, RATE)


def _decode_batch(contexts, cap=127) -> Batch:
    return Batch(num_seqs=len(contexts), decode_seqs=len(contexts), decode_context_tokens=sum(contexts),
                 decode_window_tokens=(sum(min(c, cap) for c in contexts),))


def test_each_kind_of_a_mixed_model_reads_its_table_and_the_decode_is_their_sum_by_hand():
    a = _attention(MIX, _tables(**_attention_tables(), gdn=_gdn_table()))
    assert a.names == ("decode_attention", "decode_attention.sliding", "decode_attention.state",
                       "prefill_attention", "prefill_attention.sliding", "prefill_attention.state")
    assert a.why == {}
    b = _decode_batch([4096] * 64)  # sliding layers read min(4096, 127): a measured context
    gdn = (_conv(64, 1) + _rule(64, 1))  # generation: conv update + recurrent update, models' median
    assert a.decode(b) == pytest.approx(2 * _dec(64, 4096, 0) + 2 * _dec(64, 127, 128) + 2 * gdn, rel=1e-9)
    assert {op.name: op.fallbacks for op in a.decode_ops} == dict.fromkeys(
        ("decode_attention", "decode_attention.sliding", "decode_attention.state"), 0)
    assert a.kernels["decode_attention.sliding"] == "fa (window 128 rows)"
    assert a.kernels["decode_attention.state"] == "causal_conv1d_update + fused_recurrent_gdn"


def test_prefill_per_kind_by_hand():
    a = _attention(MIX, _tables(**_attention_tables(), gdn=_gdn_table()))
    # 8 whole prompts of 2048 tokens: causal pairs -> L = 2048; window pairs -> L = 2048; tokens / seqs 2048
    wp = 8 * window_pairs(0, 2048, 128)
    b = Batch(num_seqs=8, prefill_seqs=8, prefill_tokens=8 * 2048, prefill_attn_pairs=8 * 2048 * 2049 / 2,
              prefill_window_pairs=(wp,))
    assert windowed_prompt(wp / 8, 128) == pytest.approx(2048)
    want = 2 * _pre(8, 2048, 0) + 2 * _pre(8, 2048, 128) + 2 * (_conv(8, 2048) + _rule(8, 2048))
    assert a.prefill(b) == pytest.approx(want, rel=1e-9)


def test_sliding_layers_without_window_rows_read_the_full_rows_at_the_capped_context():
    a = _attention(MIX, _tables(**_attention_tables(windows=(0,)), gdn=_gdn_table()))
    b = _decode_batch([4096] * 2)
    sliding = next(op for op in a.decode_ops if op.name == "decode_attention.sliding")
    assert sliding.time(b) == pytest.approx(2 * _dec(2, 127, 0), rel=1e-9)
    assert a.kernels["decode_attention.sliding"] == "fa (full-attention rows at min(context, 127))"
    # prefill on full rows: the whole prompt with as many causal pairs as the window pairs
    assert whole_prompt(2048 * 2049 / 2) == pytest.approx(2048)


def test_a_ragged_batch_reads_each_sum_at_its_mean():
    a = _attention(MIX, _tables(**_attention_tables(), gdn=_gdn_table()))
    # contexts 1 and 8191: full layers the mean 4096, sliding layers the mean of min(c, 127) = 64
    b = _decode_batch([1, 8191])
    by_op = {op.name: op.time(b) for op in a.decode_ops}
    assert by_op["decode_attention"] == pytest.approx(2 * _dec(2, 4096, 0), rel=1e-9)
    assert by_op["decode_attention.sliding"] == pytest.approx(2 * _dec(2, 64, 128), rel=1e-9)
    assert by_op["decode_attention.state"] == pytest.approx(2 * (_conv(2, 1) + _rule(2, 1)), rel=1e-9)


def test_outside_a_grid_one_kind_takes_its_own_roofline_and_is_counted():
    a = _attention(MIX, _tables(**_attention_tables(), gdn=_gdn_table()))
    b = _decode_batch([100] * 100)  # batch 100: beyond the attention grids (64) and the gdn grid (64)
    roof = {op.name: op.roofline(b) for op in a.decode_ops}
    # full layers: the per-op roofline fitted on the table, seconds per token read x tokens; by hand, the
    # top decile of the grid's batch x context (2 x 4096 and 64 x 4096) runs at 1e-6 (1 + 40.96) / 4096 s
    tau = 1e-6 * (1 + 4096 / 100) / 4096
    full = 2 * tau * 100 * 100
    others = roof["decode_attention.sliding"] + roof["decode_attention.state"]
    assert a.decode(b) == pytest.approx(full + others)
    assert a.fallback_iterations({"linear": 3, "decode_attention": 0, "prefill_attention": 0}) == {
        "linear": 3, "decode_attention": 0, "decode_attention.sliding": 1, "decode_attention.state": 1,
        "prefill_attention": 0, "prefill_attention.sliding": 0, "prefill_attention.state": 0}
    assert a.fitted_iterations() == {"decode_attention": 1, "prefill_attention": 0}
    # below the grid's first batch or context there is no fitted term: the datasheet roofline
    assert a.decode_ops[0].beyond(_decode_batch([0.5])) is None
    # the per-kind roofline terms add up to the model's whole roofline
    work = AttentionWork(MIX, "auto", 1)
    mixed = b._replace(prefill_seqs=1, prefill_tokens=300, prefill_attn_pairs=300 * 301 / 2,
                       prefill_window_pairs=(window_pairs(0, 300, 128),))
    per_kind = sum(KindRoofline(MIX, g, (127,), 1, BW, RATE).decode(mixed)
                   + KindRoofline(MIX, g, (127,), 1, BW, RATE).prefill(mixed) for g in MIX.layer_groups())
    assert per_kind == pytest.approx(work.decode_bytes(mixed) / BW + work.prefill_flops(mixed) / RATE,
                                     rel=1e-12)


def test_kinds_without_a_table_say_why():
    a = _attention(MIX, _tables(**_attention_tables(), gdn=_gdn_table(k_heads=1)))
    assert a.why["decode_attention.state"] == (
        "no gdn generation rows of 2 key heads x 128, 4 value heads x 128, conv 4 per GPU")
    mamba = get_model("nemotron-h-8b")
    why = _attention(mamba, _tables(**_attention_tables())).why
    assert why["prefill_attention.state"].startswith("no kernel table for mamba2 state layers")
    v4 = _attention(get_model("deepseek-v4-flash"), _tables(**_attention_tables()), tp=4).why
    assert set(v4) == {"decode_attention.compressed", "prefill_attention.compressed"}
    mla = _attention(LITE, _tables(**_attention_tables())).why
    assert mla["decode_attention.mla"] == "no mla_decode table for KV dtype auto"


# ---- MLA: the module less its projection GEMMs (DeepSeek-V3's shapes)
PROJ = ((1536 + 512 + 64, 7168), (16 * 192, 1536), (7168, 16 * 128))  # q_a/kv_a, q_b, o_proj at 16 heads


def _gemm_s(m, n, k):
    return 1e-6 + 2 * m * n * k / 500e12


def _mla_tables(module_decode, module_prefill) -> KernelTables:
    ms = (1, 16, 64, 128, 2048, 16384)
    gemm = pd.DataFrame([{"kernel": "k", "dtype": "bfloat16", "m": m, "n": n, "k": k,
                          "latency_s": _gemm_s(m, n, k)}
                         for m in ms for n in (2112, 3072, 7168) for k in (1536, 2048, 7168)])
    key = {"model": "deepseek-ai/DeepSeek-V3", "dtype": "bfloat16", "kv_dtype": "bfloat16",
           "gemm_dtype": "bfloat16", "heads": 16}
    dec = pd.DataFrame([{"kernel": "FLASH_ATTN_MLA", **key, "batch": b, "query": 1, "context": c, "tp": 1,
                         "latency_s": module_decode(b, c)} for b in (1, 64) for c in (2, 4096)])
    pre = pd.DataFrame([{"kernel": "FLASH_ATTN", **key, "batch": b, "tokens": t, "prefix": 0, "tp": 1,
                         "latency_s": module_prefill(b, t)} for b in (1, 8) for t in (16, 2048)])
    return _tables(gemm=gemm, mla_decode=dec, mla_prefill=pre)


def _proj(m):
    return sum(_gemm_s(m, n, k) for n, k in PROJ)


def test_mla_reads_the_module_less_its_projection_gemms_by_hand():
    tables = _mla_tables(lambda b, c: _proj(b) + 5e-5 * (1 + b * c / 1e4),
                         lambda b, t: _proj(b * t) + 4e-5 * b * t / 100)
    a = _attention(LITE, tables)
    assert a.names == ("decode_attention.mla", "prefill_attention.mla") and a.why == {}
    b = Batch(num_seqs=64, decode_seqs=64, decode_context_tokens=64 * 4096)
    assert a.decode(b) == pytest.approx(27 * 5e-5 * (1 + 64 * 4096 / 1e4), rel=1e-9)
    p = Batch(num_seqs=8, prefill_seqs=8, prefill_tokens=8 * 2048, prefill_attn_pairs=8 * 2048 * 2049 / 2)
    assert a.prefill(p) == pytest.approx(27 * 4e-5 * 8 * 2048 / 100, rel=1e-9)
    assert a.kernels["decode_attention.mla"].startswith("FLASH_ATTN_MLA module, 16 heads, less its")


def test_an_mla_core_below_the_floor_is_raised_to_it():
    tables = _mla_tables(lambda b, c: 0.5 * _proj(b), lambda b, t: 2 * _proj(b * t))  # GEMMs > module
    a = _attention(LITE, tables)
    b = Batch(num_seqs=1, decode_seqs=1, decode_context_tokens=2)
    assert a.decode(b) == pytest.approx(27 * MIN_CORE_SHARE * 0.5 * _proj(1), rel=1e-9)


def test_mla_of_other_latent_shapes_is_on_the_roofline():
    other = get_model({"base": "deepseek-v2-lite", "name": "mla-256", "kv_lora_rank": 256})
    tables = _mla_tables(lambda b, c: 1e-3, lambda b, t: 1e-3)
    why = _attention(other, tables).why
    assert why["decode_attention.mla"].startswith("no MLA table of kv_lora_rank 256")


# ---- the shipped H200 tables
def test_deepseek_v3_mla_on_h200_equals_the_module_less_its_gemms_at_a_measured_point():
    tables = load_kernel_tables("h200")
    model = get_model("deepseek-v3")
    cost = KernelCost(model, load_hardware("h200"), 8, "auto", 1.0, tables, **KERNEL_DEFAULTS)
    d = cost.describe()
    assert {"decode_attention.mla", "prefill_attention.mla"} <= set(d["ops_on_tables"])
    row = tables["mla_decode"]
    row = row[(row["heads"] == 16) & (row["kv_dtype"] == "bfloat16") & (row["gemm_dtype"] == "bfloat16")
              & (row["batch"] == 32) & (row["context"] == 4096)]
    gemm = tables["gemm"]
    grid = fastest_grid(gemm[gemm["dtype"] == "bfloat16"], ("m", "n", "k"))
    proj = sum(grid(32, n, k) for n, k in PROJ)
    b = Batch(num_seqs=32, decode_seqs=32, decode_context_tokens=32 * 4096)
    core = float(row["latency_s"].iloc[0]) - proj
    assert cost.decode_kernel_time(b) == pytest.approx(61 * core, rel=1e-9)
    assert d["roofline_fallback_iterations"]["decode_attention.mla"] == 0


def test_gpt_oss_on_h200_reads_the_window_rows_and_the_full_rows():
    cost = KernelCost(get_model("gpt-oss-20b"), load_hardware("h200"), 1, "auto", 1.0,
                      load_kernel_tables("h200"), **KERNEL_DEFAULTS)
    d = cost.describe()
    assert d["kernels"]["decode_attention.sliding"] == "vllm_flash_attn_fa3 (window 128 rows)"
    assert {"decode_attention", "decode_attention.sliding", "prefill_attention",
            "prefill_attention.sliding"} <= set(d["ops_on_tables"])
