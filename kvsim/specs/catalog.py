"""Built-in models (from each model's published Hugging Face config.json) and `get_model`, which also
accepts inline specs, YAML files and Hugging Face config.json files."""

from __future__ import annotations

import difflib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from kvsim.errors import KvsimError
from kvsim.specs.dtypes import normalize_dtype
from kvsim.specs.model import MODEL_FIELDS, ModelSpec, estimate_dense_params

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
          qk_rope_head_dim=64, active_params=2_661_150_208),
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


def get_model(name_or_spec: str | Path | dict[str, Any] | ModelSpec) -> ModelSpec:
    """Resolve a model: a ModelSpec (returned as is), a catalog name or Hugging Face repo id
    (case-insensitive), an inline dict of ModelSpec fields (optionally `base: <catalog name>` plus
    overrides), or a path to a YAML file of such fields or to a Hugging Face config.json (or a folder
    holding one)."""
    if isinstance(name_or_spec, ModelSpec):
        return name_or_spec
    if isinstance(name_or_spec, dict):
        return spec_from_dict(name_or_spec, "inline model")
    if not isinstance(name_or_spec, (str, Path)):
        raise KvsimError(f"model: expected a name, a path or a mapping, got {type(name_or_spec).__name__}")
    text = str(name_or_spec).strip()
    key = text.lower()
    if key in CATALOG or key in _ALIASES:
        return CATALOG[_ALIASES.get(key, key)]
    path = Path(text).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if path.is_file():
        return _load_file(path)
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        raise KvsimError(f"{text}: model file not found")
    close = difflib.get_close_matches(key, list(CATALOG) + list(_ALIASES), n=6, cutoff=0.5)
    close = list(dict.fromkeys(_ALIASES.get(c, c) for c in close))[:3]
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(list_models())}"
    raise KvsimError(f"unknown model {text!r} (not a built-in name or a file); {hint}")


def spec_from_dict(data: dict[str, Any], source: str) -> ModelSpec:
    """Build a ModelSpec from ModelSpec field names. Required: num_layers, hidden_size,
    num_attention_heads, and either num_params or intermediate_size + vocab_size (then num_params is
    estimated as a Llama-style dense model). `base: <model>` starts from that model instead."""
    data = dict(data)
    base_name = data.pop("base", None)
    unknown = sorted(set(data) - set(MODEL_FIELDS))
    if unknown:
        raise KvsimError(f"{source}: unknown model key {unknown[0]!r}; known: {', '.join(MODEL_FIELDS)}")
    for key in ("num_params", "active_params"):
        if isinstance(data.get(key), (float, str)):
            data[key] = _count(data[key], key, source)
    if base_name is not None:
        base = get_model(base_name)
        try:
            return replace(base, **{"name": f"{base.name}-custom", **data})
        except KvsimError as exc:
            raise KvsimError(f"{source}: {exc}") from None
    for key in ("num_layers", "hidden_size", "num_attention_heads"):
        if key not in data:
            raise KvsimError(f"{source}: missing model key {key!r}")
    data.setdefault("name", "custom")
    _check_ints(data, source)
    heads = data["num_attention_heads"]
    data.setdefault("num_kv_heads", heads)
    data.setdefault("head_dim", data["hidden_size"] // heads)
    data.setdefault("attention", _attention_kind(heads, data["num_kv_heads"]))
    data.setdefault("max_position_embeddings", 131072)
    if "num_params" not in data:
        for key in ("intermediate_size", "vocab_size"):
            if key not in data:
                raise KvsimError(f"{source}: give num_params, or {key!r} so it can be estimated")
        data["num_params"] = estimate_dense_params(
            data["num_layers"], data["hidden_size"], heads, data["num_kv_heads"], data["head_dim"],
            data["intermediate_size"], data["vocab_size"], bool(data.get("tie_word_embeddings")))
    data.setdefault("intermediate_size", 4 * data["hidden_size"])
    data.setdefault("vocab_size", 32000)
    data.setdefault("active_params", data["num_params"])
    data.setdefault("source", source)
    if data.get("sliding_window") and "sliding_window_layers" not in data:
        data["sliding_window_layers"] = data["num_layers"]
    try:
        return ModelSpec(**data)
    except KvsimError as exc:
        raise KvsimError(f"{source}: {exc}") from None


def _check_ints(data: dict[str, Any], source: str) -> None:
    for key, value in data.items():
        if key in ("name", "attention", "weight_dtype", "source", "tie_word_embeddings"):
            continue
        if value is None and key == "sliding_window":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise KvsimError(f"{source}: {key} must be a non-negative integer, got {value!r}")


def _count(value: float | str, key: str, source: str) -> int:
    """Parameter counts may be written 7.2e9 (YAML reads that as a string) or 7.2e+9 (a float)."""
    try:
        number = float(value)
    except ValueError:
        raise KvsimError(f"{source}: {key} must be a number, got {value!r}") from None
    if not number >= 1:
        raise KvsimError(f"{source}: {key} must be a positive number, got {value!r}")
    return round(number)


def _load_file(path: Path) -> ModelSpec:
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise KvsimError(f"{path}: cannot read model file ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise KvsimError(f"{path}: model file must hold a mapping")
    if "num_hidden_layers" in data or "model_type" in data:
        return spec_from_hf_config(data, str(path))
    data.setdefault("name", path.stem)
    return spec_from_dict(data, str(path))


def spec_from_hf_config(cfg: dict[str, Any], source: str) -> ModelSpec:
    """Map a Hugging Face config.json onto a ModelSpec. num_params is estimated from the shapes (the
    file does not carry it): Llama-style attention or MLA, gated MLP (plain for OPT), MoE experts."""
    def need(*keys: str) -> Any:
        for key in keys:
            if cfg.get(key) is not None:
                return cfg[key]
        raise KvsimError(f"{source}: missing key {keys[0]!r}")

    layers = need("num_hidden_layers", "n_layer", "num_layers")
    hidden = need("hidden_size", "n_embd", "d_model")
    heads = need("num_attention_heads", "n_head")
    kv_heads = cfg.get("num_key_value_heads") or heads
    mla = bool(cfg.get("kv_lora_rank"))
    if mla:
        head_dim = cfg.get("v_head_dim") or cfg.get("qk_nope_head_dim") or hidden // heads
    else:
        head_dim = cfg.get("head_dim") or hidden // heads
    ffn = need("intermediate_size", "ffn_dim", "n_inner")
    vocab = need("vocab_size")
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    window_layers = 0
    if window:
        types = cfg.get("layer_types")
        if isinstance(types, list):
            window_layers = sum(1 for t in types if t == "sliding_attention")
        elif cfg.get("model_type") == "gemma2":  # alternates local and global layers
            window_layers = layers // 2
        elif cfg.get("use_sliding_window") and cfg.get("max_window_layers") is not None:
            window_layers = max(0, layers - cfg["max_window_layers"])
        else:
            window_layers = layers
    total, active = _estimate_hf_params(cfg, layers, hidden, heads, kv_heads, head_dim, ffn, vocab)
    name = str(cfg.get("_name_or_path") or Path(source).parent.name or "hf-model").split("/")[-1]
    try:
        dtype = normalize_dtype(cfg.get("torch_dtype") or cfg.get("dtype") or "bf16")
        return ModelSpec(
            name=name.lower(), num_layers=layers, hidden_size=hidden, num_attention_heads=heads,
            num_kv_heads=kv_heads, head_dim=head_dim, intermediate_size=ffn, vocab_size=vocab,
            num_params=total, active_params=active,
            attention="mla" if mla else _attention_kind(heads, kv_heads),
            max_position_embeddings=cfg.get("max_position_embeddings") or 2048,
            kv_lora_rank=cfg.get("kv_lora_rank") or 0, qk_rope_head_dim=cfg.get("qk_rope_head_dim") or 0,
            sliding_window=window if window_layers else None, sliding_window_layers=window_layers,
            weight_dtype=dtype, tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            source=source)
    except KvsimError as exc:
        raise KvsimError(f"{source}: {exc}") from None


def _estimate_hf_params(cfg: dict[str, Any], layers: int, h: int, heads: int, kv_heads: int,
                        head_dim: int, ffn: int, vocab: int) -> tuple[int, int]:
    """(total, active) parameters from a config's shapes; an estimate (biases, positional tables and
    LayerNorm betas of older families are approximated)."""
    if cfg.get("kv_lora_rank"):
        r, rope = cfg["kv_lora_rank"], cfg.get("qk_rope_head_dim") or 0
        nope, v = cfg.get("qk_nope_head_dim") or head_dim, head_dim
        q_rank = cfg.get("q_lora_rank")
        q = (h * q_rank + q_rank + q_rank * heads * (nope + rope)) if q_rank else h * heads * (nope + rope)
        attn = q + h * (r + rope) + r + r * heads * (nope + v) + heads * v * h
    else:
        attn = 2 * h * heads * head_dim + 2 * h * kv_heads * head_dim
        if cfg.get("attention_bias") or cfg.get("model_type") == "qwen2":
            attn += (heads + 2 * kv_heads) * head_dim
    mats = 2 if cfg.get("model_type") == "opt" or "ffn_dim" in cfg else 3
    experts = cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts") or 0
    per_tok = cfg.get("num_experts_per_tok") or 0
    dense_layers, moe_layers = layers, 0
    expert_p = shared_p = router_p = 0
    if experts and per_tok:
        dense_layers = cfg.get("first_k_dense_replace") or 0
        moe_layers = layers - dense_layers
        eff = cfg.get("moe_intermediate_size") or ffn
        expert_p = mats * h * eff
        shared_p = (cfg.get("n_shared_experts") or 0) * expert_p
        shared_p += mats * h * (cfg.get("shared_expert_intermediate_size") or 0)
        router_p = h * experts
    base = layers * (attn + 2 * h) + dense_layers * mats * h * ffn + h
    base += vocab * h * (1 if cfg.get("tie_word_embeddings") else 2)
    base += moe_layers * (shared_p + router_p)
    return base + moe_layers * experts * expert_p, base + moe_layers * per_tok * expert_p
