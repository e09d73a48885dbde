"""Valid scenarios: length distributions, arrival processes, tiny models, workloads of every kind and
sparsity sections, put together into small scenarios that must run (`valid_cases`); valid_scenarios
is also the starting point of the `broken` and `override` categories (mutations.py)."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import BIG_GPUS, MARKUP, SMALL_MODELS, SPARSITY, run_argv, to_yaml
from .traces import azure_rows, mooncake_rows

# ---------------------------------------------------------------------------------------------------
# Valid scenarios


def lengths(max_len: int) -> st.SearchStrategy[dict[str, Any]]:
    """A valid LengthDist mapping with every draw <= max_len."""
    fixed = st.integers(1, max_len).map(lambda v: {"dist": "fixed", "value": v})
    uniform = st.tuples(st.integers(1, max_len), st.integers(1, max_len)).map(
        lambda t: {"dist": "uniform", "low": min(t), "high": max(t)})
    lognormal = st.tuples(st.integers(2, max(2, max_len // 2)), st.floats(0.3, 0.9)).map(
        lambda t: {"dist": "lognormal", "mean": t[0], "p50": round(t[0] * t[1], 3), "max": max_len})
    sigma = st.tuples(st.integers(2, max(2, max_len // 2)), st.floats(0.1, 1.5)).map(
        lambda t: {"dist": "lognormal", "mean": t[0], "sigma": round(t[1], 3), "max": max_len})
    return st.one_of(fixed, uniform, lognormal, sigma)


def arrivals() -> st.SearchStrategy[dict[str, Any]]:
    rate = st.floats(0.5, 200).map(lambda r: round(r, 3))
    return st.one_of(
        st.builds(lambda r: {"process": "poisson", "rate": r}, rate),
        st.builds(lambda r, cv: {"process": "gamma", "rate": r, "cv": round(cv, 3)}, rate,
                  st.floats(0.2, 4)),
        st.builds(lambda r: {"process": "fixed", "rate": r}, rate),
        st.builds(lambda u, t: {"process": "closed_loop", "users": u, "think_time_s": round(t, 3)},
                  st.integers(1, 16), st.floats(0, 2)),
    )


@st.composite
def tiny_models(draw) -> dict[str, Any]:
    heads = draw(st.sampled_from([1, 2, 4, 8]))
    kv = draw(st.sampled_from([d for d in (1, 2, 4, 8) if heads % d == 0]))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    return {"name": "tiny", "num_layers": draw(st.integers(1, 4)), "hidden_size": heads * head_dim,
            "num_attention_heads": heads, "num_kv_heads": kv, "intermediate_size": draw(st.sampled_from(
                [256, 1024])), "vocab_size": 1000, "max_position_embeddings": 8192}


@st.composite
def workloads(draw) -> tuple[dict[str, Any], dict[str, Any]]:
    """(workload mapping, files it needs)."""
    kind = draw(st.sampled_from(["synthetic", "synthetic", "chat", "rag", "agentic", "mix", "trace"]))
    files: dict[str, Any] = {}
    wl: dict[str, Any] = {"kind": kind}
    if kind != "trace":
        wl["arrival"] = draw(arrivals())
        if kind == "mix" and wl["arrival"]["process"] == "closed_loop":  # mixes need an open loop
            wl["arrival"] = {"process": "poisson", "rate": 10}
    wl["output_len"] = draw(lengths(256))
    if kind == "synthetic":
        wl["prompt_len"] = draw(lengths(2048))
    elif kind == "chat":
        wl["chat"] = {"system_prompts": draw(st.integers(1, 4)),
                      "system_prompt_len": draw(lengths(256)),
                      "zipf_s": round(draw(st.floats(0, 2)), 3),
                      "turns": {"dist": "uniform", "low": 1, "high": draw(st.integers(1, 4))},
                      "user_turn_len": draw(lengths(256)),
                      "think_time_s": round(draw(st.floats(0, 3)), 3),
                      "abandon_prob": round(draw(st.floats(0, 0.5)), 3), "max_context": 4096}
    elif kind == "rag":
        passages = draw(st.integers(5, 200))
        wl["rag"] = {"passages": passages, "passage_len": draw(lengths(256)),
                     "zipf_s": round(draw(st.floats(0, 1.5)), 3),
                     "top_k": draw(st.integers(1, min(4, passages))),
                     "order": draw(st.sampled_from(["retrieval", "sorted"])),
                     "instructions": draw(st.integers(1, 3)), "instruction_len": draw(lengths(256)),
                     "question_len": draw(lengths(64))}
    elif kind == "agentic":
        wl["agentic"] = {"scaffolds": draw(st.integers(1, 2)), "scaffold_len": draw(lengths(512)),
                         "task_len": draw(lengths(128)), "steps": {"dist": "uniform", "low": 1,
                                                                   "high": draw(st.integers(1, 4))},
                         "tool_output_len": draw(lengths(256)),
                         "tool_time_s": round(draw(st.floats(0, 2)), 3),
                         "fork_prob": round(draw(st.floats(0, 0.3)), 3),
                         "max_branches": draw(st.integers(1, 3)), "max_context": 4096}
    elif kind == "mix":
        kinds = draw(st.lists(st.sampled_from(["synthetic", "chat", "rag"]), min_size=1, max_size=3))
        comps = []
        for k in kinds:
            comp: dict[str, Any] = {"kind": k, "weight": round(draw(st.floats(0.1, 5)), 3),
                                    "output_len": draw(lengths(128))}
            if k == "synthetic":
                comp["prompt_len"] = draw(lengths(1024))
            elif k == "rag":
                comp["rag"] = {"passages": 50, "top_k": 3, "passage_len": {"dist": "fixed", "value": 64}}
            else:
                comp["chat"] = {"turns": {"dist": "uniform", "low": 1, "high": 3}, "max_context": 4096}
            comps.append(comp)
        wl["mix"] = comps
    else:
        fmt = draw(st.sampled_from(["azure", "mooncake"]))
        n = draw(st.integers(1, 20))
        name = "t.csv" if fmt == "azure" else "t.jsonl"
        rows = azure_rows(draw, n) if fmt == "azure" else mooncake_rows(draw, n)
        files[name] = "\n".join(rows) + "\n"
        wl["trace"] = {"path": name, "format": fmt}
        if draw(st.booleans()):
            wl["trace"]["time_scale"] = round(draw(st.floats(0.01, 10)), 3)
    return wl, files


@st.composite
def sparsity_configs(draw) -> dict[str, Any]:
    """A valid kv.sparsity section: a policy, a budget, and sometimes attention-model parameters."""
    cfg: dict[str, Any] = {"policy": draw(st.sampled_from(SPARSITY)),
                           "reclaim": draw(st.sampled_from(["compact", "block"]))}
    if draw(st.booleans()):
        cfg["budget_tokens"] = draw(st.integers(16, 1024))
    else:
        cfg["budget_fraction"] = round(draw(st.floats(0.05, 1.0)), 3)
    cfg["min_tokens"] = draw(st.integers(1, 128))
    if draw(st.booleans()):
        sink, recent = draw(st.integers(0, 10)), draw(st.integers(0, 10))
        recent = min(recent, 10 - sink)
        cfg["attention"] = {"layer_groups": draw(st.integers(1, 8)), "sink_tokens": draw(st.integers(0, 16)),
                            "sink_share": sink / 10, "recent_share": recent / 10,
                            "heavy_share": round(1 - sink / 10 - recent / 10, 10),
                            "heavy_fraction": round(draw(st.floats(0.01, 1)), 3),
                            "reread_span": draw(st.integers(1, 64))}
    return cfg


@st.composite
def valid_scenarios(draw) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scenario mapping, files): a small scenario that must run."""
    model = draw(st.one_of(st.sampled_from(SMALL_MODELS), tiny_models()))
    wl, files = draw(workloads())
    sc: dict[str, Any] = {"name": draw(st.sampled_from(["fuzz", "a b", "x-1", "ünïcode"])),
                          "model": model, "hardware": draw(st.sampled_from(BIG_GPUS))}
    if isinstance(model, dict) and draw(st.integers(0, 3)) == 0:
        sc["hardware"] = "cpu"  # the one profile with a calibration
        sc["cost"] = {"model": "calibrated"}
    elif draw(st.integers(0, 3)) == 0:
        sc["cost"] = {"iteration_overhead_s": round(draw(st.floats(0, 0.01)), 5),
                      "bandwidth_efficiency": round(draw(st.floats(0.1, 1)), 3)}
    if model in ("llama-3-8b", "llama-3.1-8b", "mistral-7b", "qwen2.5-7b") and draw(st.booleans()):
        sc["parallelism"] = {"tensor_parallel_size": draw(st.sampled_from([1, 2, 4])),
                             "replicas": draw(st.integers(1, 3))}
    max_seqs = draw(st.sampled_from([8, 32, 256]))
    sc["scheduler"] = {"max_num_seqs": max_seqs, "max_num_batched_tokens": draw(st.sampled_from(
        [4096, 8192])), "chunked_prefill": draw(st.booleans()),
        "preemption_mode": draw(st.sampled_from(["recompute", "swap"]))}
    if draw(st.integers(0, 4)) == 0:
        sc["scheduler"]["max_model_len"] = draw(st.sampled_from([512, 2048, 4096]))
    layout = draw(st.sampled_from(["paged", "paged", "paged", "contiguous:max", "contiguous:pow2",
                                   "contiguous:oracle"]))
    kv: dict[str, Any] = {"block_size": draw(st.sampled_from([1, 8, 16, 32, 128])), "layout": layout,
                          "dtype": draw(st.sampled_from(["bf16", "fp16", "fp8", "int8", "fp32", "int4"])),
                          "gpu_memory_utilization": draw(st.sampled_from([0.8, 0.9, 0.95]))}
    if kv["block_size"] == 1 or isinstance(model, dict) or draw(st.booleans()):
        kv["num_gpu_blocks_override"] = draw(st.integers(2000, 50000))  # else millions of blocks
    if draw(st.integers(0, 3)) == 0:
        kv.update(watermark=round(draw(st.floats(0, 0.2)), 3), swap_space_gb=round(draw(st.floats(0, 16)), 2),
                  activation_reserve_gib=round(draw(st.floats(0, 4)), 2))
    if layout == "paged":
        kv["prefix_cache"] = draw(st.sampled_from(["none", "hash", "radix"]))
        kv["eviction"] = draw(st.sampled_from(["lru", "lfu", "fifo", "length"]))
    else:
        kv["placement"] = draw(st.sampled_from(["first_fit", "best_fit"]))
        # a contiguous layout reserves up to max_model_len per sequence: keep that within the pool
        sc["scheduler"]["max_model_len"] = min(sc["scheduler"].get("max_model_len", 4096), 4096)
        if "num_gpu_blocks_override" in kv:
            least = 2 * (4096 // kv["block_size"] + 1)
            kv["num_gpu_blocks_override"] = max(kv["num_gpu_blocks_override"], least)
    sampling = draw(st.sampled_from(["single", "single", "n", "beam"]))
    if sampling == "n":
        wl["n"] = draw(st.integers(2, min(4, max_seqs)))
    elif sampling == "beam":
        wl["beam_width"] = draw(st.integers(2, min(4, max_seqs)))
    if layout == "paged" and sampling == "single" and draw(st.booleans()):
        kv["sparsity"] = draw(sparsity_configs())
        if draw(st.booleans()):
            wl["rereads"] = {"mean": round(draw(st.floats(0, 2)), 3), "min_tokens": draw(st.integers(1, 64))}
    if "num_gpu_blocks_override" in kv and draw(st.integers(0, 9)) == 0:
        kv["check_invariants"] = True  # checks scan the whole pool each step: keep the pool small
    sc["kv"] = kv
    sc["workload"] = wl
    sc["simulation"] = {"seed": draw(st.integers(0, 2**31)), "requests": draw(st.integers(1, 30))}
    if wl.get("arrival", {}).get("process") != "closed_loop" and draw(st.integers(0, 4)) == 0:
        sc["simulation"]["duration_s"] = round(draw(st.floats(0.01, 5)), 3)
    return sc, files


@st.composite
def valid_cases(draw) -> Case:
    sc, files = draw(valid_scenarios())
    literal: tuple[str, ...] = ()
    argv = draw(st.sampled_from([run_argv(), run_argv(), ["validate", "s.yaml"]]))
    if argv[0] == "run" and draw(st.integers(0, 3)) == 0:
        sc["name"] = draw(st.sampled_from(MARKUP))  # the run's table title must show it verbatim
        literal = (sc["name"],)
    files = {"s.yaml": to_yaml(sc), **files}
    outputs = ("out/summary.json", "out/requests.parquet") if argv[0] == "run" else ()
    return Case("valid", argv, files, expect="pass", why="small valid scenario", literal=literal,
                outputs=outputs)
