"""The MoE layers under expert parallelism (kvsim/cost/expert_parallel.py), by hand on a toy model and the
h200 profile: the links' collectives, the nccl table read log-log, the dispatch / combine volumes of both
backend families, the busiest rank's experts from a synthetic moe table at ep = EP and from the roofline,
the totals describe() reports, and the hook into the roofline's linear term."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from kvsim.cost.expert_parallel import COLLECTIVE_LATENCY_S, ExpertParallel, ExpertRoofline, Links
from kvsim.cost.roofline import RooflineCost
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware
from kvsim.specs.kernel_tables import TABLES, KernelTables

TOY = dict(name="toy-ep", num_layers=2, hidden_size=256, num_attention_heads=4, num_kv_heads=2, head_dim=64,
           intermediate_size=1024, vocab_size=1000, num_params=10_000_000, active_params=8_820_352,
           attention="gqa", max_position_embeddings=4096, num_experts=8, experts_per_token=2,
           moe_intermediate_size=128)
"""2 layers, both MoE; 8 experts, top-2; one expert = (10,000,000 - 8,820,352) / (2 layers x (8 - 2)) =
98,304 = 3 x 256 x 128 parameters (bf16: 196,608 bytes)."""
HW = load_hardware("h200")  # NVLink 450 GB/s, NIC 50 GB/s, 8 GPUs a domain; 4.8 TB/s x 0.85 = 4.08e12 B/s
EXPERT_BYTES = 196_608
LAT = {4: 2e-5, 16: 8e-5, 64: 3.2e-4}
"""The synthetic fused-MoE layer's seconds at ep 4 by tokens entering the EP group (balanced)."""


def _roofline(model=None, tp=1) -> RooflineCost:
    return RooflineCost(model or get_model(TOY), HW, tp, "auto", 1.0)


def _tables(nccl=True, moe=True) -> KernelTables:
    tables = {}
    if nccl:
        tables["nccl"] = pd.DataFrame([
            {"kernel": "NCCL", "op": "alltoall", "dtype": "half", "gpus": 4, "elements": n, "latency_s": s}
            for n, s in ((1000, 1e-5), (4000, 4e-5))], columns=list(TABLES["nccl"].columns))
    if moe:
        tables["moe"] = pd.DataFrame([
            {"kernel": "fused", "dtype": "bfloat16", "tokens": t, "hidden": 256, "inter": 128, "topk": 2,
             "experts": 8, "tp": 1, "ep": 4, "distribution": "balanced", "latency_s": s}
            for t, s in LAT.items()], columns=list(TABLES["moe"].columns))
    return KernelTables("test", tables, {"project": "test tables", "commit": "0" * 40})


def _ep(tp=1, dp=4, backend="allgather_reducescatter", load=1.0, tables=None, model=None) -> ExpertParallel:
    model = get_model(model or TOY)
    return ExpertParallel(model, HW, tp, dp, backend, load, tables, _roofline(model))


def test_links_by_hand():
    links = Links(HW)
    # alltoall of 8 MB a GPU over the 8 GPUs of one domain: 7/8 of it over NVLink
    assert links.seconds("alltoall", 8e6, 8) == pytest.approx(8e6 * 7 / 8 / 450e9 + 8e-6, rel=1e-12)
    # over 16 GPUs (two domains): 7/16 over NVLink, 8/16 over the NIC, the NIC sets the time
    assert links.seconds("alltoall", 16e6, 16) == pytest.approx(16e6 * 8 / 16 / 50e9 + 8e-6, rel=1e-12)
    # a ring: (n - 1) / n of the buffer over NVLink within a domain, the NIC across
    assert links.seconds("all_gather", 4e6, 4) == pytest.approx(4e6 * 3 / 4 / 450e9 + 8e-6, rel=1e-12)
    assert links.seconds("reduce_scatter", 16e6, 16) == pytest.approx(16e6 * 15 / 16 / 50e9 + 8e-6, rel=1e-12)
    assert COLLECTIVE_LATENCY_S == 8e-6


def test_gather_backend_moves_every_dp_ranks_tokens_and_nothing_at_dp_1():
    ep = _ep(dp=4)
    # 10 tokens on each of 4 DP ranks: 40 x 256 bf16 values = 20,480 bytes all-gathered, as many
    # reduce-scattered, over the 4 GPUs (NVLink)
    one = 20_480 * 3 / 4 / 450e9 + 8e-6
    assert ep.layer_comm_time(10) == pytest.approx(2 * one, rel=1e-12)
    assert _ep(tp=4, dp=1).layer_comm_time(10) == 0.0  # TP-only EP: the TP all-reduce sums the outputs


def test_alltoall_backend_sends_topk_copies_at_the_dispatch_dtype():
    ep = _ep(tp=2, dp=2, backend="deepep_low_latency")  # EP 4
    # 10 tokens / TP 2 = 5 tokens a GPU x top-2 x 256 values = 2,560 values; bf16 model: 2 bytes both ways
    one = 5_120 * 3 / 4 / 450e9 + 8e-6
    assert ep.dispatch_bytes == 2 and ep.layer_comm_time(10) == pytest.approx(2 * one, rel=1e-12)
    fp8 = _ep(tp=2, dp=2, backend="deepep_low_latency", model={**TOY, "weight_dtype": "fp8"})
    assert fp8.dispatch_bytes == 1  # DeepEP quantizes before the dispatch; the combine stays bf16
    assert fp8.layer_comm_time(10) == pytest.approx(
        (2_560 * 3 / 4 / 450e9 + 8e-6) + (5_120 * 3 / 4 / 450e9 + 8e-6), rel=1e-12)
    assert _ep(tp=2, dp=2, backend="pplx", model={**TOY, "weight_dtype": "fp8"}).dispatch_bytes == 2


def test_nccl_table_log_log_inside_links_outside():
    ep = _ep(tp=1, dp=4, backend="deepep_high_throughput", tables=_tables(moe=False))
    # 4,000 bytes = 2,000 half values: between the measured 1,000 (10 us) and 4,000 (40 us), log-log
    assert ep.collective_time("alltoall", 4_000, 4) == pytest.approx(2e-5, rel=1e-9)
    assert ep.collective_time("alltoall", 16_000, 4) == pytest.approx(16_000 * 3 / 4 / 450e9 + 8e-6)
    assert ep.collective_time("alltoall", 4_000, 8) == pytest.approx(4_000 * 7 / 8 / 450e9 + 8e-6)
    assert ep.describe()["collectives"] == ["alltoall over 4 GPUs: links", "alltoall over 4 GPUs: nccl table",
                                            "alltoall over 8 GPUs: links"]


def test_expert_roofline_by_hand():
    r = ExpertRoofline(get_model(TOY), 4, _roofline())
    # 4 routed tokens: the rank holds 2 experts and reads 2 (1 - (3/4)^4) = 1.3671875 of them, runs 4 x 2 / 4
    # = 2 token-expert pairs; memory: 2 layers x 1.3671875 x 196,608 bytes / 4.08e12 B/s = 131.8 ns beats
    # compute (2 layers x 2 x 98,304 x 2 / (989.5 TFLOP/s x 0.75 x 1.46 / 65.46) = 47 ns)
    read = 2 * (1 - 0.75 ** 4)
    mem = 2 * read * EXPERT_BYTES / 4.08e12
    per = 2 / read
    comp = 2 * 2 * 98_304 * 2 / (989.5e12 * 0.75 * per / (per + 64))
    assert mem > comp and r.time(4) == pytest.approx(mem, rel=1e-12)
    assert r.time(0) == 0.0


def test_experts_from_the_moe_table_at_ep_and_the_load_factor():
    ep = _ep(dp=4, tables=_tables(nccl=False))
    assert ep.moe is not None and not ep.moe.why
    # 1 token per DP rank x 4 ranks = 4 tokens enter the layer: the ep-4 row at 4 tokens, 2 layers, x the
    # routing factor D(4) / min(8, 4 x 2) = 8 (1 - (3/4)^4) / 8
    t, on_table = ep.expert_time(1)
    assert on_table and t == pytest.approx(2 * 2e-5 * (1 - 0.75 ** 4), rel=1e-9)
    # load factor 2: the busiest rank does the work of 8 tokens' balanced share: log-log midway between 4
    # and 16 tokens (sqrt(2e-5 x 8e-5) = 4e-5), routing factor 8 (1 - (3/4)^8) / 8
    hot = _ep(dp=4, load=2.0, tables=_tables(nccl=False))
    assert hot.expert_time(1)[0] == pytest.approx(2 * 4e-5 * (1 - 0.75 ** 8), rel=1e-9)
    # 100 tokens x 4 = 400, beyond the measured 64: the roofline's term on the rank
    t, on_table = ep.expert_time(100)
    assert not on_table and t == pytest.approx(ep.roofline.time(400), rel=1e-12)


def test_time_adds_the_terms_and_describe_totals_them():
    ep = _ep(dp=4)
    comm = 2 * ep.layer_comm_time(10)  # two MoE layers
    experts = ep.roofline.time(40)
    assert ep.time(10) == pytest.approx(comm + experts, rel=1e-12)
    ep.time(10)
    assert ep.time(0) == 0.0  # an empty step is not a step
    d = ep.describe()
    assert (d["steps"], d["expert_table_steps"], d["experts_per_gpu"]) == (2, 0, 2)
    assert d["expert_parallel_size"] == 4
    assert d["alltoall_s_total"] == pytest.approx(2 * comm)
    assert d["expert_s_total"] == pytest.approx(2 * experts)
    assert d["alltoall_s_per_step"] == pytest.approx(comm)
    assert d["expert_s_per_step"] == pytest.approx(experts)
    assert d["experts"].startswith("roofline")


def test_roofline_linear_term_takes_the_expert_parallel_time():
    cost = _roofline()
    plain = cost.linear_time(10)
    cost.expert_parallel = ep = _ep(dp=4)
    assert cost.linear_time(10) == pytest.approx(cost.dense_linear_time(10) + ep.time(10), rel=1e-12)
    assert cost.linear_time(10) != plain
    assert cost.describe()["expert_parallel"]["expert_parallel_size"] == 4
    assert math.isfinite(cost.linear_time(1))
