"""KernelCost (kvsim/cost/kernels.py): each op read off synthetic tables by hand, the roofline where a
table does not reach (counted), the factory's refusal without tables, and a run on the shipped H200
tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from kvsim.cost.batch import Batch
from kvsim.cost.kernels import KernelCost
from kvsim.cost.roofline import RooflineCost
from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.scenario import load_scenario
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware
from kvsim.specs.kernel_tables import TABLES, KernelTables

MODEL = get_model("llama-3.1-8b")  # 32 layers, hidden 4096, 32 / 8 heads of 128, intermediate 14336
HW = load_hardware("h200")
GEMMS = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (64128, 4096)]  # qkv o gate_up down lm/2


def _gemm_s(m, n, k):
    return 1e-6 + 2 * m * n * k / 500e12


def _tables() -> KernelTables:
    gemm = pd.DataFrame([{"kernel": "k", "dtype": "bfloat16", "m": m, "n": n, "k": k,
                          "latency_s": _gemm_s(m, n, k)}
                         for m in (1, 1024) for n in sorted({n for n, _ in GEMMS} | {65536})
                         for k in sorted({k for _, k in GEMMS})])
    decode = pd.DataFrame([{"kernel": "fa", "batch": b, "context": c, "query": 1, "q_heads": 32,
                            "kv_heads": 8, "head_dim": 128, "dtype": "bfloat16", "kv_dtype": "bfloat16",
                            "window": 0, "latency_s": 2e-6 * b * (1 + c / 1000)}
                           for b in (1, 64) for c in (1, 4096)])
    prefill = pd.DataFrame([{"kernel": "fa", "batch": b, "tokens": t, "prefix": 0, "q_heads": 32,
                             "kv_heads": 8, "head_dim": 128, "dtype": "bfloat16", "kv_dtype": "bfloat16",
                             "window": 0, "latency_s": 3e-6 * b * t} for b in (1, 8) for t in (1, 2048)])
    tables = {"gemm": gemm, "decode_attention": decode, "prefill_attention": prefill}
    for name, df in tables.items():
        assert list(df.columns) == list(TABLES[name].columns)
    return KernelTables("test", tables, {"project": "test tables", "commit": "0" * 40})


def _cost(tables=None) -> KernelCost:
    return KernelCost(MODEL, HW, 1, "auto", 1.0, tables or _tables())


def test_linear_layers_are_the_sum_of_the_layer_gemms_and_the_lm_head_by_hand():
    c = _cost()
    per_layer = sum(_gemm_s(1024, n, k) for n, k in GEMMS[:4])
    lm_head = 2 * _gemm_s(1, 64128, 4096)  # vocab 128256 > the grid's 65536: two GEMMs of 64128 columns
    got = c.linear_kernel_time(1024, 1)
    # tokens 1024 is a measured m (the sum is exact there); the lm_head runs at m = 1 sequence
    assert got == pytest.approx(32 * per_layer + lm_head, rel=1e-12)
    assert c.describe()["ops_on_tables"] == ["decode_attention", "linear", "prefill_attention"]


def test_decode_attention_at_the_mean_context_by_hand():
    c = _cost()
    b = Batch(num_seqs=64, decode_seqs=64, decode_context_tokens=64 * 4096)
    assert c.decode_kernel_time(b) == pytest.approx(32 * 2e-6 * 64 * (1 + 4096 / 1000))
    # a ragged batch of the same sequences and total context costs the same
    assert c.decode_kernel_time(b._replace(decode_context_tokens=32 * 1 + 32 * 8191)) == pytest.approx(
        c.decode_kernel_time(b._replace(decode_context_tokens=64 * 4096)))


def test_prefill_attention_maps_pairs_to_a_whole_prompt_by_hand():
    c = _cost()
    # one sequence of a 2048-token prompt: pairs 2048 x 2049 / 2 -> L = 2048, a measured point
    b = Batch(num_seqs=1, prefill_seqs=1, prefill_tokens=2048, prefill_attn_pairs=2048 * 2049 / 2)
    assert c.prefill_kernel_time(b) == pytest.approx(32 * 3e-6 * 2048)


def test_outside_the_tables_an_op_takes_the_roofline_and_is_counted():
    c = _cost()
    roof = RooflineCost(MODEL, HW, 1, "auto", 1.0)
    assert c.linear_kernel_time(4096, 1) == pytest.approx(roof.linear_time(4096))  # m beyond 1024
    b = Batch(num_seqs=100, decode_seqs=100, decode_context_tokens=100 * 50)  # batch beyond 64
    # decode attention beyond its grid: the per-op roofline fitted on the table (seconds per KV token of
    # its top-decile points: 64 x 4096 here), not the datasheet's
    tau = 2e-6 * 64 * (1 + 4096 / 1000) / (64 * 4096)
    assert c.decode_kernel_time(b) == pytest.approx(32 * tau * 100 * 50)
    c.linear_kernel_time(4096, 1)  # (memoised: still counted)
    d = c.describe()
    assert d["roofline_fallback_iterations"] == {"allreduce": 0, "decode_attention": 0, "linear": 2,
                                                 "prefill_attention": 0}
    assert d["fitted_outside_grid_iterations"] == {"decode_attention": 1, "prefill_attention": 0}


def test_a_shape_class_not_measured_is_on_the_roofline_and_says_why():
    t = _tables()
    t.tables["decode_attention"]["q_heads"] = 16
    d = _cost(t).describe()
    assert "decode_attention" not in d["ops_on_tables"]
    assert d["ops_on_roofline"]["decode_attention"].startswith(
        "no measured shape class of 32 query heads, 8 KV")


def test_more_kv_heads_than_measured_scale_the_decode_time():
    t = _tables()
    t.tables["decode_attention"]["kv_heads"] = 4  # the model has 8: twice the KV to read
    c = _cost(t)
    b = Batch(num_seqs=64, decode_seqs=64, decode_context_tokens=64 * 4096)
    assert c.decode_kernel_time(b) == pytest.approx(2 * 32 * 2e-6 * 64 * (1 + 4096 / 1000))
    assert c.describe()["kernels"]["decode_attention"] == "fa (measured at 4 KV heads, x2 for 8)"


def test_factory_refuses_a_profile_without_tables(tmp_path):
    with pytest.raises(KvsimError) as e:
        sim = Simulation(load_scenario("workloads/chat.yaml", ["cost.model=kernels", "hardware=mi300x",
                                                               "simulation.requests=10"]))
        sim.run()
    assert "cost.model: kernels: hardware profile 'mi300x' has no kernel tables" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_run_on_the_shipped_h200_tables_is_deterministic_and_reports_its_ops():
    args = ["cost.model=kernels", "hardware=h200", "simulation.requests=60"]
    a = Simulation(load_scenario("workloads/chat.yaml", args)).run()
    b = Simulation(load_scenario("workloads/chat.yaml", args)).run()
    assert a.requests.equals(b.requests)
    d = a.meta["cost_model"]
    assert d["model"] == "kernels" and d["kernel_tables"]["profile"] == "h200"
    assert d["ops_on_tables"] == ["decode_attention", "linear", "prefill_attention"]
    assert d["kernels"]["decode_attention"] == "vllm_flash_attn_fa3"
    assert math.isfinite(a.requests["ttft_s"].mean())


def test_overhead_defaults_are_the_models_own_unless_the_scenario_sets_them():
    base = ["cost.model=kernels", "hardware=h200", "simulation.requests=5"]
    d = Simulation(load_scenario("workloads/chat.yaml", base)).run().meta["cost_model"]
    assert (d["iteration_overhead_s"], d["layer_overhead_s"]) == (4.12e-7, 5.46e-5)
    d = Simulation(load_scenario("workloads/chat.yaml", base + ["cost.layer_overhead_s=1e-4"])
                   ).run().meta["cost_model"]
    assert d["layer_overhead_s"] == 1e-4


@pytest.mark.parametrize("fitted, band", [(True, 0.03), (False, 0.06)])
def test_published_latency_runs(fitted, band):
    """vLLM CI latency runs (kvsim/cost/published_runs.yaml), with the overheads fitted on all six
    (tests/cost/test_overhead_fit.py): the H100 / H200 ones within 3%, the A100 ones within 6% (the
    roofline's: 5.6% and 10.2%)."""
    from kvsim.cost.published import load_published_runs, predict_ms

    cases = [c for c in load_published_runs() if c["kind"] == "latency" and c["fitted"] == fitted]
    assert len(cases) == (4 if fitted else 2)
    for c in cases:
        ms = predict_ms(c, "kernels")  # with KERNEL_DEFAULTS
        assert abs(ms / c["published_ms"] - 1) <= band, (c["case"], c["hardware"], ms)


def test_a_curve_interpolates_as_numpy_interp_bit_for_bit():
    """_Curve reads its log-log line on plain floats: numpy.interp's values, knots and ends included."""
    import numpy as np

    from kvsim.cost.kernels import _Curve

    rng = np.random.default_rng(3)
    for _ in range(40):
        m = np.unique(rng.choice([1, 2, 3, 8, 16, 100, 512, 1000, 4096, 8192], size=int(rng.integers(2, 8))))
        if len(m) < 2:
            continue
        m = m.astype(float)
        seconds = np.exp(rng.uniform(-12, -2, len(m)))
        curve = _Curve(m, seconds)
        for x in [*m.tolist(), *rng.uniform(m[0], m[-1], 50).tolist(), *range(int(m[0]), int(m[-1]) + 1, 7)]:
            want = math.exp(float(np.interp(math.log(x), np.log(m), np.log(seconds))))
            assert curve(x) == want
        assert curve(m[0] / 2) is None and curve(m[-1] * 2) is None


def test_the_terms_before_attention_come_from_a_memo_with_the_same_bits_and_fallback_counts():
    """forward_time keeps (overhead + linear + all-reduce) by (tokens, sequences, graph) when no op fell
    back: the bits and the fallback counts of a model that works them out at every read."""
    batches = [Batch(num_seqs=b, decode_seqs=b, decode_context_tokens=b * 300) for b in (1, 5, 64, 5, 1)]
    batches += [Batch(num_seqs=2, prefill_seqs=2, prefill_tokens=t, prefill_attn_pairs=t * t / 2.0)
                for t in (100, 900, 5000, 100, 5000)]  # 5000 tokens: beyond the gemm grid (roofline)
    used, anew = _cost(), _cost()
    for b in batches * 2:
        anew._dense_memo.clear()
        assert used.forward_time(b) == anew.forward_time(b)
    assert used.fallback_iterations == anew.fallback_iterations
    assert used.fallback_iterations["linear"] == 4
    assert (5000, 2, False) not in used._dense_memo and (100, 2, False) in used._dense_memo


def test_the_decode_read_of_integer_inputs_has_the_bits_of_python_division():
    """MeanContextOp.time divides integer contexts as doubles (compiled) where both are exact as doubles:
    the bits of Python's int / int, the same as a float context of the same value; and the last dense
    key forward_time keeps gives the memo's bits."""
    c, d = _cost(), _cost()
    for b, ctx in ((1, 1), (3, 1000), (7, 12345), (64, 300 * 64 + 5), (5, 2 ** 40 + 3)):
        ints = Batch(num_seqs=b, decode_seqs=b, decode_context_tokens=ctx)
        floats = Batch(num_seqs=b, decode_seqs=b, decode_context_tokens=float(ctx))
        want = d._decode(floats)
        assert c._decode(ints) == want and c._decode(floats) == want
        assert c.forward_time(ints) == c.forward_time(ints) == d.forward_time(floats)
