"""Layer-group models (`layer_cases`) and DeepSeek-V4 specs (`dsv4_cases`): inline specs and model YAML
files with `layer_types` (full / sliding / state / none), sliding windows, Mamba-2 and Gated DeltaNet
state layers (`ssm_*`), MLA; Hugging Face config.json files of such models (Gemma-2, Gemma-3's
text_config, gpt-oss layer_types, Mistral and Qwen2 windows, Nemotron-H's hybrid_override_pattern,
Qwen3-Next's linear attention), each shrunk to a few layers; and DeepSeek-V4's compressed layers
(compress_ratios, index_*), inline and as config.json. Valid, or with one bad field. The scenarios run
with the hybrid manager, with disable_hybrid_kv_cache_manager, with a hash prefix cache (refused with
state layers), or through validate / footprint."""

from __future__ import annotations

import json
from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import PASSWD_LINE, run_argv, small_scenario, to_yaml

# ---------------------------------------------------------------------------------------------------
# Inline specs with layer_types

HYBRID = {"name": "tiny-hybrid", "num_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
          "num_kv_heads": 2, "num_params": 2.0e8, "sliding_window": 128,
          "layer_types": ["state", "sliding", "state", "full"], "ssm_kind": "mamba2", "ssm_num_heads": 8,
          "ssm_head_dim": 32, "ssm_state_size": 16, "ssm_groups": 2, "ssm_conv_kernel": 4}
SLIDING = {"name": "tiny-sliding", "num_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
           "num_kv_heads": 2, "num_params": 2.0e8, "sliding_window": 64,
           "layer_types": ["sliding", "full", "sliding", "full"]}
MLA = {"name": "tiny-mla", "num_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "num_kv_heads": 4,
       "head_dim": 64, "num_params": 2.0e8, "attention": "mla", "kv_lora_rank": 64, "qk_rope_head_dim": 16}
LAYER_BAD: tuple[tuple[str, Any, str], ...] = (  # (ssm_* may be 0 on a model without state layers)
    ("layer_types", ["state", "sliding", "state"], "fail"), ("layer_types", ["full"] * 5, "fail"),
    ("layer_types", ["none"] * 4, "fail"), ("layer_types", ["state"] * 4, "any"),
    ("layer_types", ["full", "bogus", "full", "full"], "fail"), ("layer_types", "full", "fail"),
    ("layer_types", [], "any"), ("layer_types", [1, 2, 3, 4], "fail"), ("layer_types", None, "any"),
    ("layer_types", ["sliding_attention", "full", "full", "full"], "any"),
    ("sliding_window", 0, "fail"), ("sliding_window", -1, "fail"), ("sliding_window", None, "fail"),
    ("sliding_window", 1.5, "fail"), ("sliding_window", 10**12, "fail"), ("sliding_window", 1, "any"),
    ("ssm_kind", "rwkv", "fail"), ("ssm_kind", "", "any"), ("ssm_kind", None, "fail"),
    ("ssm_kind", "gdn", "any"),
    ("ssm_num_heads", 0, "any"), ("ssm_num_heads", 3, "any"), ("ssm_num_heads", -8, "fail"),
    ("ssm_head_dim", 0, "any"), ("ssm_state_size", 0, "any"), ("ssm_state_size", True, "fail"),
    ("ssm_groups", 0, "any"), ("ssm_groups", 3, "any"), ("ssm_conv_kernel", 0, "any"),
    ("ssm_conv_kernel", 1.5, "fail"), ("ssm_dtype", "fp7", "fail"), ("ssm_dtype", "fp32", "any"),
    ("ssm_dtype", 16, "fail"), ("sliding_window_layers", 9, "fail"), ("sliding_window_layers", 2, "any"),
    ("num_layers", 3, "fail"), ("sink_tokens", 4, "fail"),
    ("ssm_num_heads", 10**12, "fail"),
)
MLA_BAD: tuple[tuple[str, Any, str], ...] = (
    ("kv_lora_rank", 0, "fail"), ("kv_lora_rank", -1, "fail"), ("kv_lora_rank", 1.5, "fail"),
    ("qk_rope_head_dim", -16, "fail"), ("qk_rope_head_dim", 0, "any"), ("attention", "MLA", "fail"),
    ("num_kv_heads", 1, "any"), ("layer_types", ["sliding", "full"], "fail"), ("sliding_window", 64, "any"),
)

# ---------------------------------------------------------------------------------------------------
# Hugging Face config.json of layer-group models, a few layers each

HF_HYBRIDS: dict[str, dict[str, Any]] = {
    "gemma2": {"model_type": "gemma2", "head_dim": 64, "hidden_size": 256, "intermediate_size": 512,
               "max_position_embeddings": 8192, "num_attention_heads": 4, "num_hidden_layers": 4,
               "num_key_value_heads": 2, "sliding_window": 128, "torch_dtype": "bfloat16",
               "vocab_size": 1000},
    "gemma3": {"model_type": "gemma3", "torch_dtype": "bfloat16",
               "text_config": {"model_type": "gemma3_text", "head_dim": 64, "hidden_size": 256,
                               "intermediate_size": 512, "num_attention_heads": 4, "num_hidden_layers": 6,
                               "num_key_value_heads": 2, "sliding_window": 128, "vocab_size": 1000}},
    "gpt_oss": {"model_type": "gpt_oss", "head_dim": 64, "hidden_size": 256, "intermediate_size": 256,
                "max_position_embeddings": 8192, "num_attention_heads": 4, "num_key_value_heads": 2,
                "num_hidden_layers": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
                "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 2,
                "torch_dtype": "bfloat16", "vocab_size": 1000,
                "quantization_config": {"quant_method": "mxfp4"}},
    "mistral": {"model_type": "mistral", "hidden_size": 256, "intermediate_size": 512,
                "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
                "sliding_window": 256, "vocab_size": 1000, "max_position_embeddings": 8192,
                "torch_dtype": "bfloat16"},
    "qwen2": {"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
              "num_hidden_layers": 4, "num_key_value_heads": 2, "sliding_window": 128,
              "use_sliding_window": True, "max_window_layers": 2, "vocab_size": 1000,
              "max_position_embeddings": 8192, "torch_dtype": "bfloat16"},
    "nemotron_h": {"model_type": "nemotron_h", "attention_head_dim": 64, "conv_kernel": 4, "expand": 2,
                   "hidden_size": 256, "hybrid_override_pattern": "M-M*--", "intermediate_size": 512,
                   "mamba_head_dim": 32, "mamba_num_heads": 16, "max_position_embeddings": 8192,
                   "n_groups": 2, "num_attention_heads": 4, "num_hidden_layers": 6, "num_key_value_heads": 2,
                   "ssm_state_size": 16, "torch_dtype": "bfloat16", "vocab_size": 1000},
    "qwen3_next": {"model_type": "qwen3_next", "hidden_size": 256, "intermediate_size": 512, "head_dim": 64,
                   "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 2,
                   "full_attention_interval": 4, "linear_num_value_heads": 8, "linear_value_head_dim": 32,
                   "linear_key_head_dim": 32, "linear_num_key_heads": 4, "linear_conv_kernel_dim": 4,
                   "vocab_size": 1000, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"},
}
HF_LAYER_BAD: tuple[tuple[str, str, str, str], ...] = (
    ("nemotron_h", "hybrid_override_pattern", '"M-M*-"', "fail"),
    ("nemotron_h", "hybrid_override_pattern", '"------"', "fail"),
    ("nemotron_h", "hybrid_override_pattern", '"MMMMMM"', "any"),
    ("nemotron_h", "hybrid_override_pattern", '"M-M*-X"', "fail"),
    ("nemotron_h", "hybrid_override_pattern", "7", "fail"), ("nemotron_h", "mamba_num_heads", "0", "fail"),
    ("nemotron_h", "ssm_state_size", "-1", "fail"), ("nemotron_h", "n_groups", "3", "any"),
    ("gpt_oss", "layer_types", '["sliding_attention"]', "fail"),
    ("gpt_oss", "layer_types", '["x", "y", "z", "w"]', "fail"), ("gpt_oss", "layer_types", '"full"', "fail"),
    ("gpt_oss", "sliding_window", "0", "any"), ("gpt_oss", "sliding_window", "null", "any"),
    ("gemma2", "sliding_window", "-1", "fail"), ("gemma3", "text_config", "5", "fail"),
    ("gemma3", "text_config", "[]", "fail"), ("gemma3", "sliding_window_pattern", "0", "fail"),
    ("gemma3", "sliding_window_pattern", "1", "any"), ("qwen2", "max_window_layers", "-1", "fail"),
    ("qwen2", "use_sliding_window", '"yes"', "fail"), ("qwen2", "max_window_layers", "99", "any"),
    ("qwen3_next", "full_attention_interval", "0", "fail"),
    ("qwen3_next", "linear_num_value_heads", "0", "fail"),
    ("qwen3_next", "linear_conv_kernel_dim", "1.5", "fail"),
    ("qwen3_next", "layer_types", '["linear_attention"]', "fail"),
    ("mistral", "sliding_window", "true", "fail"), ("mistral", "sliding_window", "1e400", "fail"),
)


def _hf_text(base: dict[str, Any], key: str, raw: str) -> str:
    return json.dumps({**base, key: "PLACEHOLDER"}).replace('"PLACEHOLDER"', raw)


def _scenario(model: Any, draw, requests: int = 4) -> dict[str, Any]:
    sc = small_scenario(requests, model=model)
    sc["workload"]["prompt_len"] = {"dist": "fixed", "value": draw(st.sampled_from([64, 300]))}
    option = draw(st.sampled_from(["", "", "disable-hybrid", "hash", "block-size", "chunked"]))
    if option == "disable-hybrid":
        sc["kv"] = {"disable_hybrid_kv_cache_manager": True}
    elif option == "hash":
        sc["kv"] = {"prefix_cache": "hash"}
    elif option == "block-size":
        sc["kv"] = {"block_size": 32}
    elif option == "chunked":
        sc["scheduler"] = {"max_num_batched_tokens": 128, "max_num_seqs": 4}
    return sc


def _has_state(model: Any) -> bool:
    text = json.dumps(model) if not isinstance(model, str) else model
    return any(k in text for k in ('"state"', "ssm_", "hybrid_override_pattern", "linear_", "nemotron",
                                   "compress_ratios", "deepseek-v4"))


@st.composite
def layer_cases(draw) -> Case:
    """A layer-group model (inline, model YAML or config.json), valid or with one bad field, run,
    validated or footprinted."""
    where = draw(st.sampled_from(["inline", "inline", "yaml", "hf", "hf", "catalog"]))
    files: dict[str, Any] = {}
    expect = "pass"
    if where in ("inline", "yaml"):
        base = draw(st.sampled_from([HYBRID, SLIDING, MLA]))
        model: Any = dict(base)
        what = base["name"]
        if draw(st.integers(0, 2)):
            key, value, expect = draw(st.sampled_from(MLA_BAD if base is MLA else LAYER_BAD))
            model[key] = value
            what += f" {key}: {value!r}"
        if where == "yaml":
            files["m.yaml"] = to_yaml(model)
            ref: Any = "m.yaml"
        else:
            ref = model
    elif where == "hf":
        family = draw(st.sampled_from(sorted(HF_HYBRIDS)))
        what = family
        if draw(st.integers(0, 2)):
            fam, key, raw, expect = draw(st.sampled_from(HF_LAYER_BAD))
            files["config.json"] = _hf_text(HF_HYBRIDS[fam], key, raw)
            what = f"{fam} {key}: {raw}"
            model = json.loads(files["config.json"]) if expect != "fail" else fam
        else:
            files["config.json"] = json.dumps(HF_HYBRIDS[family])
            model = HF_HYBRIDS[family]
        ref = "config.json"
    else:
        ref = model = draw(st.sampled_from(["mistral-7b", "gemma-2-9b", "gpt-oss-20b", "nemotron-h-8b",
                                            "gemma-3-27b", "deepseek-v2-lite"]))
        what = ref
    sc = _scenario(ref, draw)
    if where == "catalog":
        sc["hardware"] = "h200"
    state = _has_state(model)
    model_expect = expect
    if sc.get("kv", {}).get("prefix_cache") == "hash" and state and expect == "pass":
        expect = "fail"  # prefix caching with a per-sequence state is refused (docs/layer_groups.md)
    files["s.yaml"] = to_yaml(sc)
    command = draw(st.sampled_from(["run", "run", "validate", "footprint"]))
    if command == "footprint":  # (the model alone: the scenario's prefix cache does not apply)
        argv = ["footprint", ref if isinstance(ref, str) else "m.yaml", "--tokens",
                draw(st.sampled_from(["1000", "1"])), "--kv-dtype", draw(st.sampled_from(["bf16", "fp8"]))]
        if not isinstance(ref, str):
            files["m.yaml"] = to_yaml(ref)
        expect = model_expect
    elif command == "validate":
        argv = ["validate", "s.yaml"]
    else:
        argv = run_argv("s.yaml", "--no-plots")
    return Case("layers", argv, files, expect=expect, why=f"{where} {command}: {what}",
                forbid=(PASSWD_LINE,), validate_first=command == "run")


# ---------------------------------------------------------------------------------------------------
# DeepSeek-V4

DSV4 = {"model_type": "deepseek_v4", "expert_dtype": "fp4", "hc_mult": 4, "head_dim": 512,
        "index_head_dim": 128,
        "index_n_heads": 8, "max_position_embeddings": 65536, "n_shared_experts": 1, "num_experts_per_tok": 2,
        "num_key_value_heads": 1, "o_lora_rank": 256, "qk_rope_head_dim": 64, "sliding_window": 128,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 1000, "hidden_size": 512,
        "index_topk": 64, "moe_intermediate_size": 256, "n_routed_experts": 8, "num_attention_heads": 8,
        "num_hidden_layers": 4, "o_groups": 2, "q_lora_rank": 256, "compress_ratios": [0, 4, 128, 4]}
DSV4_BAD: tuple[tuple[str, str, str], ...] = (
    ("compress_ratios", "[0, 4, 128]", "fail"), ("compress_ratios", "[0, 4, 128, 4, 4]", "any"),
    ("compress_ratios", "[0, 0, 0, 0]", "any"), ("compress_ratios", "[0, 3, 128, 4]", "any"),
    ("compress_ratios", "[0, -4, 128, 4]", "fail"), ("compress_ratios", "[0, 4.5, 128, 4]", "fail"),
    ("compress_ratios", '"4"', "fail"), ("compress_ratios", "[]", "any"), ("compress_ratios", "null", "any"),
    ("index_topk", "0", "any"), ("index_topk", "-1", "fail"), ("index_head_dim", "-128", "fail"),
    ("index_n_heads", "1.5", "fail"), ("head_dim", "32", "fail"), ("head_dim", "64", "fail"),
    ("qk_rope_head_dim", "600", "fail"), ("sliding_window", "0", "fail"), ("sliding_window", "null", "any"),
    ("num_hidden_layers", "2", "any"), ("num_hidden_layers", "5", "fail"), ("expert_dtype", '"fp3"', "any"),
    ("n_routed_experts", "1", "fail"), ("num_experts_per_tok", "99", "fail"),
)
DSV4_DTYPES: tuple[tuple[Any, str], ...] = (
    ("bf16", "pass"), ("fp8", "pass"), ({"rope": "bf16", "rest": "fp8"}, "pass"),
    ({"rope": "bf16", "rest": {"bits": 8, "group_size": 128, "scale_bits": 32}}, "pass"),
    ({"rope": "fp7", "rest": "fp8"}, "fail"), ({"rope": "bf16"}, "any"), ("nvfp4", "pass"),
    ({"bits": 6}, "pass"),
)


@st.composite
def dsv4_cases(draw) -> Case:
    """A DeepSeek-V4 spec: a tiny config.json (or the catalog's Flash at TP 2 on H200s), valid or with one
    bad field, under a KV precision (per part for RoPE dims), run or footprinted."""
    files: dict[str, Any] = {}
    expect = "pass"
    what = "valid"
    if draw(st.integers(0, 4)) == 0:
        ref = draw(st.sampled_from(["deepseek-v4-flash", "deepseek-ai/DeepSeek-V4-Flash", "deepseek-v4-pro"]))
        what = ref
        if ref == "deepseek-v4-pro":
            expect = "any"  # (1.6T parameters: does not fit 8 GPUs of one profile at every dtype)
    else:
        text = json.dumps(DSV4)
        if draw(st.integers(0, 2)):
            key, raw, expect = draw(st.sampled_from(DSV4_BAD))
            text = _hf_text(DSV4, key, raw)
            what = f"{key}: {raw}"
        folder = draw(st.booleans())
        files["v4/config.json" if folder else "config.json"] = text
        ref = "v4" if folder else "config.json"
    dtype, verdict = draw(st.sampled_from(DSV4_DTYPES))
    if verdict != "pass":
        expect = verdict if expect == "pass" else expect if verdict == "any" else "fail"
    sc = small_scenario(3, model=ref, kv={"dtype": dtype})
    sc["workload"]["prompt_len"] = {"dist": "fixed", "value": draw(st.sampled_from([100, 600]))}
    if ref.startswith("deepseek"):
        sc["hardware"] = "h200"
        sc["parallelism"] = {"tensor_parallel_size": 8 if "pro" in ref else 2}
    model_expect = expect
    if draw(st.integers(0, 4)) == 0:
        sc["kv"]["prefix_cache"] = "hash"
        expect = "fail" if expect == "pass" else expect  # (its state cache: no prefix can hit)
    files["s.yaml"] = to_yaml(sc)
    if draw(st.integers(0, 3)) == 0:  # (the model alone: the scenario's prefix cache does not apply)
        dtype_text = dtype if isinstance(dtype, str) else json.dumps(dtype)
        argv = ["footprint", ref, "--tokens", "1000", "--kv-dtype", dtype_text]
        expect = model_expect
    else:
        argv = run_argv("s.yaml", "--no-plots")
    return Case("dsv4", argv, files, expect=expect, why=f"{ref}: {what}, kv.dtype {dtype!r}",
                forbid=(PASSWD_LINE,))
