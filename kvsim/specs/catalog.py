"""Built-in models (from each model's published Hugging Face config.json) and `get_model`, which also
accepts inline specs, YAML files and Hugging Face config.json files."""

from __future__ import annotations

import difflib
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from kvsim.errors import KvsimError, excerpt
from kvsim.inputs import parse_json, parse_yaml, read_text
from kvsim.specs.dtypes import normalize_dtype
from kvsim.specs.model import (
    COUNTS,
    MAX_DIM,
    MAX_PARAMS,
    MODEL_FIELDS,
    OPTIONAL_DIMS,
    POSITIVE_DIMS,
    ModelSpec,
    check_int,
    estimate_dense_params,
)

_HF = "https://huggingface.co/{}/blob/main/config.json"

_SUFFIXES = (".json", ".yaml", ".yml")
MAX_BASE_CHAIN = 8
"""Most `base:` links followed from one model (a YAML whose base is a YAML whose base is ...)."""


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
    (case-insensitive), an inline dict of ModelSpec fields (optionally `base: <model>` plus
    overrides), or a path to a YAML file of such fields or to a Hugging Face config.json (or a folder
    holding one). `base:` chains are followed at most MAX_BASE_CHAIN deep; a loop is an error."""
    return _resolve(name_or_spec, ())


def _resolve(name_or_spec: Any, chain: tuple[str, ...]) -> ModelSpec:
    """get_model, with the files (resolved paths) and inline specs already on the `base:` chain."""
    if isinstance(name_or_spec, ModelSpec):
        return name_or_spec
    if isinstance(name_or_spec, dict):
        return _from_dict(name_or_spec, "inline model", (*chain, "<inline model>"))
    if not isinstance(name_or_spec, (str, Path)):
        raise KvsimError(f"model: expected a name, a path or a mapping, got {type(name_or_spec).__name__}")
    text = str(name_or_spec).strip()
    key = text.lower()
    if key in CATALOG or key in _ALIASES:
        return CATALOG[_ALIASES.get(key, key)]
    path = _model_path(text)
    if path is not None:
        return _load_file(path, chain)
    close = difflib.get_close_matches(key[:200], list(CATALOG) + list(_ALIASES), n=6, cutoff=0.5)
    close = list(dict.fromkeys(_ALIASES.get(c, c) for c in close))[:3]
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(list_models())}"
    raise KvsimError(f"unknown model {excerpt(text)} (not a built-in name or a file); {hint}")


def _model_path(text: str) -> Path | None:
    """The model file `text` names (a folder stands for its config.json), or None when it names none;
    KvsimError for a missing *.json / *.yaml path."""
    if "\x00" in text:
        raise KvsimError(f"model {excerpt(text)}: not a name or a path (NUL character)")
    try:
        path = Path(text).expanduser()
        if path.is_dir() and (path / "config.json").exists():
            return path / "config.json"
        if path.exists() and (not path.is_dir() or path.suffix.lower() in _SUFFIXES):
            return path
    except (OSError, ValueError, RuntimeError):  # a name too long for a path, no home directory ...
        return None
    if path.suffix.lower() in _SUFFIXES:
        raise KvsimError(f"{_shown(text)}: model file not found")
    return None


def _shown(text: str) -> str:
    """A path or name as typed, for a message: as is when short and printable, else an excerpt."""
    return text if text.isprintable() and len(text) <= 300 else excerpt(text, 100)


def spec_from_dict(data: dict[str, Any], source: str) -> ModelSpec:
    """Build a ModelSpec from ModelSpec field names. Required: num_layers, hidden_size,
    num_attention_heads, and either num_params or intermediate_size + vocab_size (then num_params is
    estimated as a Llama-style dense model). head_dim defaults to hidden_size / num_attention_heads,
    which must then divide evenly. `base: <model>` (a name, a file or a mapping) starts from that
    model instead. num_params / active_params may be floats or strings such as '7.2e9'."""
    return _from_dict(data, source, (source,))


def _from_dict(data: dict[str, Any], source: str, chain: tuple[str, ...]) -> ModelSpec:
    """spec_from_dict; chain: the models on the `base:` chain so far, this one last."""
    data = dict(data)
    base_ref = data.pop("base", None)
    unknown = [k for k in data if k not in MODEL_FIELDS]
    if unknown:
        raise KvsimError(f"{source}: unknown model key {excerpt(unknown[0])};"
                         f" known: {', '.join(MODEL_FIELDS)}")
    for key in COUNTS:
        if isinstance(data.get(key), (float, str)):
            data[key] = _count(data[key], key, source)
    _check_ints(data, source)
    if base_ref is not None:
        return _with_base(base_ref, data, source, chain)
    for key in ("num_layers", "hidden_size", "num_attention_heads"):
        if key not in data:
            raise KvsimError(f"{source}: missing model key {key!r}")
    data.setdefault("name", "custom")
    heads = data["num_attention_heads"]
    data.setdefault("num_kv_heads", heads)
    if "head_dim" not in data:
        data["head_dim"] = _head_dim(data["hidden_size"], heads, source)
    data.setdefault("attention", _attention_kind(heads, data["num_kv_heads"]))
    data.setdefault("max_position_embeddings", 131072)
    if "num_params" not in data:
        for key in ("intermediate_size", "vocab_size"):
            if key not in data:
                raise KvsimError(f"{source}: give num_params, or {key!r} so it can be estimated")
        data["num_params"] = _bounded_params(estimate_dense_params(
            data["num_layers"], data["hidden_size"], heads, data["num_kv_heads"], data["head_dim"],
            data["intermediate_size"], data["vocab_size"], data.get("tie_word_embeddings") is True), source)
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


def _with_base(base_ref: Any, data: dict[str, Any], source: str, chain: tuple[str, ...]) -> ModelSpec:
    """The `base:` model with `data` overriding its fields. The attention kind follows changed head
    counts unless `attention` is given too (MLA stays MLA)."""
    if len(chain) > MAX_BASE_CHAIN:
        raise KvsimError(f"{source}: base: more than {MAX_BASE_CHAIN} nested base models")
    if not isinstance(base_ref, (str, dict)):
        raise KvsimError(f"{source}: base must be a model name, a path or a mapping, got {excerpt(base_ref)}")
    if isinstance(base_ref, dict) or _is_file_ref(base_ref):
        base = _resolve(base_ref, chain)  # errors there name that file, or say "inline model"
    else:
        try:
            base = _resolve(base_ref, chain)
        except KvsimError as exc:
            raise KvsimError(f"{source}: base: {exc}") from None
    if "attention" not in data and base.attention != "mla" and (
            "num_attention_heads" in data or "num_kv_heads" in data):
        data["attention"] = _attention_kind(data.get("num_attention_heads", base.num_attention_heads),
                                            data.get("num_kv_heads", base.num_kv_heads))
    try:
        return replace(base, **{"name": f"{base.name}-custom", **data})
    except KvsimError as exc:
        raise KvsimError(f"{source}: {exc}") from None


def _is_file_ref(text: str) -> bool:
    key = text.strip().lower()
    if key in CATALOG or key in _ALIASES:
        return False
    try:
        return _model_path(text.strip()) is not None
    except KvsimError:
        return False


def _check_ints(data: dict[str, Any], source: str) -> None:
    """Every integer field present is an int within its bounds (sliding_window may be null)."""
    for keys, low, high in ((POSITIVE_DIMS, 1, MAX_DIM), (OPTIONAL_DIMS, 0, MAX_DIM),
                            (COUNTS, 1, MAX_PARAMS), (("sliding_window",), 1, MAX_DIM)):
        for key in keys:
            if key in data and not (key == "sliding_window" and data[key] is None):
                problem = check_int(data[key], low, high)
                if problem:
                    raise KvsimError(f"{source}: {key} {problem}")


def _head_dim(hidden: int, heads: int, source: str) -> int:
    """hidden / heads, which must be a whole number (never silently floored)."""
    if hidden % heads:
        raise KvsimError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads};"
                         " give head_dim")
    return hidden // heads


def _bounded_params(count: int, source: str) -> int:
    if count > MAX_PARAMS:
        raise KvsimError(f"{source}: the shapes give {count:.3g} parameters, more than {MAX_PARAMS:.0e}")
    return count


def _count(value: float | str, key: str, source: str) -> int:
    """Parameter counts may be written 7.2e9 (YAML reads that as a string) or 7.2e+9 (a float):
    finite, 1 <= count <= MAX_PARAMS."""
    if isinstance(value, str) and len(value) > 40:
        raise KvsimError(f"{source}: {key} must be a number, got {excerpt(value)}")
    try:
        number = float(value)
    except ValueError:
        raise KvsimError(f"{source}: {key} must be a number, got {excerpt(value)}") from None
    if not math.isfinite(number) or not 1 <= number <= MAX_PARAMS:
        raise KvsimError(f"{source}: {key} must be a number from 1 to 1e15, got {excerpt(value)}")
    return round(number)


def _load_file(path: Path, chain: tuple[str, ...] = ()) -> ModelSpec:
    """A model YAML or config.json, read through kvsim.inputs (size, UTF-8, nesting bounds)."""
    try:
        key = str(path.resolve())
    except (OSError, RuntimeError):
        key = str(path)
    if key in chain:
        loop = " -> ".join(Path(k).name for k in (*chain[chain.index(key):], key))
        raise KvsimError(f"{path}: base models form a loop: {excerpt(loop, 200)}")
    text = read_text(path, "model file")
    if path.suffix.lower() == ".json":
        data = parse_json(text, str(path))
    else:
        data = parse_yaml(text, str(path))
    if not isinstance(data, dict):
        raise KvsimError(f"{path}: model file must hold a mapping")
    if "num_hidden_layers" in data or "model_type" in data:
        return spec_from_hf_config(data, str(path))
    data.setdefault("name", path.stem)
    return _from_dict(data, str(path), (*chain, key))


_HF_INTS: dict[str, int] = {
    "num_hidden_layers": 1, "n_layer": 1, "num_layers": 1, "hidden_size": 1, "n_embd": 1, "d_model": 1,
    "num_attention_heads": 1, "n_head": 1, "num_key_value_heads": 1, "head_dim": 1, "v_head_dim": 1,
    "qk_nope_head_dim": 1, "intermediate_size": 1, "ffn_dim": 1, "n_inner": 1, "vocab_size": 1,
    "max_position_embeddings": 1, "sliding_window": 0, "max_window_layers": 0, "kv_lora_rank": 0,
    "qk_rope_head_dim": 0, "q_lora_rank": 0, "n_routed_experts": 0, "num_local_experts": 0,
    "num_experts": 0, "num_experts_per_tok": 0, "first_k_dense_replace": 0, "moe_intermediate_size": 1,
    "n_shared_experts": 0, "shared_expert_intermediate_size": 0,
}
"""config.json keys kvsim reads as integers, with their least value (null means absent)."""
_HF_BOOLS = ("tie_word_embeddings", "use_sliding_window", "attention_bias")
_HF_STRS = ("model_type", "torch_dtype", "dtype", "_name_or_path")


def _checked_hf(cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """The keys of cfg that kvsim reads, each checked for its type: integers (not bools or floats)
    within [least, MAX_DIM], true/false flags, strings. null counts as absent."""
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
        out[key] = value
    return out


def spec_from_hf_config(cfg: dict[str, Any], source: str) -> ModelSpec:
    """Map a Hugging Face config.json onto a ModelSpec. num_params is estimated from the shapes (the
    file does not carry it): Llama-style attention or MLA, gated MLP (plain for OPT), MoE experts.
    Every key read is type-checked (one-line KvsimError naming the key); num_key_value_heads null or
    absent means as many KV heads as attention heads, 0 is an error; without head_dim (v_head_dim /
    qk_nope_head_dim for MLA), hidden_size must be a multiple of num_attention_heads."""
    cfg = _checked_hf(cfg, source)

    def need(*keys: str) -> Any:
        for key in keys:
            if key in cfg:
                return cfg[key]
        raise KvsimError(f"{source}: missing key {keys[0]!r}")

    layers = need("num_hidden_layers", "n_layer", "num_layers")
    hidden = need("hidden_size", "n_embd", "d_model")
    heads = need("num_attention_heads", "n_head")
    kv_heads = cfg.get("num_key_value_heads", heads)
    mla = bool(cfg.get("kv_lora_rank"))
    dim_keys = ("v_head_dim", "qk_nope_head_dim") if mla else ("head_dim",)
    head_dim = next((cfg[k] for k in dim_keys if k in cfg), None) or _head_dim(hidden, heads, source)
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
    total = _bounded_params(total, source)
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
            weight_dtype=dtype, tie_word_embeddings=cfg.get("tie_word_embeddings", False),
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
