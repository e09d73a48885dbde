"""Built-in models (from each model's published Hugging Face config.json) and `get_model`, which also
accepts inline specs, YAML files and Hugging Face config.json files (kvsim/specs/model_files.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from kvsim.specs.dtypes import QUANTIZATION
from kvsim.specs.hf_config import spec_from_hf_config
from kvsim.specs.model import ModelSpec

_HF = "https://huggingface.co/{}/blob/main/config.json"


def _attention_kind(heads: int, kv_heads: int) -> str:
    return "mha" if kv_heads == heads else "mqa" if kv_heads == 1 else "gqa"


def _spec(key: str, repo: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int,
          vocab: int, params: int, max_pos: int, dtype: str, **extra: Any) -> ModelSpec:
    attention = extra.pop("attention", None) or _attention_kind(heads, kv_heads)
    return ModelSpec(name=key, num_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                     num_kv_heads=kv_heads, head_dim=extra.pop("head_dim", hidden // heads),
                     intermediate_size=ffn, vocab_size=vocab, num_params=params,
                     active_params=extra.pop("active_params", params), attention=attention,
                     max_position_embeddings=max_pos, weight_dtype=dtype, source=_HF.format(repo),
                     **extra)


def _hf(key: str, repo: str, config: dict[str, Any]) -> ModelSpec:
    """A built-in model read from (the keys kvsim uses of) its published config.json; num_params and
    active_params are estimated from the shapes (kvsim/specs/hf_params.py)."""
    return replace(spec_from_hf_config(config, _HF.format(repo)), name=key)


_GPT_OSS = {  # openai/gpt-oss-20b and -120b share everything but the layer and expert counts
    "model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "attention_bias": True, "head_dim": 64,
    "hidden_size": 2880, "intermediate_size": 2880, "max_position_embeddings": 131072,
    "num_attention_heads": 64, "num_experts_per_tok": 4, "experts_per_token": 4, "num_key_value_heads": 8,
    "quantization_config": {"quant_method": "mxfp4"}, "sliding_window": 128, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 201088,
}
_DEEPSEEK_V4 = {  # shared by DeepSeek-V4-Flash and -Pro
    "model_type": "deepseek_v4", "architectures": ["DeepseekV4ForCausalLM"], "expert_dtype": "fp4",
    "hc_mult": 4,
    "head_dim": 512, "index_head_dim": 128, "index_n_heads": 64, "max_position_embeddings": 1048576,
    "n_shared_experts": 1, "num_experts_per_tok": 6, "num_key_value_heads": 1, "o_lora_rank": 1024,
    "qk_rope_head_dim": 64, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"},
    "sliding_window": 128,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 129280,
}

# num_params: exact counts from the shapes (they match the published safetensors totals).
_BUILTIN: tuple[ModelSpec, ...] = (
    _spec("opt-13b", "facebook/opt-13b", 40, 5120, 40, 40, 20480, 50272, 12_853_473_280, 2048,
          "fp16", tie_word_embeddings=True),
    _spec("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 11008, 32000, 6_738_415_616,
          4096, "fp16"),
    _spec("llama-2-13b", "meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 13824, 32000,
          13_015_864_320, 4096, "fp16"),
    _spec("llama-2-70b", "meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 28672, 32000,
          68_976_648_192, 4096, "fp16"),
    _spec("llama-3-8b", "meta-llama/Meta-Llama-3-8B", 32, 4096, 32, 8, 14336, 128256,
          8_030_261_248, 8192, "bf16"),
    _spec("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 64, 8, 28672, 128256,
          70_553_706_496, 8192, "bf16"),
    _spec("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 14336, 128256,
          8_030_261_248, 131072, "bf16"),
    _spec("llama-3.1-70b", "meta-llama/Llama-3.1-70B", 80, 8192, 64, 8, 28672, 128256,
          70_553_706_496, 131072, "bf16"),
    _spec("llama-3.1-405b", "meta-llama/Llama-3.1-405B", 126, 16384, 128, 8, 53248, 128256,
          405_853_388_800, 131072, "bf16"),
    _spec("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 32, 8, 14336, 32000, 7_241_732_096,
          32768, "bf16", sliding_window=4096, sliding_window_layers=32),
    _spec("qwen2.5-7b", "Qwen/Qwen2.5-7B", 28, 3584, 28, 4, 18944, 152064, 7_615_616_512, 131072,
          "bf16"),
    _spec("qwen2.5-72b", "Qwen/Qwen2.5-72B", 80, 8192, 64, 8, 29568, 152064, 72_706_203_648,
          131072, "bf16"),
    # MLA + MoE: 64 routed experts (6 active) + 2 shared, first layer dense (intermediate 10944).
    # Published as 15.7B total / 2.4B active; active here includes both embeddings like num_params.
    _spec("deepseek-v2-lite", "deepseek-ai/DeepSeek-V2-Lite", 27, 2048, 16, 16, 10944, 102400,
          15_706_484_224, 163840, "bf16", attention="mla", head_dim=128, kv_lora_rank=512,
          qk_rope_head_dim=64, active_params=2_661_150_208, num_experts=64, experts_per_token=6,
          moe_intermediate_size=1408, num_shared_experts=2, shared_expert_intermediate_size=2816,
          moe_layers=tuple(range(1, 27))),
    # ---- read from their config.json (num_params estimated from the shapes; see docs/specs.md) ----
    # Gemma-2: 21 sliding (4096) + 21 global layers alternating; tie_word_embeddings left out = tied.
    _hf("gemma-2-9b", "google/gemma-2-9b", {
        "model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "head_dim": 256, "hidden_size": 3584,
        "intermediate_size": 14336, "max_position_embeddings": 8192, "num_attention_heads": 16,
        "num_hidden_layers": 42, "num_key_value_heads": 8, "sliding_window": 4096, "torch_dtype": "bfloat16",
        "vocab_size": 256000}),
    # Gemma-3: the text model of the multimodal config; every 6th layer global (10 of 62), the others a
    # 1024-token window; vocab_size and tie_word_embeddings are Gemma3TextConfig's defaults (262208, tied).
    _hf("gemma-3-27b", "google/gemma-3-27b-it", {
        "model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
        "torch_dtype": "bfloat16",
        "text_config": {"model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376,
                        "intermediate_size": 21504, "num_attention_heads": 32, "num_hidden_layers": 62,
                        "num_key_value_heads": 16, "query_pre_attn_scalar": 168, "sliding_window": 1024}}),
    # gpt-oss: layers alternate a 128-token window and full attention; attention sinks are learned
    # per-head logits (no KV); MoE experts in MXFP4, the rest BF16.
    _hf("gpt-oss-20b", "openai/gpt-oss-20b", {
        **_GPT_OSS, "num_hidden_layers": 24, "num_local_experts": 32,
        "layer_types": ["sliding_attention", "full_attention"] * 12}),
    _hf("gpt-oss-120b", "openai/gpt-oss-120b", {
        **_GPT_OSS, "num_hidden_layers": 36, "num_local_experts": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 18}),
    # MLA + MoE, FP8 weights: 256 routed experts (8 active) + 1 shared, first 3 layers dense. The one
    # multi-token-prediction layer (num_nextn_predict_layers) is not counted.
    _hf("deepseek-v3", "deepseek-ai/DeepSeek-V3", {
        "model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "first_k_dense_replace": 3,
        "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
        "max_position_embeddings": 163840, "moe_intermediate_size": 2048, "n_routed_experts": 256,
        "n_shared_experts": 1, "num_attention_heads": 128,
        "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128, "q_lora_rank": 1536,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}, "torch_dtype": "bfloat16",
        "tie_word_embeddings": False}),
    # Qwen3 MoE: every layer MoE (decoder_sparse_step 1, no mlp_only_layers), 128 routed experts (8
    # active), no shared expert; BF16 weights.
    _hf("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B", {
        "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False,
        "decoder_sparse_step": 1, "head_dim": 128, "hidden_size": 4096, "intermediate_size": 12288,
        "max_position_embeddings": 40960, "mlp_only_layers": [], "moe_intermediate_size": 1536,
        "num_attention_heads": 64, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 94,
        "num_key_value_heads": 4, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "vocab_size": 151936}),
    # Hybrid Mamba-2: 24 Mamba-2 + 4 attention + 24 MLP blocks (hybrid_override_pattern).

    _hf("nemotron-h-8b", "nvidia/Nemotron-H-8B-Base-8K", {
        "model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "attention_bias": False,
        "attention_head_dim": 128, "conv_kernel": 4, "expand": 2, "hidden_size": 4096,
        "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
        "intermediate_size": 21504, "mamba_head_dim": 64, "mamba_num_heads": 128, "mamba_proj_bias": False,
        "max_position_embeddings": 8192, "n_groups": 8, "num_attention_heads": 32, "num_hidden_layers": 52,
        "num_key_value_heads": 8, "ssm_state_size": 128, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_bias": False, "use_conv_bias": True, "vocab_size": 131072}),
    # DeepSeek-V4: CSA (ratio 4, indexer top-k) and HCA (ratio 128) layers, a 128-token uncompressed window
    # on every layer; FP8 weights with FP4 (MXFP4) experts. compress_ratios: the first num_hidden_layers
    # entries of the published list (the last entry is the MTP layer's).
    _hf("deepseek-v4-flash", "deepseek-ai/DeepSeek-V4-Flash", {
        **_DEEPSEEK_V4, "hidden_size": 4096, "index_topk": 512, "moe_intermediate_size": 2048,
        "n_routed_experts": 256, "num_attention_heads": 64, "num_hidden_layers": 43, "o_groups": 8,
        "q_lora_rank": 1024, "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0]}),
    _hf("deepseek-v4-pro", "deepseek-ai/DeepSeek-V4-Pro", {
        **_DEEPSEEK_V4, "hidden_size": 7168, "index_topk": 1024, "moe_intermediate_size": 3072,
        "n_routed_experts": 384, "num_attention_heads": 128, "num_hidden_layers": 61, "o_groups": 16,
        "q_lora_rank": 1536, "compress_ratios": [128, 128] + [4, 128] * 29 + [4, 0]}),
)
CATALOG: dict[str, ModelSpec] = {m.name: m for m in _BUILTIN}
# Hugging Face repo ids (full or the part after the slash) resolve to the same entries.
_ALIASES: dict[str, str] = {}
for _m in _BUILTIN:
    _repo = _m.source.split("huggingface.co/")[1].split("/blob/")[0].lower()
    _ALIASES[_repo] = _ALIASES[_repo.split("/")[1]] = _m.name


def list_models() -> list[str]:
    """Names of the built-in models, sorted."""
    return sorted(CATALOG)


def lookup(key: str) -> ModelSpec | None:
    """The built-in model a lowercase name or Hugging Face repo id names, or None."""
    name = _ALIASES.get(key, key)
    return CATALOG.get(name)


def known_names() -> list[str]:
    """Every name and repo id lookup() knows (for close-match suggestions)."""
    return list(CATALOG) + list(_ALIASES)


def get_model(name_or_spec: str | Path | dict[str, Any] | ModelSpec) -> ModelSpec:
    """Resolve a model: a ModelSpec (returned as is), a catalog name or Hugging Face repo id
    (case-insensitive), an inline dict of ModelSpec fields (optionally `base: <model>` plus
    overrides), or a path to a YAML file of such fields or to a Hugging Face config.json (or a folder
    holding one). `base:` chains are followed at most MAX_BASE_CHAIN deep; a loop is an error."""
    from kvsim.specs.model_files import resolve

    return resolve(name_or_spec, ())


def spec_from_dict(data: dict[str, Any], source: str) -> ModelSpec:
    """Build a ModelSpec from ModelSpec field names. Required: num_layers, hidden_size,
    num_attention_heads, and either num_params or intermediate_size + vocab_size (then num_params is
    estimated as a Llama-style dense model). head_dim defaults to hidden_size / num_attention_heads,
    which must then divide evenly. `base: <model>` (a name, a file or a mapping) starts from that
    model instead. num_params / active_params may be floats or strings such as '7.2e9'."""
    from kvsim.specs.model_files import from_dict

    return from_dict(data, source, (source,))


__all__ = ["CATALOG", "get_model", "list_models", "lookup", "known_names", "spec_from_dict",
           "spec_from_hf_config"]


def with_quantization(model: ModelSpec, quantization: str | None) -> ModelSpec:
    """`model` with the weight dtype of a scenario's `quantization` (kvsim/specs/dtypes.py QUANTIZATION;
    none: bf16, unless the model's weights are already unquantized); unchanged when it is None."""
    if quantization is None:
        return model
    dtype = QUANTIZATION[quantization]
    if dtype is None:
        dtype = model.weight_dtype if model.weight_dtype in ("fp32", "fp16", "bf16") else "bf16"
    return replace(model, weight_dtype=dtype)
