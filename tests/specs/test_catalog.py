"""Built-in models, name resolution, inline specs, YAML files and Hugging Face config.json files."""

import json

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.catalog import CATALOG, get_model, list_models, spec_from_dict
from kvsim.specs.model import ModelSpec, estimate_dense_params

PINNED = ["deepseek-v2-lite", "llama-2-13b", "llama-2-70b", "llama-2-7b", "llama-3-70b", "llama-3-8b",
          "llama-3.1-405b", "llama-3.1-70b", "llama-3.1-8b", "mistral-7b", "opt-13b", "qwen2.5-72b",
          "qwen2.5-7b"]
"""Built-in models whose parameter counts are written in the catalog (exact published totals)."""
FROM_CONFIG = ["deepseek-v3", "deepseek-v4-flash", "deepseek-v4-pro", "gemma-2-9b", "gemma-3-27b",
               "gpt-oss-120b", "gpt-oss-20b", "nemotron-h-8b", "qwen3-235b-a22b"]
"""Built-in models read from their config.json (parameter counts estimated: tests/specs/test_hf_config.py)."""
EXPECTED = sorted(PINNED + FROM_CONFIG)

LLAMA_3_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 8192, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 128256,
}
DEEPSEEK_V2_LITE_CONFIG = {
    "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
    "moe_intermediate_size": 1408, "num_hidden_layers": 27, "num_attention_heads": 16,
    "num_key_value_heads": 16, "n_shared_experts": 2, "n_routed_experts": 64, "num_experts_per_tok": 6,
    "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": None, "qk_rope_head_dim": 64,
    "v_head_dim": 128, "qk_nope_head_dim": 128, "vocab_size": 102400, "max_position_embeddings": 163840,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}


def write_json(path, data):
    path.write_text(json.dumps(data))
    return path


def test_catalog_lists_every_built_in_model():
    assert list_models() == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_each_entry_cites_its_config_and_its_param_count_matches_its_shapes(name):
    m = CATALOG[name]
    assert m.source.startswith("https://huggingface.co/") and m.source.endswith("/config.json")
    assert m.kv_bytes_per_token("bf16") > 0
    if m.attention != "mla" and name in PINNED:
        est = estimate_dense_params(m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads,
                                    m.head_dim, m.intermediate_size, m.vocab_size, m.tie_word_embeddings,
                                    gated_mlp=not name.startswith("opt"), qkv_bias=name.startswith("qwen"))
        assert est == pytest.approx(m.num_params, rel=0.01)


def test_names_are_case_insensitive_and_accept_hugging_face_repo_ids():
    assert get_model("Llama-3-8B") is CATALOG["llama-3-8b"]
    assert get_model("meta-llama/Meta-Llama-3-8B") is CATALOG["llama-3-8b"]
    assert get_model("Mistral-7B-v0.1") is CATALOG["mistral-7b"]
    assert get_model(CATALOG["opt-13b"]) is CATALOG["opt-13b"]


def test_unknown_name_suggests_close_matches():
    with pytest.raises(KvsimError, match="unknown model 'llama3-8b'.*did you mean llama-3-8b") as exc:
        get_model("llama3-8b")
    assert "\n" not in str(exc.value)


def test_inline_spec_fills_defaults_and_estimates_params():
    m = get_model({"name": "toy", "num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                   "num_kv_heads": 1, "intermediate_size": 128, "vocab_size": 100})
    assert (m.head_dim, m.attention) == (16, "mqa")
    # per layer: q,o 2*64*64 + k,v 2*64*16 + mlp 3*64*128 + norms 2*64; final norm 64; embeddings 2*100*64
    assert m.num_params == 2 * (8192 + 2048 + 24576 + 128) + 64 + 12800 == m.active_params
    assert m.kv_bytes_per_token("fp16") == 2 * 2 * 1 * 16 * 2


def test_inline_spec_accepts_float_param_counts_and_a_base_model():
    m = spec_from_dict({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                        "num_params": "7.2e9"}, "test")
    assert m.num_params == 7_200_000_000
    fp8 = get_model({"base": "llama-3-70b", "weight_dtype": "fp8"})
    assert fp8.weight_bytes() == CATALOG["llama-3-70b"].num_params
    assert fp8.kv_bytes_per_token("bf16") == 327680


@pytest.mark.parametrize("data, message", [
    ({"hidden_size": 64, "num_attention_heads": 4, "num_params": 10}, "missing model key 'num_layers'"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4},
     "give num_params, or 'intermediate_size'"),
    ({"num_layers": -2, "hidden_size": 64, "num_attention_heads": 4, "num_params": 10}, "num_layers"),
    ({"num_layers": "two", "hidden_size": 64, "num_attention_heads": 4, "num_params": 10}, "num_layers"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_params": 10, "layers": 3},
     "unknown model key 'layers'"),
    ({"base": "llama-3-8b", "num_kv_heads": 64}, "exceeds num_attention_heads"),
])
def test_bad_inline_specs_name_the_key(data, message):
    with pytest.raises(KvsimError, match=message) as exc:
        get_model(data)
    assert str(exc.value).startswith("inline model:")
    assert "\n" not in str(exc.value)


def test_yaml_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("num_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nnum_params: 1.0e+6\n")
    m = get_model(str(path))
    assert m.name == "mine" and m.num_params == 1_000_000


def test_hf_config_llama(tmp_path):
    folder = tmp_path / "Meta-Llama-3-8B"
    folder.mkdir()
    write_json(folder / "config.json", LLAMA_3_8B_CONFIG)
    for ref in (folder / "config.json", folder):
        m = get_model(str(ref))
        assert m.name == "meta-llama-3-8b"
        assert m.num_params == 8_030_261_248  # estimated from the shapes, exact for Llama
        assert (m.head_dim, m.attention, m.weight_dtype) == (128, "gqa", "bf16")
        assert m.kv_bytes_per_token("bf16") == 131072


def test_hf_config_deepseek_mla_moe(tmp_path):
    m = get_model(str(write_json(tmp_path / "config.json", DEEPSEEK_V2_LITE_CONFIG)))
    assert m.attention == "mla" and m.kv_bytes_per_token("bf16") == 31104
    assert m.num_params == CATALOG["deepseek-v2-lite"].num_params == 15_706_484_224
    assert m.active_params == CATALOG["deepseek-v2-lite"].active_params


def test_hf_config_sliding_window_rules(tmp_path):
    mistral = dict(LLAMA_3_8B_CONFIG, model_type="mistral", sliding_window=4096, vocab_size=32000)
    m = get_model(str(write_json(tmp_path / "mistral.json", mistral)))
    assert (m.sliding_window, m.sliding_window_layers) == (4096, 32)
    qwen_off = dict(mistral, model_type="qwen2", use_sliding_window=False, max_window_layers=28)
    assert get_model(str(write_json(tmp_path / "q1.json", qwen_off))).sliding_window is None
    qwen_on = dict(qwen_off, use_sliding_window=True)
    assert get_model(str(write_json(tmp_path / "q2.json", qwen_on))).sliding_window_layers == 4
    typed = dict(mistral, layer_types=["sliding_attention", "full_attention"] * 16)
    assert get_model(str(write_json(tmp_path / "t.json", typed))).sliding_window_layers == 16


def test_hf_config_opt_uses_ffn_dim_and_fp16(tmp_path):
    opt = {"model_type": "opt", "hidden_size": 5120, "ffn_dim": 20480, "num_attention_heads": 40,
           "num_hidden_layers": 40, "vocab_size": 50272, "max_position_embeddings": 2048,
           "torch_dtype": "float16", "tie_word_embeddings": True}
    m = get_model(str(write_json(tmp_path / "config.json", opt)))
    assert (m.weight_dtype, m.attention, m.intermediate_size) == ("fp16", "mha", 20480)
    assert m.num_params == pytest.approx(CATALOG["opt-13b"].num_params, rel=0.01)


def test_hf_config_missing_key_names_file_and_key(tmp_path):
    bad = dict(LLAMA_3_8B_CONFIG)
    del bad["vocab_size"]
    path = write_json(tmp_path / "config.json", bad)
    with pytest.raises(KvsimError, match=r"config.json: missing key 'vocab_size'"):
        get_model(str(path))


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(KvsimError, match="nope.json: model file not found"):
        get_model(str(tmp_path / "nope.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(KvsimError, match=r"broken.json:1: bad JSON \(Expecting property name"):
        get_model(str(broken))
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(KvsimError, match="must hold a mapping"):
        get_model(str(listy))


def test_get_model_rejects_other_types():
    with pytest.raises(KvsimError, match="expected a name"):
        get_model(42)
    assert isinstance(get_model("qwen2.5-7b"), ModelSpec)


def test_docs_table_matches_the_catalog():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "specs.md").read_text()
    rows = {cells[0]: cells for line in doc.splitlines() if line.startswith("| ")
            for cells in [[c.strip() for c in line.strip("|").split("|")]] if cells[0] in CATALOG}
    assert sorted(rows) == EXPECTED
    for name, cells in rows.items():
        m = CATALOG[name]
        assert int(cells[2]) == m.num_layers
        assert cells[-1].split(" ")[0] == f"{int(m.kv_bytes_per_token('bf16')):,}"


@pytest.mark.parametrize("change, message", [
    ({"num_key_value_heads": 0}, "num_key_value_heads must be a positive integer <= 2\\*\\*31, got 0"),
    ({"num_key_value_heads": 5}, r"num_kv_heads \(5\) must divide num_attention_heads \(32\)"),
    ({"num_attention_heads": 0}, "num_attention_heads must be a positive integer"),
    ({"num_hidden_layers": "32"}, "num_hidden_layers must be a positive integer <= 2\\*\\*31, got '32'"),
    ({"num_hidden_layers": 32.5}, "num_hidden_layers must be a positive integer <= 2\\*\\*31, got 32.5"),
    ({"hidden_size": True}, "hidden_size must be a positive integer"),
    ({"vocab_size": [128256]}, r"vocab_size must be a positive integer <= 2\*\*31, got \[128256\]"),
    ({"num_hidden_layers": None}, "missing key 'num_hidden_layers'"),
    ({"hidden_size": 4097}, "hidden_size 4097 is not a multiple of num_attention_heads 32; give head_dim"),
    ({"head_dim": 0}, "head_dim must be a positive integer"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings must be true or false, got 'no'"),
    ({"torch_dtype": 16}, "torch_dtype must be a string, got 16"),
    ({"vocab_size": 2**40}, r"vocab_size must be a positive integer <= 2\*\*31"),
    ({"hidden_size": 2**31, "head_dim": 128}, r"the shapes give .* parameters, more than 1e\+15"),
])
def test_hf_config_shapes_and_types_are_one_line_errors(tmp_path, change, message):
    path = write_json(tmp_path / "config.json", dict(LLAMA_3_8B_CONFIG, **change))
    with pytest.raises(KvsimError, match=message) as exc:
        get_model(str(path))
    assert str(exc.value).startswith(str(path)) and "\n" not in str(exc.value)


def test_hf_config_null_kv_heads_means_mha_and_head_dim_given_wins(tmp_path):
    m = get_model(str(write_json(tmp_path / "a.json", dict(LLAMA_3_8B_CONFIG, num_key_value_heads=None))))
    assert (m.num_kv_heads, m.attention) == (32, "mha")
    odd = dict(LLAMA_3_8B_CONFIG, hidden_size=4000, head_dim=128)  # 4000 / 32 = 125, but head_dim says 128
    assert get_model(str(write_json(tmp_path / "b.json", odd))).head_dim == 128


@pytest.mark.parametrize("data, message", [
    ({"num_layers": 2, "hidden_size": 65, "num_attention_heads": 4, "num_params": 10},
     "hidden_size 65 is not a multiple of num_attention_heads 4; give head_dim"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 0, "num_params": 10},
     "num_attention_heads must be a positive integer"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_kv_heads": 3, "num_params": 10},
     r"num_kv_heads \(3\) must divide num_attention_heads \(4\)"),
    ({"num_layers": 32.5, "hidden_size": 64, "num_attention_heads": 4, "num_params": 10},
     "num_layers must be a positive integer <= 2\\*\\*31, got 32.5"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_params": "1e999"},
     "num_params must be a number from 1 to 1e15, got '1e999'"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_params": float("inf")},
     "num_params must be a number from 1 to 1e15, got inf"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_params": float("nan")},
     "num_params must be a number from 1 to 1e15, got nan"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_params": 1e400},
     "num_params must be a number from 1 to 1e15"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_params": 10, 3: 4},
     "unknown model key 3"),
    ({"base": 5}, "base must be a model name, a path or a mapping, got 5"),
    ({"base": "nope"}, "inline model: base: unknown model 'nope'"),
])
def test_bad_inline_shapes_and_numbers(data, message):
    with pytest.raises(KvsimError, match=message) as exc:
        get_model(data)
    assert str(exc.value).startswith("inline model:") and "\n" not in str(exc.value)


def test_base_override_of_head_counts_updates_the_attention_kind():
    m = get_model({"base": "llama-2-7b", "num_kv_heads": 8})  # was mha with 32 KV heads
    assert (m.attention, m.kv_bytes_per_token("bf16")) == ("gqa", 2 * 32 * 8 * 128 * 2)


def test_self_referencing_and_cyclic_base_files(tmp_path):
    me = tmp_path / "me.yaml"
    me.write_text(f"base: {me}\nnum_layers: 3\n")
    with pytest.raises(KvsimError, match=r"me.yaml: base models form a loop: 'me.yaml -> me.yaml'"):
        get_model(str(me))
    (tmp_path / "a.yaml").write_text(f"base: {tmp_path / 'b.yaml'}\n")
    (tmp_path / "b.yaml").write_text(f"base: {tmp_path / 'a.yaml'}\n")
    with pytest.raises(KvsimError, match=r"base models form a loop: 'a.yaml -> b.yaml -> a.yaml'"):
        get_model(str(tmp_path / "a.yaml"))
    loop: dict = {}
    loop["base"] = loop
    with pytest.raises(KvsimError, match="more than 8 nested base models"):
        get_model(loop)


def test_base_chains_are_bounded(tmp_path):
    for i in range(10):
        nxt = f"base: {tmp_path / f'c{i + 1}.yaml'}" if i < 9 else "base: llama-3-8b"
        (tmp_path / f"c{i}.yaml").write_text(nxt + "\n")
    assert get_model(str(tmp_path / "c3.yaml")).num_kv_heads == 8  # 7 links
    with pytest.raises(KvsimError, match="more than 8 nested base models"):
        get_model(str(tmp_path / "c0.yaml"))


@pytest.mark.parametrize("name, content, message", [
    ("latin1.yaml", b"num_layers: 2\nname: caf\xe9\n", r"latin1.yaml:2: not UTF-8 text"),
    ("nul.yaml", b"num_layers: 2\x00\n", "binary data"),
    ("nan.json", b'{"model_type": "llama", "hidden_size": NaN}', "NaN is not a finite number"),
    ("inf.json", b'{"model_type": "llama", "hidden_size": 1e999}', "out of range"),
    ("deep.json", b"[" * 1000 + b"]" * 1000, "nesting deeper than 64 levels"),
    ("inf.yaml", b"num_layers: .inf\n", "not finite"),
])
def test_model_files_are_read_through_bounded_inputs(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(KvsimError, match=message) as exc:
        get_model(str(path))
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)


def test_a_folder_named_like_a_model_file(tmp_path):
    (tmp_path / "m.yaml").mkdir()
    with pytest.raises(KvsimError, match="m.yaml: is a directory, expected a model file"):
        get_model(str(tmp_path / "m.yaml"))


def test_odd_names_are_quoted_in_one_line():
    for name in ("a\nb", "x" * 5000, "nul\x00name"):
        with pytest.raises(KvsimError) as exc:
            get_model(name)
        assert "\n" not in str(exc.value) and len(str(exc.value)) < 500  # the known names grow
