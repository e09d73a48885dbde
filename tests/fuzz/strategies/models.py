"""Model specs: inline model mappings, model YAML files, Hugging Face config.json files (a file or a
folder) with bad shapes, and self-referencing `base:` chains (`model_cases`)."""

from __future__ import annotations

import json
import math
from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import PASSWD_LINE, run_argv, to_yaml

# ---------------------------------------------------------------------------------------------------
# Model specs

# A tiny valid model: the base of inline model specs (and of --set model.* and markup cases)
TINY_MODEL = {"name": "tiny", "num_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
              "num_kv_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
              "max_position_embeddings": 8192}

MODEL_INT_FIELDS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
                    "intermediate_size", "vocab_size", "max_position_embeddings", "num_params")
MODEL_BAD: tuple[tuple[Any, str], ...] = (
    (0, "fail"), (-1, "fail"), (True, "fail"), (False, "fail"), (math.nan, "fail"), (math.inf, "fail"),
    (1.5, "fail"), ("32", "fail"), ("abc", "fail"), (None, "any"), ([], "fail"), ({}, "fail"),
    (10**30, "any"),
    (2**63, "any"), (32.0, "any"), (1e308, "any"), (-0.0, "fail"),
)


@st.composite
def inline_models(draw) -> tuple[dict[str, Any], str, str]:
    """(model mapping, what is wrong, expect)."""
    m = dict(TINY_MODEL)
    how = draw(st.sampled_from(["field"] * 4 + ["kv0", "kv-not-dividing", "kv>heads", "head-dim-floor",
                                                "attention", "mla-no-rank", "mqa-many-kv", "unknown",
                                                "base-bad", "base-field", "window", "huge", "dtype",
                                                "active>total"]))
    if how == "field":
        key = draw(st.sampled_from(MODEL_INT_FIELDS + ("kv_lora_rank", "qk_rope_head_dim",
                                                       "sliding_window", "active_params")))
        value, expect = draw(st.sampled_from(MODEL_BAD))
        if key in ("kv_lora_rank", "qk_rope_head_dim") and value == 0:
            expect = "any"
        if key in ("num_params", "active_params") and value in ("32", 32.0, 1.5):
            expect = "any"  # counts may be written as text or floats (7.2e9); 1.5 rounds
        if key == "sliding_window" and value is None:
            expect = "any"
        if key in ("num_kv_heads", "head_dim", "max_position_embeddings", "num_params", "intermediate_size",
                   "vocab_size", "active_params") and value is None:
            expect = "any"  # null may mean "use the default"
        m[key] = value
        return m, f"{key}: {value!r}", expect
    if how == "kv0":
        m["num_kv_heads"] = 0
    elif how == "kv-not-dividing":
        m.update(num_attention_heads=32, hidden_size=32 * 64,
                 num_kv_heads=draw(st.sampled_from([3, 5, 7, 12])))
    elif how == "kv>heads":
        m["num_kv_heads"] = 8
    elif how == "head-dim-floor":
        m.pop("head_dim", None)
        m.update(hidden_size=draw(st.sampled_from([257, 4100, 1000])), num_attention_heads=4, num_kv_heads=4)
        if m["hidden_size"] % 4 == 0:
            m["num_attention_heads"] = 3
            m["num_kv_heads"] = 3
    elif how == "attention":
        m["attention"] = draw(st.sampled_from(["flash", "", "GQA", 1, None, "[bold]x[/]"]))
    elif how == "mla-no-rank":
        m["attention"] = "mla"
    elif how == "mqa-many-kv":
        m["attention"] = draw(st.sampled_from(["mqa", "mha"]))
        m["num_kv_heads"] = 2
    elif how == "unknown":
        m[draw(st.sampled_from(["num_key_value_heads", "layers", "", "x" * 1000]))] = 4
    elif how == "base-bad":
        return {"base": draw(st.sampled_from(["nonexistent", "", 5, [], {"base": "x"}, "m.yaml",
                                              "/etc/passwd"]))}, how, "fail"
    elif how == "base-field":
        return {"base": "llama-3-8b", draw(st.sampled_from(["num_kv_heads", "num_layers", "head_dim"])): draw(
            st.sampled_from([0, -1, True, math.nan, "8", 3.5]))}, how, "fail"
    elif how == "window":
        m["sliding_window"] = draw(st.sampled_from([0, -5, True, 1.5]))
        m["sliding_window_layers"] = 2
    elif how == "huge":
        m[draw(st.sampled_from(["num_layers", "hidden_size", "vocab_size"]))] = 10**draw(st.integers(9, 18))
        return m, how, "any"
    elif how == "dtype":
        m["weight_dtype"] = draw(st.sampled_from(["float64", "", 16, "int3", None]))
    else:  # active > total
        m.update(num_params=1000, active_params=2000)
    return m, how, "fail"


HF_BASE = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
           "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
HF_BAD: tuple[tuple[str, str, str], ...] = (
    ("num_key_value_heads", "0", "fail"), ("num_key_value_heads", "3", "fail"),
    ("num_key_value_heads", "8", "fail"),
    ("num_key_value_heads", "null", "any"), ("num_key_value_heads", "\"2\"", "fail"),
    ("num_attention_heads", "0", "fail"), ("num_attention_heads", "3", "fail"),
    ("num_attention_heads", "-4", "fail"),
    ("hidden_size", "250", "fail"), ("hidden_size", "0", "fail"), ("hidden_size", "256.5", "fail"),
    ("hidden_size", "\"256\"", "fail"), ("hidden_size", "NaN", "fail"), ("hidden_size", "Infinity", "fail"),
    ("head_dim", "0", "fail"), ("head_dim", "-64", "fail"), ("head_dim", "64.5", "fail"),
    ("head_dim", "true", "fail"),
    ("num_hidden_layers", "true", "fail"), ("num_hidden_layers", "0", "fail"),
    ("num_hidden_layers", "1e400", "fail"),
    ("num_hidden_layers", "2.0", "any"), ("intermediate_size", "-1", "fail"), ("vocab_size", "[]", "fail"),
    ("torch_dtype", "\"float64\"", "fail"), ("torch_dtype", "7", "fail"), ("torch_dtype", "null", "any"),
    ("sliding_window", "-5", "fail"), ("sliding_window", "true", "fail"), ("sliding_window", "1.5", "fail"),
    ("max_position_embeddings", "-1", "fail"), ("max_position_embeddings", "NaN", "fail"),
    ("kv_lora_rank", "-3", "fail"), ("kv_lora_rank", "1.5", "fail"), ("kv_lora_rank", "NaN", "fail"),
    ("num_local_experts", "8", "any"), ("num_experts_per_tok", "16", "any"), ("layer_types", "\"x\"", "any"),
    ("max_window_layers", "99", "any"), ("tie_word_embeddings", "\"yes\"", "any"),
)


@st.composite
def hf_configs(draw) -> tuple[bytes | str, str, str]:
    """(config.json content, what is wrong, expect)."""
    how = draw(st.sampled_from(["field"] * 5 + ["missing", "top-list", "not-json", "nan-literal", "deep",
                                                "bad-utf8", "empty", "moe"]))
    cfg = dict(HF_BASE)
    if how == "field":
        key, raw, expect = draw(st.sampled_from(HF_BAD))
        text = json.dumps({**cfg, key: "PLACEHOLDER"}).replace("\"PLACEHOLDER\"", raw)
        return text, f"{key}: {raw}", expect
    if how == "missing":
        key = draw(st.sampled_from(["num_hidden_layers", "hidden_size", "num_attention_heads",
                                    "intermediate_size", "vocab_size"]))
        del cfg[key]
        return json.dumps(cfg), f"missing {key}", "fail"
    if how == "top-list":
        return "[1, 2, 3]", how, "fail"
    if how == "not-json":
        return "{\"model_type\": \"llama\",", how, "fail"
    if how == "nan-literal":
        return json.dumps(cfg)[:-1] + ", \"rope_theta\": NaN}", how, "any"
    if how == "deep":
        return "{\"model_type\": \"llama\", \"x\": " + "[" * 100_000 + "]" * 100_000 + "}", how, "fail"
    if how == "bad-utf8":
        return json.dumps(cfg).encode()[:-1] + b", \"name\": \"\xff\"}", how, "fail"
    if how == "empty":
        return "", how, "fail"
    cfg.update(num_local_experts=draw(st.sampled_from([0, 8, 10**9])), num_experts_per_tok=draw(
        st.sampled_from([0, 2, 99])))
    return json.dumps(cfg), how, "any"


@st.composite
def model_cases(draw) -> Case:
    """Model specs given inline, as a model YAML, as config.json (file or folder), via validate or
    footprint; self-referencing `base:` chains."""
    where = draw(st.sampled_from(["inline", "inline", "yaml", "hf", "hf", "hf-dir", "base-loop"]))
    files: dict[str, Any] = {}
    if where == "inline":
        model, what, expect = draw(inline_models())
        ref: Any = model
    elif where == "yaml":
        model, what, expect = draw(inline_models())
        files["m.yaml"] = to_yaml(model)
        ref = "m.yaml"
    elif where in ("hf", "hf-dir"):
        content, what, expect = draw(hf_configs())
        name = "config.json" if where == "hf" else "mdir/config.json"
        files[name] = content
        ref = "config.json" if where == "hf" else "mdir"
    else:
        loop = draw(st.sampled_from(["self", "pair", "abs"]))
        what, expect = f"base loop ({loop})", "fail"
        if loop == "self":
            files["m.yaml"] = "base: m.yaml\nnum_layers: 2\n"
        elif loop == "pair":
            files["m.yaml"] = "base: n.yaml\n"
            files["n.yaml"] = "base: m.yaml\n"
        else:
            files["m.yaml"] = "base: {dir}/m.yaml\n"
        ref = "m.yaml"
    if where != "inline" and draw(st.booleans()):
        argv = ["footprint", str(ref), "--tokens", "1000"]
    else:
        sc = {"model": ref, "hardware": "h100-sxm", "simulation": {"requests": 5},
              "workload": {"prompt_len": {"dist": "fixed", "value": 32},
                           "output_len": {"dist": "fixed", "value": 8}}}
        files["s.yaml"] = to_yaml(sc)
        argv = draw(st.sampled_from([["validate", "s.yaml"], run_argv()]))
    return Case("model", argv, files, expect=expect, why=f"{where}: {what}", forbid=(PASSWD_LINE,))
