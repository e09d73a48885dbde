"""A scenario's `quantization` (kvsim/specs/catalog.py with_quantization, kvsim/specs/dtypes.py
QUANTIZATION): the weights' dtype, so their bytes (and the KV capacity) and the GEMM table read."""

from __future__ import annotations

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.scenario import load_scenario
from kvsim.specs.catalog import get_model, with_quantization
from kvsim.specs.dtypes import DTYPE_BYTES, QUANTIZATION


def test_weight_bytes_by_format_by_hand():
    m = get_model("llama-3-8b")
    assert m.weight_dtype == "bf16" and with_quantization(m, None) is m
    bf16 = m.weight_bytes()
    assert with_quantization(m, "fp8").weight_bytes() == pytest.approx(bf16 / 2)
    assert with_quantization(m, "nvfp4").weight_bytes() == pytest.approx(bf16 * 4.5 / 16)  # 4.5 bits
    assert with_quantization(m, "mxfp4").weight_bytes() == pytest.approx(bf16 * 4.25 / 16)
    assert with_quantization(with_quantization(m, "fp8"), "none").weight_dtype == "bf16"
    assert set(QUANTIZATION) == {"none", "fp8", "fp8_block", "nvfp4", "mxfp4"}
    assert all(v is None or v in DTYPE_BYTES for v in QUANTIZATION.values())


def test_a_run_takes_the_format_for_capacity_and_gemms():
    base = ["simulation.requests=20"]
    path = "workloads/chat_kernels_b200.yaml"
    runs = {q: Simulation(load_scenario(path, [*base, f"quantization={q}"])).run()
            for q in ("none", "fp8", "nvfp4")}
    cap = {q: r.meta["capacity_blocks"] for q, r in runs.items()}
    assert cap["none"] < cap["fp8"] < cap["nvfp4"]
    kernels = {q: r.meta["cost_model"]["kernels"]["linear"] for q, r in runs.items()}
    assert kernels["none"] == "torch.nn.functional.linear"
    assert kernels["fp8"] == "CutlassFP8ScaledMMLinearKernel"
    assert "NvFp4" in kernels["nvfp4"]


def test_an_unknown_format_is_a_one_line_error():
    with pytest.raises(KvsimError) as e:
        load_scenario("workloads/chat.yaml", ["quantization=fp4"])
    assert "quantization: Input should be 'none', 'fp8', 'fp8_block', 'nvfp4' or 'mxfp4'" in str(e.value)
    assert "\n" not in str(e.value)
