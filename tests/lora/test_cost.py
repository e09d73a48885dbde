"""The LoRA terms added to a cost model (kvsim/lora/cost.py), by hand for Llama-3.1-8B rank-16 slots on an
H100 (3.35 TB/s x 0.85, 989.5 TFLOP/s bf16, e_gemm = 0.75 T / (T + 64))."""

from __future__ import annotations

import pytest

from kvsim.cost.batch import Batch
from kvsim.lora.cost import LoraCost


class Flat:
    request_overhead = 0.25

    def step_time(self, batch):
        return 0.01

    def describe(self):
        return {"model": "flat"}


def cost():
    # slot: 83,886,080 B and 41,943,040 parameters; 256 kernels of 2 us
    return LoraCost(Flat(), 83_886_080, 41_943_040, 256, 2e-6, 3.35e12 * 0.85, 989.5e12, 0.75, 64.0)


def test_memory_bound_decode_step():
    # 64 adapter tokens of 2 adapters: read 2 x 83,886,080 B / 2.8475e12 B/s = 58.92 us; compute
    # 2 x 41,943,040 x 64 FLOP / (989.5e12 x 0.75 x 64 / 128) = 14.47 us: memory wins; + 256 x 2 us
    mem = 2 * 83_886_080 / 2.8475e12
    assert mem == pytest.approx(58.92e-6, rel=1e-3)
    t = cost().step_time(Batch(decode_seqs=64, lora_tokens=64, lora_adapters=2, lora_load_s=0.0132944))
    assert t == pytest.approx(0.01 + mem + 512e-6 + 0.0132944)


def test_compute_bound_prefill_and_base_batches():
    # 8192 adapter tokens of one adapter: 2 x 41,943,040 x 8192 / (989.5e12 x 0.75 x 8192 / 8256) = 0.9331 ms
    comp = 2 * 41_943_040 * 8192 / (989.5e12 * 0.75 * 8192 / 8256)
    assert cost().lora_time(8192, 1) == pytest.approx(comp + 512e-6)
    assert comp == pytest.approx(0.9331e-3, rel=1e-3)
    assert cost().step_time(Batch(decode_seqs=64)) == 0.01  # no adapter token: no LoRA kernel
    c = cost()
    assert c.request_overhead == 0.25 and c.describe()["lora"]["kernels_per_step"] == 256
