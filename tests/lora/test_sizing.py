"""Adapter slot sizes on a model under tensor parallelism (kvsim/lora/sizing.py), by hand for
Llama-3.1-8B: 32 layers, hidden 4096, 32 heads and 8 KV heads of 128, MLP 14336."""

from __future__ import annotations

import pytest

from kvsim.errors import KvsimError
from kvsim.lora.sizing import (
    activation_bytes,
    adapter_file_bytes,
    check_model,
    kernels_per_layer,
    kernels_per_step,
    slot_bytes,
    slot_params,
)
from kvsim.specs.catalog import get_model

LLAMA = get_model("llama-3.1-8b")


def test_llama_3_1_8b_rank_16_on_one_gpu():
    # per layer and rank, rank x (input + output) per slice:
    #   qkv (3 slices): (4096 + 4096) + 2 x (4096 + 1024) = 18,432
    #   o: 4096 + 4096 = 8,192; gate_up (2 slices): 2 x (4096 + 14336) = 36,864; down: 14336 + 4096 = 18,432
    #   = 81,920; x 16 (rank) x 32 (layers) = 41,943,040 parameters, x 2 bytes = 83,886,080 B (80 MiB)
    assert slot_params(LLAMA, 16) == 41_943_040
    assert slot_bytes(LLAMA, 16) == 83_886_080
    assert adapter_file_bytes(LLAMA, 16) == 83_886_080


def test_tensor_parallel_splits_b_of_column_and_a_of_row_layers():
    # tp 2: qkv A whole 3 x 4096, B (4096 + 2 x 1024) / 2 = 3072 -> 15,360; o A 4096 / 2 + B 4096 = 6,144;
    # gate_up A 2 x 4096 + B 2 x 14336 / 2 -> 22,528; down A 14336 / 2 + B 4096 = 11,264; sum 55,296
    # per layer and rank; x 16 x 32 = 28,311,552
    assert slot_params(LLAMA, 16, tp=2) == 28_311_552
    # the file on disk is the whole adapter whatever the TP
    assert adapter_file_bytes(LLAMA, 16) == 2 * slot_params(LLAMA, 16)


def test_kv_heads_replicate_beyond_their_count():
    # tp 16 > 8 KV heads: each GPU keeps one whole KV head (128) for k and v: qkv B = 4096 / 16 + 2 x 128
    # = 512, A 12,288 -> 12,800; o 256 + 4096 = 4,352; gate_up 8192 + 1792 = 9,984; down 896 + 4096 = 4,992
    assert slot_params(LLAMA, 1, tp=16) == (12_800 + 4_352 + 9_984 + 4_992) * 32


def test_slots_are_linear_in_rank_and_kernels_count_per_era():
    assert slot_bytes(LLAMA, 64) == 4 * slot_bytes(LLAMA, 16)
    # v1 (triton_ops lora_shrink / lora_expand over all slices): zero_ + shrink + expand per module
    assert kernels_per_layer(LLAMA) == kernels_per_layer(LLAMA, "v1") == 4 * 3
    assert kernels_per_step(LLAMA) == 32 * 12 == 384
    # v0 (vLLM 0.6 sgmv / bgmv, a loop over slices): torch.zeros + shrink + expand per slice, slices
    # qkv 3, o 1, gate_up 2, down 1: 3 x 7 = 21 a layer
    assert kernels_per_layer(LLAMA, "v0") == 21 and kernels_per_step(LLAMA, "v0") == 672
    with pytest.raises(ValueError, match="punica era"):
        kernels_per_layer(LLAMA, "v2")


def test_activation_bytes_by_hand():
    """Llama-3.1-8B (hidden 4096, q 4096, kv 1024, intermediate 14336, 32 layers), rank 16, per adapter
    token and layer; input x 2 B once per slice, the fp32 buffer 3 x 16 x 4 B per slice (zeroed, written,
    read), the output read + written 2 x 2 B a value:
      tp 1: qkv 3 x 4096 x 2 + 3 x 192 + 4 x (4096 + 1024 + 1024) = 24,576 + 576 + 24,576 = 49,728
            o 4096 x 2 + 192 + 4 x 4096 = 24,768; gate_up 2 x 8192 + 384 + 4 x 28,672 = 131,456
            down 14336 x 2 + 192 + 4 x 4096 = 45,248; a layer 251,200; x 32 = 8,038,400 B
      tp 2: qkv 24,576 + 576 + 4 x 3072 = 37,440 (input whole, output split); o 2048 x 2 + 192 + 16,384
            = 20,672 (input split, output whole); gate_up 16,384 + 384 + 4 x 14,336 = 74,112;
            down 7168 x 2 + 192 + 16,384 = 30,912; a layer 163,136; x 32 = 5,220,352 B"""
    assert activation_bytes(LLAMA, 16) == 8_038_400
    assert activation_bytes(LLAMA, 16, tp=2) == 5_220_352
    # the buffer is the only rank-dependent part: 32 layers x 7 slices x 12 B per rank unit
    assert activation_bytes(LLAMA, 32) - activation_bytes(LLAMA, 16) == 16 * 32 * 7 * 12


@pytest.mark.parametrize("name, what", [("deepseek-v2-lite", "MLA"), ("gpt-oss-20b", "mixture-of-experts"),
                                        ("nemotron-h-8b", "state")])
def test_models_whose_modules_are_not_sized_are_refused(name, what):
    with pytest.raises(KvsimError, match=what):
        check_model(get_model(name))
