"""Speculative decoding (`speculative_cases`): every key of the `speculative` section (method,
num_speculative_tokens, model, mtp_layers, acceptance as a list / a rate / a mean acceptance length,
draft_overhead_s) and vLLM's `speculative_config` name, valid (sometimes with a hash or radix prefix cache
in check mode) and with one bad value or a combination not modelled (beam search, n > 1, contiguous
layouts, sparsity, P/D pools, bench_serve, other scheduler policies, sliding-window models, a lora
section)."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import Raw, run_argv, small_scenario, to_yaml

METHODS = ("none", "ngram", "eagle", "eagle3", "mtp", "draft_model")
LLAMA_1B = {"num_layers": 16, "hidden_size": 2048, "num_attention_heads": 32, "num_kv_heads": 8,
            "intermediate_size": 8192, "vocab_size": 128256, "tie_word_embeddings": True}
"""Llama-3.2-1B's shapes (its config.json), inline: a draft model for Llama-3 targets."""

BAD: tuple[tuple[str, Any, str], ...] = (
    ("method", "medusa", "fail"), ("method", "EAGLE", "fail"), ("method", None, "fail"),
    ("method", 3, "fail"),
    ("num_speculative_tokens", 0, "fail"), ("num_speculative_tokens", -1, "fail"),
    ("num_speculative_tokens", 17, "fail"), ("num_speculative_tokens", 1.5, "fail"),
    ("num_speculative_tokens", True, "fail"), ("num_speculative_tokens", "3", "any"),
    ("acceptance", 1.5, "fail"), ("acceptance", -0.1, "fail"), ("acceptance", Raw(".nan"), "fail"),
    ("acceptance", Raw(".inf"), "fail"), ("acceptance", "high", "fail"), ("acceptance", [0.5] * 9, "fail"),
    ("acceptance", [], "fail"), ("acceptance", [0.5, 2.0], "fail"), ("acceptance", None, "fail"),
    ("acceptance", {"mean_acceptance_length": 0.5}, "fail"),
    ("acceptance", {"mean_acceptance_length": 99}, "fail"),
    ("acceptance", {"mean_length": 2}, "fail"), ("acceptance", {}, "fail"), ("acceptance", 0, "pass"),
    ("acceptance", 1, "pass"), ("model", "no-such-model", "fail"), ("model", 5, "fail"),
    ("model", {"num_layers": 0}, "fail"), ("mtp_layers", 0, "fail"), ("mtp_layers", 100, "fail"),
    ("draft_overhead_s", -1, "fail"), ("draft_overhead_s", 5, "fail"),
    ("draft_overhead_s", Raw(".nan"), "fail"),
    ("draft_overhead_s", 0, "pass"), ("lookahead", 2, "fail"), ("speculative_tokens", 2, "fail"),
)
SHAPES: tuple[str, ...] = ("beam", "n2", "contiguous", "sparsity", "pd", "bench_serve", "sarathi", "sliding",
                           "no-model", "ngram-model", "not-mapping", "alias-both", "lora")


@st.composite
def spec_section(draw) -> dict[str, Any]:
    """A valid `speculative` section."""
    method = draw(st.sampled_from(METHODS))
    k = draw(st.integers(1, 6))
    sec: dict[str, Any] = {"method": method, "num_speculative_tokens": k}
    form = draw(st.sampled_from(["rate", "list", "length"]))
    if form == "rate":
        sec["acceptance"] = draw(st.sampled_from([0.0, 0.3, 0.75, 1.0]))
    elif form == "list":
        sec["acceptance"] = draw(st.lists(st.sampled_from([0.0, 0.4, 0.8, 1.0]), min_size=k, max_size=k))
    else:
        length = draw(st.sampled_from([1.0, 1.5, min(k + 1, 2.5), k + 1]))
        sec["acceptance"] = {"mean_acceptance_length": length}
    if method == "draft_model" or (method in ("eagle", "eagle3") and draw(st.integers(0, 4)) == 0):
        sec["model"] = draw(st.sampled_from([LLAMA_1B, {"base": "llama-3-8b", "num_layers": 2}]))
    if method == "mtp" and draw(st.booleans()):
        sec["mtp_layers"] = draw(st.integers(1, 3))
    if draw(st.integers(0, 3)) == 0:
        sec["draft_overhead_s"] = draw(st.sampled_from([0, 1e-4, 0.01]))
    return sec


@st.composite
def speculative_cases(draw) -> Case:
    """A small scenario with `speculative` (sometimes as vLLM's speculative_config), valid or with one bad
    key or a combination speculative decoding does not model."""
    sc = small_scenario(draw(st.sampled_from([3, 5])))
    if draw(st.booleans()):
        sc["workload"]["output_len"] = {"dist": "uniform", "low": 1, "high": 40}
    sec = draw(spec_section())
    sc["speculative"] = sec
    if draw(st.integers(0, 3)) == 0:
        sc["kv"] = {"num_gpu_blocks_override": draw(st.sampled_from([12, 40, 2000])), "block_size": 16}
    if draw(st.integers(0, 4)) == 0:
        sc["parallelism"] = {"replicas": 2}
    if draw(st.integers(0, 3)) == 0:  # a prefix cache, in check mode (docs/speculative.md "Prefix caching")
        sc.setdefault("kv", {}).update(prefix_cache=draw(st.sampled_from(["hash", "radix"])),
                                       check_invariants=True)
    expect, how = "pass", "valid"
    mistake = draw(st.sampled_from([None, None, "key", "key", "shape"]))
    if mistake and sec["method"] == "none":  # (method none ignores the section: a mistake needs it on)
        sec["method"] = "eagle"
    if mistake == "key":
        key, value, expect = draw(st.sampled_from(BAD))
        sec[key] = value
        how = f"speculative.{key}: {value!r}"
        if key == "acceptance" and expect == "pass" and isinstance(sec.get("acceptance"), list):
            expect = "any"
        if key == "model" and sec["method"] == "ngram":
            expect = "fail"
        if key in ("model", "mtp_layers", "draft_overhead_s") and expect == "pass":
            expect = "any"
    elif mistake == "shape":
        how = draw(st.sampled_from(SHAPES))
        expect = "fail"
        if how == "beam":
            sc["workload"]["beam_width"] = 2
        elif how == "n2":
            sc["workload"]["n"] = 2
        elif how == "contiguous":
            sc["kv"] = {"layout": "contiguous:max"}
        elif how == "sparsity":
            sc["kv"] = {"sparsity": {"policy": "h2o"}}
        elif how == "pd":
            sc["cluster"] = {"pools": [{"name": "p", "role": "prefill"}, {"name": "d", "role": "decode"}]}
        elif how == "bench_serve":
            sc["workload"] = {"kind": "bench_serve"}
        elif how == "sarathi":
            sc["scheduler"] = {"policy": "sarathi"}
        elif how == "sliding":
            sc["model"] = "gemma-2-9b"
            sc["hardware"] = "h200"
        elif how == "no-model":
            sec["method"] = "draft_model"
            sec.pop("model", None)
        elif how == "ngram-model":
            sec["method"] = "ngram"
            sec["model"] = LLAMA_1B
        elif how == "lora":
            sc["lora"] = {"max_loras": 1, "max_lora_rank": 8, "adapters": [{"name": "a", "rank": 8}]}
        elif how == "not-mapping":
            sc["speculative"] = draw(st.sampled_from(["eagle", 3, ["eagle"]]))
        else:
            k = sec["num_speculative_tokens"] % 6 + 1
            sc["speculative_config"] = {**sec, "num_speculative_tokens": k}
    elif draw(st.integers(0, 3)) == 0:  # vLLM's name for the section
        sc["speculative_config"] = sc.pop("speculative")
        how = "speculative_config"
    return Case("speculative", run_argv("s.yaml", "--no-plots"), {"s.yaml": to_yaml(sc)}, expect=expect,
                why=how, validate_first=True, outputs=("out/summary.json",) if expect == "pass" else ())
