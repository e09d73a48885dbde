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


def act_cost():
    # with the activation bytes of Llama-3.1-8B rank 16 at tp 1 (8,038,400 B per adapter token,
    # tests/lora/test_sizing.py) and vLLM v1's 384 kernels of 2 us
    return LoraCost(Flat(), 83_886_080, 41_943_040, 384, 2e-6, 3.35e12 * 0.85, 989.5e12, 0.75, 64.0,
                    8_038_400, "v1")


def test_activation_bytes_make_the_kernels_memory_bound():
    # decode, 64 tokens of 2 adapters: (2 x 83,886,080 + 64 x 8,038,400) B = 682,229,760 B / 2.8475e12
    # = 239.59 us (the compute, 14.47 us, loses) + 384 x 2 us = 768 us -> 1.00759 ms
    assert act_cost().lora_time(64, 2) == pytest.approx(682_229_760 / 2.8475e12 + 768e-6)
    assert act_cost().lora_time(64, 2) == pytest.approx(1.00759e-3, rel=1e-4)
    # prefill, 8192 tokens of one adapter: (83,886,080 + 8192 x 8,038,400) B = 65,934,458,880 B / 2.8475e12
    # = 23.155 ms, 25 x the FLOP time (0.9331 ms): the kernels stream activations, not weights
    assert act_cost().lora_time(8192, 1) == pytest.approx(65_934_458_880 / 2.8475e12 + 768e-6)
    d = act_cost().describe()["lora"]
    assert d["activation_bytes_per_token"] == 8_038_400 and d["punica_era"] == "v1"


def test_graph_replayed_decode_steps_pay_the_graph_kernel_overhead():
    # v0 era: 672 kernels, 110 us each eagerly, 2 us replayed in a CUDA graph (decode-only, <= 512 seqs)
    c = LoraCost(Flat(), 83_886_080, 41_943_040, 672, 1.1e-4, 3.35e12 * 0.85, 989.5e12, 0.75, 64.0,
                 8_038_400, "v0", 2e-6, 512)
    mem = (83_886_080 + 64 * 8_038_400) / 2.8475e12  # 0.21014 ms: memory-bound, as above
    assert c.step_time(Batch(decode_seqs=64, lora_tokens=64, lora_adapters=1)) == \
        pytest.approx(0.01 + mem + 672 * 2e-6)  # + 1.344 ms
    # a prefill in the batch (or more than 512 sequences) runs eagerly: 672 x 110 us = 73.92 ms
    mixed = Batch(prefill_seqs=1, prefill_tokens=100, decode_seqs=64, lora_tokens=164, lora_adapters=1)
    assert c.step_time(mixed) == pytest.approx(0.01 + (83_886_080 + 164 * 8_038_400) / 2.8475e12 + 0.07392)
    big = Batch(decode_seqs=513, lora_tokens=513, lora_adapters=1)
    assert c.step_time(big) == pytest.approx(0.01 + (83_886_080 + 513 * 8_038_400) / 2.8475e12 + 0.07392)
    assert c.describe()["lora"]["graph_kernel_overhead_s"] == 2e-6


def test_copy_and_pickle_keep_the_delegation():
    # __getattr__ delegates to `inner`; before `inner` is set (copy / pickle build the object first) it must
    # raise AttributeError, not recurse
    import copy
    import pickle

    c = cost()
    for twin in (copy.copy(c), copy.deepcopy(c), pickle.loads(pickle.dumps(c))):
        assert twin.request_overhead == 0.25
        assert twin.step_time(Batch(decode_seqs=1)) == pytest.approx(c.step_time(Batch(decode_seqs=1)))
    with pytest.raises(AttributeError):
        assert LoraCost.__new__(LoraCost).missing is None
