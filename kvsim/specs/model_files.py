"""Resolving a model reference: a ModelSpec, a catalog name or Hugging Face repo id, an inline mapping
of ModelSpec fields (optionally `base: <model>` plus overrides), or a model YAML / Hugging Face
config.json file (or a folder holding one). `get_model` in kvsim/specs/catalog.py is the entry point."""

from __future__ import annotations

import difflib
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from kvsim.errors import KvsimError, excerpt
from kvsim.inputs import parse_json, parse_yaml, read_text
from kvsim.specs import catalog
from kvsim.specs.hf_config import spec_from_hf_config
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

_SUFFIXES = (".json", ".yaml", ".yml")
MAX_BASE_CHAIN = 8
"""Most `base:` links followed from one model (a YAML whose base is a YAML whose base is ...)."""


def attention_kind(heads: int, kv_heads: int) -> str:
    return "mha" if kv_heads == heads else "mqa" if kv_heads == 1 else "gqa"


def resolve(name_or_spec: Any, chain: tuple[str, ...]) -> ModelSpec:
    """get_model, with the files (resolved paths) and inline specs already on the `base:` chain."""
    if isinstance(name_or_spec, ModelSpec):
        return name_or_spec
    if isinstance(name_or_spec, dict):
        return from_dict(name_or_spec, "inline model", (*chain, "<inline model>"))
    if not isinstance(name_or_spec, (str, Path)):
        raise KvsimError(f"model: expected a name, a path or a mapping, got {type(name_or_spec).__name__}")
    text = str(name_or_spec).strip()
    key = text.lower()
    found = catalog.lookup(key)
    if found is not None:
        return found
    path = _model_path(text)
    if path is not None:
        return _load_file(path, chain)
    names = catalog.known_names()
    close = difflib.get_close_matches(key[:200], names, n=6, cutoff=0.5)
    close = list(dict.fromkeys(catalog.lookup(c).name for c in close))[:3]
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(catalog.list_models())}"
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


def from_dict(data: dict[str, Any], source: str, chain: tuple[str, ...]) -> ModelSpec:
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
    data.setdefault("attention", attention_kind(heads, data["num_kv_heads"]))
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
    if data.get("sliding_window") and "sliding_window_layers" not in data and not (
            data.get("layer_types") or data.get("compress_ratios")):
        data["sliding_window_layers"] = data["num_layers"]
    try:
        return ModelSpec(**data)
    except KvsimError as exc:
        raise KvsimError(f"{source}: {exc}") from None


def _with_base(base_ref: Any, data: dict[str, Any], source: str, chain: tuple[str, ...]) -> ModelSpec:
    """The `base:` model with `data` overriding its fields. The attention kind follows changed head
    counts unless `attention` is given too (MLA stays MLA). New layer_types replace the base's count of
    sliding layers."""
    if len(chain) > MAX_BASE_CHAIN:
        raise KvsimError(f"{source}: base: more than {MAX_BASE_CHAIN} nested base models")
    if not isinstance(base_ref, (str, dict)):
        raise KvsimError(f"{source}: base must be a model name, a path or a mapping, got {excerpt(base_ref)}")
    if isinstance(base_ref, dict) or _is_file_ref(base_ref):
        base = resolve(base_ref, chain)  # errors there name that file, or say "inline model"
    else:
        try:
            base = resolve(base_ref, chain)
        except KvsimError as exc:
            raise KvsimError(f"{source}: base: {exc}") from None
    if "attention" not in data and base.attention != "mla" and (
            "num_attention_heads" in data or "num_kv_heads" in data):
        data["attention"] = attention_kind(data.get("num_attention_heads", base.num_attention_heads),
                                           data.get("num_kv_heads", base.num_kv_heads))
    if ("layer_types" in data or "compress_ratios" in data) and "sliding_window_layers" not in data:
        data["sliding_window_layers"] = 0
    try:
        return replace(base, **{"name": f"{base.name}-custom", **data})
    except KvsimError as exc:
        raise KvsimError(f"{source}: {exc}") from None


def _is_file_ref(text: str) -> bool:
    key = text.strip().lower()
    if catalog.lookup(key) is not None:
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
    if "num_hidden_layers" in data or "model_type" in data or "text_config" in data:
        return spec_from_hf_config(data, str(path))
    data.setdefault("name", path.stem)
    return from_dict(data, str(path), (*chain, key))
