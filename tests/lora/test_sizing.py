"""Adapter slot sizes on a model under tensor parallelism (kvsim/lora/sizing.py), by hand for
Llama-3.1-8B: 32 layers, hidden 4096, 32 heads and 8 KV heads of 128, MLP 14336."""

from __future__ import annotations

import pytest

from kvsim.errors import KvsimError
from kvsim.lora.sizing import adapter_file_bytes, check_model, kernels_per_step, slot_bytes, slot_params
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


def test_slots_are_linear_in_rank_and_kernels_count_two_per_module_and_layer():
    assert slot_bytes(LLAMA, 64) == 4 * slot_bytes(LLAMA, 16)
    assert kernels_per_step(LLAMA) == 32 * 4 * 2


@pytest.mark.parametrize("name, what", [("deepseek-v2-lite", "MLA"), ("gpt-oss-20b", "mixture-of-experts"),
                                        ("nemotron-h-8b", "state")])
def test_models_whose_modules_are_not_sized_are_refused(name, what):
    with pytest.raises(KvsimError, match=what):
        check_model(get_model(name))
