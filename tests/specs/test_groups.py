"""Layer kinds and layer groups for every kind, FLOPs and bytes per group, on small hand-checked specs."""

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.catalog import get_model
from kvsim.specs.model import ModelSpec

BASE = dict(name="t", num_layers=4, hidden_size=64, num_attention_heads=4, num_kv_heads=2, head_dim=16,
            intermediate_size=128, vocab_size=1000, num_params=1_000_000, active_params=1_000_000,
            attention="gqa", max_position_embeddings=4096)
PER_LAYER = 2 * 2 * 16 * 2  # 128 B per token and layer at bf16


def spec(**kw):
    return ModelSpec(**{**BASE, **kw})


def test_old_form_and_layer_types_agree():
    old = spec(sliding_window=8, sliding_window_layers=2)
    typed = spec(sliding_window=8, layer_types=["sliding", "sliding", "full", "full"])
    assert typed.layer_types == ("sliding", "sliding", "full", "full") and typed.sliding_window_layers == 2
    for m in (old, typed):
        full, sliding = m.layer_groups("bf16")
        assert (full.kind, tuple(full.layers), full.bytes_per_token) == ("full", (2, 3), 2 * PER_LAYER)
        assert (sliding.kind, tuple(sliding.layers), sliding.window) == ("sliding", (0, 1), 8)
        assert m.kv_bytes(100, "bf16") == PER_LAYER * (2 * 100 + 2 * 8)
        assert m.kv_bytes_per_token("bf16") == 4 * PER_LAYER


def test_interleaved_layers_keep_their_indices():
    m = spec(sliding_window=8, layer_types=["sliding", "full"] * 2)
    full, sliding = m.layer_groups("bf16")
    assert tuple(full.layers) == (1, 3) and tuple(sliding.layers) == (0, 2)


def test_tensor_parallel_splits_kv_heads_per_group():
    m = spec(sliding_window=8, layer_types=["sliding", "full"] * 2)
    assert [g.bytes_per_token for g in m.layer_groups("bf16", tp=2)] == [PER_LAYER, PER_LAYER]  # 1 head of 2


def mamba(**kw):
    return spec(**{"layer_types": ["state", "full", "state", "none"], "ssm_kind": "mamba2",
                   "ssm_num_heads": 4, "ssm_head_dim": 8, "ssm_state_size": 16, "ssm_groups": 2,
                   "ssm_conv_kernel": 4, **kw})


def test_mamba2_state_by_hand():
    m = mamba()
    full, state = m.layer_groups("bf16")
    assert (full.kind, tuple(full.layers), full.bytes_per_token) == ("full", (1,), PER_LAYER)
    # conv: (4 - 1) * (4 * 8 + 2 * 2 * 16) = 288; recurrent: 4 * 8 * 16 = 512; bf16 2 B; 2 layers
    assert (state.kind, tuple(state.layers)) == ("state", (0, 2))
    assert state.state_bytes == 2 * (288 + 512) * 2 == 3200
    assert m.kv_bytes(1000, "bf16") == 1000 * PER_LAYER + 3200
    assert m.kv_bytes_per_token("bf16") == PER_LAYER  # states add nothing per token
    # tp=2: heads and groups split: conv 3 * (32 + 64) / 2 = 144, recurrent 256
    assert m.layer_groups("bf16", tp=2)[1].state_bytes == 2 * (144 + 256) * 2
    assert mamba(ssm_dtype="fp32").layer_groups("bf16")[1].state_bytes == 6400
    assert m.layer_groups("fp8")[1].state_bytes == 3200  # the KV dtype does not apply to states


def test_mamba2_single_group_is_replicated_under_tp():
    m = mamba(ssm_groups=1)
    assert m.layer_groups("bf16")[1].state_bytes == 2 * (3 * (32 + 2 * 16) + 512) * 2
    # groups raised to tp = 2: conv 3 * (32 + 2 * 2 * 16) / 2 = 144 (vLLM extra_groups_for_head_shards)
    m.validate_tp(2)
    assert m.layer_groups("bf16", tp=2)[1].state_bytes == 2 * (144 + 256) * 2
    with pytest.raises(KvsimError, match="does not divide 6 state-layer heads"):
        mamba(ssm_num_heads=6).validate_tp(4)


def test_gated_deltanet_state_by_hand():
    m = spec(layer_types=["state", "state", "state", "full"], ssm_kind="gdn", ssm_num_heads=4, ssm_head_dim=8,
             ssm_state_size=16, ssm_groups=2, ssm_conv_kernel=4)
    # conv_dim = 2 * 2 * 16 + 4 * 8 = 96 -> 3 * 96 = 288; recurrent 4 * 8 * 16 = 512
    assert m.layer_groups("bf16")[1].state_bytes == 3 * 800 * 2
    with pytest.raises(KvsimError, match="does not divide 2 state-layer key heads"):
        m.validate_tp(4)


def v4(**kw):
    # 4 layers: window-only, CSA (4), HCA (16), CSA (4); entry = 12 nope + 4 rope dims
    return spec(**{"attention": "mla", "num_kv_heads": 1, "kv_lora_rank": 12, "qk_rope_head_dim": 4,
                   "sliding_window": 8, "compress_ratios": [0, 4, 16, 4], "index_head_dim": 8,
                   "index_num_heads": 2, "index_topk": 3, **kw})


def test_compressed_group_by_hand():
    m = v4()
    assert m.layer_kinds == ("sliding", "compressed", "compressed", "compressed")
    (g,) = m.layer_groups({"rope": "bf16", "rest": "fp8"})
    entry = 12 * 1 + 4 * 2  # 20 B
    assert g.kind == "compressed" and tuple(g.layers) == (0, 1, 2, 3) and g.window == 8
    assert [(p.name, p.tokens_per_entry, p.bytes_per_entry, p.topk) for p in g.parts] == [
        ("csa", 4, 2 * entry, 3), ("csa-indexer", 4, 2 * 8, 0), ("hca", 16, entry, 0)]
    # state: window 8 tokens x 20 B x 4 layers + tails 3 x 40 + 3 x 16 + 15 x 20
    assert g.state_bytes == 8 * 20 * 4 + 3 * 40 + 3 * 16 + 15 * 20 == 1108
    # 100 tokens: 25 CSA entries, 25 indexer keys, 6 HCA entries
    assert m.kv_bytes(100, {"rope": "bf16", "rest": "fp8"}) == 25 * 40 + 25 * 16 + 6 * 20 + 1108
    # a decode step reads the top 3 CSA entries per layer, every indexer key and HCA entry, the state
    assert m.decode_read_bytes(100, {"rope": "bf16", "rest": "fp8"}) == {
        "compressed": 3 * 40 + 25 * 16 + 6 * 20 + 1108}
    assert m.kv_bytes_per_token("bf16") == (2 * 32 + 2 * 16) / 4 + 32 / 16


@pytest.mark.parametrize("kw, message", [
    ({"layer_types": ["full"] * 3}, "layer_types has 3 entries, num_layers is 4"),
    ({"layer_types": ["full", "window", "full", "full"]}, r"layer_types\[1\] must be one of"),
    ({"layer_types": "full"}, "layer_types must be a list"),
    ({"layer_types": ["sliding"] * 4}, "sliding layers need sliding_window"),
    ({"layer_types": ["state"] * 4}, "state layers need ssm_kind"),
    ({"layer_types": ["state"] * 4, "ssm_kind": "mamba2"}, "state layers need ssm_num_heads >= 1"),
    ({"layer_types": ["mla"] * 4}, "layer kind 'mla' needs attention 'mla'"),
    ({"compress_ratios": [0, 4, 4, 4], "sliding_window": 8}, "compressed layers keep MLA-style entries"),
    ({"index_head_dim": 8}, "index_head_dim / index_topk belong to compressed"),
    ({"sliding_window": 8, "layer_types": ["sliding"] * 4, "sliding_window_layers": 2},
     r"sliding_window_layers \(2\) differs from the 4 sliding layers"),
    ({"ssm_kind": "rwkv"}, "ssm_kind must be one of mamba2, gdn"),
    ({"ssm_dtype": "fp6"}, "ssm_dtype: unknown dtype"),
])
def test_bad_layer_specs_are_one_line_errors(kw, message):
    with pytest.raises(KvsimError, match=message) as exc:
        spec(**kw)
    assert "\n" not in str(exc.value)


def test_compress_ratios_and_layer_types_must_agree():
    with pytest.raises(KvsimError, match="layer 0 is compressed but its compress ratio is 0"):
        v4(layer_types=["compressed"] * 4)


def test_huge_old_form_specs_stay_cheap():
    big = spec(num_layers=2**31, sliding_window=8, sliding_window_layers=2**30)
    full, sliding = big.layer_groups("bf16")
    assert isinstance(full.layers, range) and len(sliding.layers) == 2**30


# ---- FLOPs ---------------------------------------------------------------------------------


def test_attention_flops_per_pair_per_kind():
    m = mamba()
    per_layer = 4 * 4 * 16  # 4 heads of 16
    assert m.attention_flops_per_pair() == per_layer  # one attention layer of four
    assert m.attention_flops_per_pair(kind="full") == per_layer
    assert m.attention_flops_per_pair(kind="state") == 0
    assert get_model("llama-3-8b").attention_flops_per_pair() == 4 * 32 * 32 * 128  # unchanged


def test_prefill_flops_full_and_sliding_by_hand():
    m = spec(sliding_window=3, layer_types=["sliding", "full", "full", "full"])
    f = 4 * 4 * 16
    out = m.prefill_attention_flops(start=2, chunk=3)  # queries at positions 3, 4, 5
    assert out["full"] == f * 3 * (3 + 4 + 5)
    assert out["sliding"] == f * 1 * (3 + 3 + 3)
    assert m.decode_attention_flops(10) == {"full": f * 3 * 10, "sliding": f * 3}


def test_prefill_flops_state_and_compressed_by_hand():
    m = mamba()
    # per token and state layer: 4 * 512 + 2 * 4 * 96 (conv dim 32 + 64) = 2816
    assert m.prefill_attention_flops(0, 10)["state"] == 2 * 10 * 2816
    c = v4()
    f = 2 * 4 * ((12 + 4) + 16)  # 4 heads, QK over 16 dims, PV over head_dim 16
    out = c.prefill_attention_flops(start=0, chunk=9)["compressed"]
    window = sum(min(i, 8) for i in range(1, 10))
    csa = sum(min(i // 4, 3) for i in range(1, 10))
    hca = sum(i // 16 for i in range(1, 10))
    index = 2 * 2 * 8 * 2 * sum(i // 4 for i in range(1, 10))
    assert out == f * 4 * window + f * 2 * csa + f * 1 * hca + index


def test_weight_stream_bytes_skip_the_untied_input_embedding():
    m = get_model("llama-3-8b")
    assert m.weight_bytes() == 8_030_261_248 * 2
    assert m.weight_stream_bytes() == (8_030_261_248 - 128256 * 4096) * 2
    assert m.weight_stream_bytes(tp=2) == (8_030_261_248 - 128256 * 4096)
    tied = get_model("gemma-2-9b")
    assert tied.weight_stream_bytes() == tied.weight_bytes()


def test_the_docs_hybrid_yaml_example_loads(tmp_path):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "specs.md").read_text()
    block = doc.split("```yaml\nname: my-hybrid\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "hybrid.yaml"
    path.write_text("name: my-hybrid\n" + block)
    m = get_model(str(path))
    assert [g.kind for g in m.layer_groups("bf16")] == ["full", "sliding", "state"]
    assert m.layer_groups("bf16")[2].state_bytes == 2 * 2_158_592  # Nemotron-H's Mamba-2 layer, twice
