"""KV capacity arithmetic against numbers computed by hand."""

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.catalog import get_model
from kvsim.specs.footprint import default_activation_reserve, format_bytes, kv_capacity
from kvsim.specs.hardware import load_hardware
from kvsim.specs.model import ModelSpec

GiB = 2**30

# 2 layers, 2 KV heads of 16 dims: 2 * 2 * 2 * 16 * 2 = 256 bytes per token at fp16.
SMALL = ModelSpec(name="small", num_layers=2, hidden_size=64, num_attention_heads=4, num_kv_heads=2,
                  head_dim=16, intermediate_size=128, vocab_size=100, num_params=1_000_000,
                  active_params=1_000_000, attention="gqa", max_position_embeddings=2048,
                  weight_dtype="fp16")
HW = {"name": "toy", "memory_bytes": 10_000_000, "hbm_bandwidth": 1e12, "peak_flops": {"bf16": 1e14},
      "host_link_bandwidth": 1e10, "host_dram_bytes": 0, "ssd_bytes": 0, "ssd_bandwidth": 1e9,
      "interconnect_bandwidth": 1e10}


def test_capacity_by_hand():
    cap = kv_capacity(SMALL, load_hardware(HW), "fp16", tp=1, gpu_memory_utilization=0.5, block_size=16,
                      activation_reserve_bytes=1_000_000)
    assert cap.kv_bytes_per_token == 256
    assert cap.bytes_per_block == 4096
    assert cap.budget_bytes == 5_000_000
    assert cap.weight_bytes == 2_000_000  # 1M params * 2 bytes
    assert cap.usable_bytes == 2_000_000  # 5M - 2M - 1M
    assert cap.num_blocks == 488  # floor(2_000_000 / 4096)
    assert cap.tokens == 488 * 16 == 7808
    assert "488 blocks" in cap.describe()


def test_capacity_under_tensor_parallelism():
    cap = kv_capacity(SMALL, load_hardware(HW), "fp16", tp=2, gpu_memory_utilization=0.5, block_size=16,
                      activation_reserve_bytes=1_000_000)
    # each GPU: 1 KV head -> 128 B/token, 2048 B/block; weights 1M; usable 5M - 1M - 1M = 3M
    assert (cap.kv_bytes_per_token, cap.weight_bytes, cap.usable_bytes) == (128, 1_000_000, 3_000_000)
    assert cap.num_blocks == 1464  # floor(3_000_000 / 2048)


def test_default_activation_reserve_is_max_of_1gib_and_5_percent():
    assert default_activation_reserve(load_hardware(dict(HW, memory_bytes=10 * GiB))) == 1 * GiB
    assert default_activation_reserve(load_hardware(dict(HW, memory_bytes=100 * GiB))) == 5 * GiB


def test_llama_3_8b_on_h100_uses_the_default_reserve():
    hw = load_hardware("h100-sxm")
    cap = kv_capacity(get_model("llama-3-8b"), hw, "bf16", 1, 0.9, 16)
    usable = hw.memory_bytes * 0.9 - 8_030_261_248 * 2 - 0.05 * hw.memory_bytes
    assert cap.usable_bytes == pytest.approx(usable)
    assert cap.num_blocks == int(usable // (131072 * 16))


def test_weights_that_do_not_fit_are_a_one_line_error():
    with pytest.raises(KvsimError, match=r"llama-3-70b weights \(141\.1 GB per GPU\) exceed") as exc:
        kv_capacity(get_model("llama-3-70b"), load_hardware("h100-sxm"), "bf16", 1, 0.9, 16)
    assert "tensor_parallel_size 2" in str(exc.value) and "\n" not in str(exc.value)


def test_no_room_left_after_the_reserve():
    with pytest.raises(KvsimError, match="leave no room for KV"):
        kv_capacity(SMALL, load_hardware(HW), "fp16", 1, 0.5, 16, activation_reserve_bytes=3_000_000)


@pytest.mark.parametrize("kwargs, message", [
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ({"block_size": 0}, "block_size"),
    ({"tp": 3}, "does not divide"),
    ({"activation_reserve_bytes": -1}, "activation reserve"),
    ({"kv_dtype": "fp6"}, "unknown kv dtype .fp6."),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(KvsimError, match=message):
        kv_capacity(SMALL, load_hardware(HW), **kwargs)


@pytest.mark.parametrize("n, text", [
    (512, "512 B"), (819200, "800.0 KiB"), (1.5 * 2**20, "1.5 MiB"), (1.5 * GiB, "1.50 GiB"),
    (3 * 2**40, "3.00 TiB"), (-2048, "-2.0 KiB"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize("kwargs, message", [
    ({"gpu_memory_utilization": float("nan")}, r"gpu_memory_utilization must be in \(0, 1\], got nan"),
    ({"gpu_memory_utilization": True}, "gpu_memory_utilization must be in"),
    ({"activation_reserve_bytes": float("nan")}, "activation reserve must be a finite number"),
    ({"activation_reserve_bytes": float("inf")}, "activation reserve must be a finite number"),
    ({"activation_reserve_bytes": 1e300}, r"at most 2\*\*60"),
    ({"block_size": 2**21}, "block_size must be an integer from 1 to 1048576"),
    ({"block_size": 16.0}, "block_size must be an integer"),
])
def test_non_finite_and_huge_arguments_are_one_line_errors(kwargs, message):
    with pytest.raises(KvsimError, match=message) as exc:
        kv_capacity(SMALL, load_hardware(HW), **kwargs)
    assert "\n" not in str(exc.value)


def test_the_largest_inputs_give_a_plain_block_count():
    # the smallest KV a spec can have (1 layer, 1 head of 1 dim, int4: 1 byte per token) on the largest
    # memory a profile may declare (2**60 bytes): a block count, no float overflow on the way
    one = ModelSpec(name="one", num_layers=1, hidden_size=1, num_attention_heads=1, num_kv_heads=1,
                    head_dim=1, intermediate_size=1, vocab_size=1, num_params=1, active_params=1,
                    attention="mha", max_position_embeddings=1)
    cap = kv_capacity(one, load_hardware(dict(HW, memory_bytes=2**60)), "int4", block_size=1,
                      gpu_memory_utilization=1.0, activation_reserve_bytes=0)
    assert cap.bytes_per_block == 1.0 and isinstance(cap.num_blocks, int)
    assert cap.num_blocks == pytest.approx(2**60)  # less 2 bytes of bf16 weights, lost in the float
    # and the largest shapes: KV bytes per block are a huge but finite float, no block fits
    big = ModelSpec(name="big", num_layers=2**31, hidden_size=2**31, num_attention_heads=2**31,
                    num_kv_heads=2**31, head_dim=2**31, intermediate_size=1, vocab_size=1, num_params=1,
                    active_params=1, attention="mha", max_position_embeddings=1)
    cap = kv_capacity(big, load_hardware(HW), "fp32", block_size=2**20, activation_reserve_bytes=0)
    assert cap.bytes_per_block == 2 * 2.0**31 * 2.0**31 * 2.0**31 * 4 * 2**20 and cap.num_blocks == 0
