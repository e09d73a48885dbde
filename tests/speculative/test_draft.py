"""The draft's size: derived EAGLE / EAGLE-3 heads and MTP layers against the published checkpoints, a
draft model as given, ngram's nothing."""

from __future__ import annotations

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.catalog import get_model
from kvsim.speculative.config import SpeculativeConfig
from kvsim.speculative.draft import build_draft


def cfg(method, **kw):
    return SpeculativeConfig(method=method, num_speculative_tokens=3, acceptance=0.7, **kw)


def test_eagle3_head_of_llama_31_8b():
    """Llama-3.1-8B: 8,030,261,248 parameters, untied 128,256 x 4,096 embedding and LM head: a layer holds
    (8,030,261,248 - 2 x 525,336,576) / 32 = 218,112,128. EAGLE-3 adds q/k/v over the second h input
    4,096 x (32 + 2 x 8) x 128 = 25,165,824, fc 3 x 4,096^2 = 50,331,648 and a 32,000-row LM head
    131,072,000: 424,681,600 parameters, 849,363,200 bytes in bf16 (810 MiB: the published
    yuhuili/EAGLE3-LLaMA3.1-Instruct-8B checkpoint is ~811 MB); KV of one layer, 2 x 8 x 128 x 2 = 4,096
    bytes per token."""
    d = build_draft(cfg("eagle3"), get_model("llama-3.1-8b"), "bf16", 1)
    assert d.params == 424_681_600
    assert d.weight_bytes == 849_363_200
    assert d.kv_bytes_per_token == 4096 and d.kv_layers == 1 and d.derived
    assert d.spec.num_layers == 1 and d.spec.vocab_size == 32_000


def test_eagle3_fc_costed_with_the_first_forward_only():
    """vLLM applies EAGLE-3's fc once per step (combine_hidden_states, before the first forward): the
    first forward's spec holds layer + q/k/v + fc + the 32,000-row table twice (lookup and head, 2 x
    131,072,000): 218,112,128 + 25,165,824 + 50,331,648 + 262,144,000 = 555,753,600 parameters; the later
    forwards' spec the same without the fc: 505,421,952. EAGLE-1 runs its fc in every forward: no
    step_spec."""
    d = build_draft(cfg("eagle3"), get_model("llama-3.1-8b"), "bf16", 1)
    assert d.spec.active_params == 555_753_600
    assert d.step_spec.active_params == 505_421_952 and d.step_spec.num_layers == 1
    assert build_draft(cfg("eagle"), get_model("llama-3.1-8b"), "bf16", 1).step_spec is None


def test_eagle_head_shares_the_lm_head():
    """EAGLE-1: the layer 218,112,128 + fc 2 x 4,096^2 = 33,554,432: 251,666,560 parameters."""
    d = build_draft(cfg("eagle"), get_model("llama-3.1-8b"), "bf16", 2)
    assert d.params == 251_666_560
    assert d.weight_bytes == 251_666_560 * 2 / 2  # bf16 over tensor parallelism 2
    assert d.kv_bytes_per_token == 4096 / 2


def test_mtp_layer_of_deepseek_v3():
    """DeepSeek-V3: active per layer (37,552,282,624 - 2 x 129,280 x 7,168) / 61 = 585,228,271.21, plus 248
    idle experts of 44,040,192 (= (671,026,404,352 - 37,552,282,624) / (58 x 248)), plus eh_proj
    2 x 7,168^2 = 102,760,448: 11,609,956,335 parameters, within 1% of the 11.5B the model card gives
    for its MTP module (README_WEIGHTS.md, shared embedding and head excluded)."""
    d = build_draft(cfg("mtp"), get_model("deepseek-v3"), "bf16", 8)
    assert d.params == pytest.approx(11_609_956_335.2, rel=1e-9)
    assert d.params / 11.5e9 - 1 == pytest.approx(0.0096, abs=1e-3)
    assert d.weight_bytes == pytest.approx(d.params * 1 / 8)  # fp8 weights over 8 GPUs
    assert d.kv_layers == 1
    two = build_draft(cfg("mtp", mtp_layers=2), get_model("deepseek-v3"), "bf16", 8)
    assert two.kv_layers == 2 and two.kv_bytes_per_token == 2 * d.kv_bytes_per_token
    assert two.params == pytest.approx(2 * d.params) and two.spec.num_layers == 1  # (one module a forward)


def test_draft_model_and_ngram():
    small = get_model({"base": "llama-3-8b", "num_layers": 4})
    d = build_draft(cfg("draft_model", model="x"), get_model("llama-3.1-70b"), "bf16", 4, small)
    assert d.weight_bytes == small.weight_bytes(4)
    assert d.kv_bytes_per_token == small.kv_bytes_per_token("bf16", 4) and not d.derived
    n = build_draft(cfg("ngram"), get_model("llama-3.1-8b"), "bf16", 1)
    assert n.spec is None and n.weight_bytes == 0 and n.kv_bytes_per_token == 0


def test_draft_model_must_shard_like_the_target():
    small = get_model({"base": "llama-3-8b", "num_layers": 4, "num_kv_heads": 3, "num_attention_heads": 3,
                       "head_dim": 128})
    with pytest.raises(KvsimError, match="speculative.model"):
        build_draft(cfg("draft_model", model="x"), get_model("llama-3.1-70b"), "bf16", 2, small)
