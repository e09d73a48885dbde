"""A Hugging Face config.json -> ModelSpec: shapes, which layer is which, state and compression shapes, the
weight dtype, and an estimated parameter count (kvsim/specs/hf_params.py).

Layer kinds, first rule that applies:
- `compress_ratios` (DeepSeek-V4; the entries past num_hidden_layers describe MTP layers and are
  dropped): ratio > 0 compressed, 0 sliding (window `sliding_window`);
- `hybrid_override_pattern` (Nemotron-H; or its `layers_block_type` list of mamba / attention / mlp /
  moe): `M` Mamba-2 state, `*` attention, `-` MLP and `E` MoE (no KV: kind none); Jamba-style
  `attn_layer_period` configs (Mamba-1 layers) are an error rather than read as all-attention;
- `layer_types`: full_attention / attention -> full, sliding_attention -> sliding, linear_attention ->
  state (Qwen3-Next's Gated DeltaNet);
- Gemma-3 (`sliding_window_pattern` N, default 6): layer i is global (full) when (i + 1) % N == 0,
  else sliding; Gemma-2: even layers sliding, odd full; Qwen3-Next (`full_attention_interval` N):
  layer i full when (i + 1) % N == 0, else state;
- `sliding_window` (unless `use_sliding_window` is false): with `use_sliding_window` true and
  `max_window_layers` (Qwen2), layers from max_window_layers on are sliding; else every layer (Mistral).
Sliding layers whose model gives no window (use_sliding_window false) are full.

Mixture of experts (kvsim/specs/hf_params.py `routed_experts`, `moe_layers`, `shared_expert_width`): the
routed experts and top-k (n_routed_experts / num_local_experts / num_experts, num_experts_per_tok /
experts_per_token), their moe_intermediate_size (gpt-oss: intermediate_size), the shared experts, and
which layers are MoE (first_k_dense_replace, moe_layer_freq, decoder_sparse_step, mlp_only_layers,
Nemotron-H's `E` blocks); the parameter counts use the same layer rule.

Family defaults for keys a config leaves out (its transformers config class's defaults):
`tie_word_embeddings` true for gemma, gemma2, gemma3(_text) and opt, false otherwise; Gemma-2 vocab 256000,
sliding_window 4096; Gemma-3 vocab 262208, max_position_embeddings 131072, sliding_window 4096. A
multimodal config's `text_config` is read (Gemma-3). The weight dtype follows `quantization_config`
(quant_method fp8 -> fp8, mxfp4 -> mxfp4; DeepSeek-V4's expert_dtype fp4 -> mxfp4, its experts being
nearly all of the weights), else `torch_dtype` / `dtype`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvsim.errors import KvsimError, excerpt
from kvsim.specs.dtypes import normalize_dtype
from kvsim.specs.hf_params import estimate_params, moe_layers, routed_experts, shared_expert_width
from kvsim.specs.model import MAX_DIM, MAX_PARAMS, ModelSpec, check_int

_HF_INTS: dict[str, int] = {
    "num_hidden_layers": 1, "n_layer": 1, "num_layers": 1, "hidden_size": 1, "n_embd": 1, "d_model": 1,
    "num_attention_heads": 1, "n_head": 1, "num_key_value_heads": 1, "head_dim": 1, "attention_head_dim": 1,
    "v_head_dim": 1, "qk_nope_head_dim": 1, "intermediate_size": 1, "ffn_dim": 1, "n_inner": 1,
    "vocab_size": 1, "max_position_embeddings": 1, "sliding_window": 0, "max_window_layers": 0,
    "sliding_window_pattern": 1, "_sliding_window_pattern": 1, "full_attention_interval": 1,
    "kv_lora_rank": 0, "qk_rope_head_dim": 0, "q_lora_rank": 0, "o_lora_rank": 0, "o_groups": 1,
    "n_routed_experts": 0, "num_local_experts": 0, "num_experts": 0, "num_experts_per_tok": 0,
    "experts_per_token": 0, "first_k_dense_replace": 0, "moe_intermediate_size": 1, "n_shared_experts": 0,
    "shared_expert_intermediate_size": 0, "moe_shared_expert_intermediate_size": 0,
    "mamba_num_heads": 1, "mamba_head_dim": 1, "ssm_state_size": 1, "n_groups": 1, "conv_kernel": 1,
    "expand": 1, "linear_num_key_heads": 1, "linear_num_value_heads": 1, "linear_key_head_dim": 1,
    "linear_value_head_dim": 1, "linear_conv_kernel_dim": 1, "index_head_dim": 0, "index_n_heads": 0,
    "index_topk": 0, "hc_mult": 1, "moe_layer_freq": 1, "decoder_sparse_step": 1,
}
"""config.json keys kvsim reads as integers, with their least value (null means absent)."""
_HF_BOOLS = ("tie_word_embeddings", "use_sliding_window", "attention_bias", "use_bias", "use_conv_bias",
             "mamba_proj_bias")
_HF_STRS = ("model_type", "torch_dtype", "dtype", "_name_or_path", "hybrid_override_pattern", "expert_dtype")

_FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma": {"tie_word_embeddings": True},
    "gemma2": {"tie_word_embeddings": True, "vocab_size": 256000, "sliding_window": 4096},
    "gemma3_text": {"tie_word_embeddings": True, "vocab_size": 262208, "max_position_embeddings": 131072,
                    "sliding_window": 4096},
    "gemma3": {"tie_word_embeddings": True, "vocab_size": 262208, "max_position_embeddings": 131072,
               "sliding_window": 4096},
    "opt": {"tie_word_embeddings": True},
}
_LAYER_TYPES = {"full_attention": "full", "attention": "full", "sliding_attention": "sliding",
                "linear_attention": "state"}
_PATTERN = {"M": "state", "*": "full", "-": "none", "E": "none"}


def spec_from_hf_config(cfg: dict[str, Any], source: str) -> ModelSpec:
    """Map a Hugging Face config.json onto a ModelSpec (module docstring). num_params is estimated from the
    shapes (the file does not carry it). Every key read is type-checked (one-line KvsimError naming the
    key); num_key_value_heads null or absent means as many KV heads as attention heads, 0 is an error;
    without head_dim (v_head_dim / qk_nope_head_dim for MLA), hidden_size must be a multiple of
    num_attention_heads."""
    cfg = _checked_hf(_flatten(cfg, source), source)

    def need(*keys: str) -> Any:
        for key in keys:
            if key in cfg:
                return cfg[key]
        raise KvsimError(f"{source}: missing key {keys[0]!r}")

    layers = need("num_hidden_layers", "n_layer", "num_layers")
    hidden = need("hidden_size", "n_embd", "d_model")
    heads = need("num_attention_heads", "n_head")
    kv_heads = cfg.get("num_key_value_heads", heads)
    v4 = "compress_ratios" in cfg
    mla = bool(cfg.get("kv_lora_rank")) or v4
    mla_dims = ("v_head_dim", "qk_nope_head_dim")
    dim_keys = mla_dims if cfg.get("kv_lora_rank") else ("head_dim", "attention_head_dim")
    head_dim = next((cfg[k] for k in dim_keys if k in cfg), None) or _head_dim(hidden, heads, source)
    all_moe = "moe_intermediate_size" in cfg and "intermediate_size" not in cfg  # DeepSeek-V4: no dense MLP
    ffn = need("intermediate_size", "ffn_dim", "n_inner", *(("moe_intermediate_size",) if all_moe else ()))
    vocab = need("vocab_size")
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    kinds = _layer_kinds(cfg, layers, window, source)
    if "sliding" in kinds and not window:
        kinds = tuple("full" if k == "sliding" else k for k in kinds)
    state = _state_shapes(cfg, hidden, source) if "state" in kinds else {}
    ratios = tuple(cfg["compress_ratios"][:layers]) if v4 else ()
    rope = cfg.get("qk_rope_head_dim") or 0
    rank = cfg.get("kv_lora_rank") or (head_dim - rope if v4 else 0)
    if v4 and rank < 1:
        raise KvsimError(f"{source}: head_dim ({head_dim}) must exceed qk_rope_head_dim ({rope})")
    total, active = estimate_params(cfg, kinds, layers, hidden, heads, kv_heads, head_dim, ffn, vocab)
    if total > MAX_PARAMS:
        raise KvsimError(f"{source}: the shapes give {total:.3g} parameters, more than {MAX_PARAMS:.0e}")
    experts, per_tok = routed_experts(cfg)
    moe = moe_layers(cfg, layers)
    shared, shared_width = shared_expert_width(cfg, ffn)
    experts_fields = {} if not moe else {
        "num_experts": experts, "experts_per_token": per_tok,
        "moe_intermediate_size": cfg.get("moe_intermediate_size") or ffn, "num_shared_experts": shared,
        "shared_expert_intermediate_size": shared_width,
        "moe_layers": () if len(moe) == layers else moe}
    name = str(cfg.get("_name_or_path") or Path(source).parent.name or "hf-model").split("/")[-1]
    typed = kinds if any(k != "full" for k in kinds) else ()
    try:
        return ModelSpec(
            name=name.lower(), num_layers=layers, hidden_size=hidden, num_attention_heads=heads,
            num_kv_heads=kv_heads, head_dim=head_dim, intermediate_size=ffn, vocab_size=vocab,
            num_params=total, active_params=active,
            attention="mla" if mla else _attention_kind(heads, kv_heads),
            max_position_embeddings=cfg.get("max_position_embeddings") or 2048,
            kv_lora_rank=rank, qk_rope_head_dim=rope,
            sliding_window=window if "sliding" in kinds or ratios else None, layer_types=typed, **state,
            compress_ratios=ratios, index_head_dim=cfg.get("index_head_dim") or 0 if v4 else 0,
            index_num_heads=cfg.get("index_n_heads") or 0 if v4 else 0,
            index_topk=cfg.get("index_topk") or 0 if v4 else 0,
            weight_dtype=_weight_dtype(cfg), tie_word_embeddings=cfg.get("tie_word_embeddings", False),
            source=source, **experts_fields)
    except KvsimError as exc:
        raise KvsimError(f"{source}: {exc}") from None


def _attention_kind(heads: int, kv_heads: int) -> str:
    return "mha" if kv_heads == heads else "mqa" if kv_heads == 1 else "gqa"


def _head_dim(hidden: int, heads: int, source: str) -> int:
    """hidden / heads, which must be a whole number (never silently floored)."""
    if hidden % heads:
        raise KvsimError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads};"
                         " give head_dim")
    return hidden // heads


def _flatten(cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """The text model's keys (a multimodal config's text_config over the top level), then the family's
    defaults for keys left out."""
    text = cfg.get("text_config")
    if text is not None:
        if not isinstance(text, dict):
            raise KvsimError(f"{source}: text_config must be a mapping, got {excerpt(text)}")
        cfg = {**{k: v for k, v in cfg.items() if k != "text_config"}, **text}
    family = cfg.get("model_type")
    defaults = _FAMILY_DEFAULTS.get(family, {}) if isinstance(family, str) else {}
    return {**defaults, **{k: v for k, v in cfg.items() if v is not None}}


def _checked_hf(cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """The keys of cfg that kvsim reads, each checked for its type: integers (not bools or floats)
    within [least, MAX_DIM], true/false flags, strings, lists (layer_types of strings, compress_ratios of
    integers). null counts as absent."""
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        if value is None:
            continue
        if key in _HF_INTS:
            problem = check_int(value, _HF_INTS[key], MAX_DIM)
            if problem:
                raise KvsimError(f"{source}: {key} {problem}")
        elif key in _HF_BOOLS and not isinstance(value, bool):
            raise KvsimError(f"{source}: {key} must be true or false, got {excerpt(value)}")
        elif key in _HF_STRS and not isinstance(value, str):
            raise KvsimError(f"{source}: {key} must be a string, got {excerpt(value)}")
        elif key in ("layer_types", "compress_ratios", "mlp_only_layers"):
            _check_list(key, value, source)
        out[key] = value
    return out


def _check_list(key: str, value: Any, source: str) -> None:
    if not isinstance(value, list):
        raise KvsimError(f"{source}: {key} must be a list, got {excerpt(value)}")
    for i, item in enumerate(value):
        if key == "layer_types" and item not in _LAYER_TYPES:
            raise KvsimError(f"{source}: layer_types[{i}] must be one of {', '.join(_LAYER_TYPES)},"
                             f" got {excerpt(item)}")
        if key in ("compress_ratios", "mlp_only_layers"):
            problem = check_int(item, 0, MAX_DIM)
            if problem:
                raise KvsimError(f"{source}: {key}[{i}] {problem}")


def _layer_kinds(cfg: dict[str, Any], layers: int, window: int | None, source: str) -> tuple[str, ...]:
    """One layer kind per layer (module docstring)."""
    family = cfg.get("model_type")
    if "compress_ratios" in cfg:
        ratios = cfg["compress_ratios"]
        if len(ratios) < layers:
            raise KvsimError(f"{source}: compress_ratios has {len(ratios)} entries, fewer than the {layers}"
                             " layers")
        return tuple("compressed" if r else "sliding" for r in ratios[:layers])
    if "attn_layer_period" in cfg or "attn_layer_offset" in cfg:
        raise KvsimError(f"{source}: Jamba-style layer patterns (attn_layer_period, Mamba-1 layers) are not"
                         " read; write the model as a YAML spec with layer_types")
    blocks = cfg.get("layers_block_type")
    if isinstance(blocks, list) and family == "nemotron_h":  # newer Nemotron-H configs: one name per block
        names = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
        if any(b not in names for b in blocks):
            raise KvsimError(f"{source}: layers_block_type entries must be one of {', '.join(names)}")
        cfg["hybrid_override_pattern"] = "".join(names[b] for b in blocks)
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None:
        if len(pattern) != layers or any(c not in _PATTERN for c in pattern):
            raise KvsimError(f"{source}: hybrid_override_pattern must have one of {''.join(_PATTERN)} per"
                             f" layer ({layers}), got {excerpt(pattern)}")
        return tuple(_PATTERN[c] for c in pattern)
    types = cfg.get("layer_types")
    if types is not None:
        if len(types) != layers:
            raise KvsimError(f"{source}: layer_types has {len(types)} entries, num_hidden_layers is {layers}")
        return tuple(_LAYER_TYPES[t] for t in types)
    if family in ("gemma3", "gemma3_text"):
        every = cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or 6
        return tuple("full" if (i + 1) % every == 0 else "sliding" for i in range(layers))
    if family == "gemma2":
        return tuple("sliding" if i % 2 == 0 else "full" for i in range(layers))
    if family == "qwen3_next":
        every = cfg.get("full_attention_interval") or 4
        return tuple("full" if (i + 1) % every == 0 else "state" for i in range(layers))
    if window:
        qwen2 = cfg.get("use_sliding_window") and "max_window_layers" in cfg
        first = cfg["max_window_layers"] if qwen2 else 0
        return tuple("sliding" if i >= first else "full" for i in range(layers))
    return ("full",) * layers


def _state_shapes(cfg: dict[str, Any], hidden: int, source: str) -> dict[str, Any]:
    """ModelSpec ssm_* fields for the config's state layers (Nemotron-H's Mamba-2, Qwen3-Next's Gated
    DeltaNet)."""
    family = cfg.get("model_type")
    if family == "nemotron_h":
        for key in ("mamba_head_dim", "ssm_state_size"):
            if key not in cfg:
                raise KvsimError(f"{source}: missing key {key!r} (Mamba-2 layers)")
        if "mamba_num_heads" not in cfg:  # d_inner = expand * hidden
            cfg["mamba_num_heads"] = (cfg.get("expand") or 2) * hidden // cfg["mamba_head_dim"]
        return {"ssm_kind": "mamba2", "ssm_num_heads": cfg["mamba_num_heads"],
                "ssm_head_dim": cfg["mamba_head_dim"], "ssm_state_size": cfg["ssm_state_size"],
                "ssm_groups": cfg.get("n_groups") or 1, "ssm_conv_kernel": cfg.get("conv_kernel") or 4}
    keys = ("linear_num_value_heads", "linear_value_head_dim", "linear_key_head_dim", "linear_num_key_heads")
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise KvsimError(f"{source}: linear-attention layers need {missing[0]!r} (Gated DeltaNet shapes;"
                         " other state-layer families are not read)")
    return {"ssm_kind": "gdn", "ssm_num_heads": cfg["linear_num_value_heads"],
            "ssm_head_dim": cfg["linear_value_head_dim"], "ssm_state_size": cfg["linear_key_head_dim"],
            "ssm_groups": cfg["linear_num_key_heads"],
            "ssm_conv_kernel": cfg.get("linear_conv_kernel_dim") or 4}


def _weight_dtype(cfg: dict[str, Any]) -> str:
    quant = cfg.get("quantization_config")
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    if cfg.get("expert_dtype") == "fp4" or method == "mxfp4":
        return "mxfp4"
    if method == "fp8":
        return "fp8"
    return normalize_dtype(cfg.get("torch_dtype") or cfg.get("dtype") or "bf16")
