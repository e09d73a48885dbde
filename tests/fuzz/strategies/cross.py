"""Cross-field nonsense: combinations each key accepts alone but that make no sense together (n above
max_num_seqs, prefix caching on a contiguous layout, sparsity with beams, models that do not fit, ...);
`validate` and `run` must agree on them."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import ALL_HARDWARE, ALL_MODELS, SPARSITY, Raw, _base_scenario, run_argv, to_yaml

# ---------------------------------------------------------------------------------------------------
# Cross-field nonsense


@st.composite
def cross_cases(draw) -> Case:
    """Combinations each key accepts alone but that make no sense together; validate and run must give
    the same one-line error (validate_first)."""
    seqs = draw(st.integers(1, 8))
    layout = draw(st.sampled_from(["contiguous:max", "contiguous:pow2", "contiguous:oracle"]))
    policy = draw(st.sampled_from(SPARSITY))
    choice = draw(st.sampled_from([
        "n>seqs", "beam>seqs", "prefix+contiguous", "sparsity+n", "sparsity+beam", "sparsity+contiguous",
        "tp", "rag-zipf", "gamma-cv", "tiny-pool", "batched<prompt", "max_model_len", "mix-nested",
        "mix-arrival", "chat-context", "agentic-branches", "duration-only", "calibrated",
        "empirical", "budget-both", "lognormal-sigma", "n+beam", "replicas", "fit"]))
    sc = _base_scenario(scheduler={"max_num_seqs": seqs, "max_num_batched_tokens": 8192})
    expect = "fail"
    files: dict[str, Any] = {}
    if choice == "n>seqs":
        sc["workload"]["n"] = seqs + draw(st.integers(1, 4))
    elif choice == "beam>seqs":
        sc["workload"]["beam_width"] = seqs + draw(st.integers(1, 4))
    elif choice == "prefix+contiguous":
        sc["kv"] = {"layout": layout, "prefix_cache": draw(st.sampled_from(["hash", "radix"]))}
    elif choice == "sparsity+n":
        sc["scheduler"]["max_num_seqs"] = 16
        sc["kv"] = {"sparsity": {"policy": policy}}
        sc["workload"]["n"] = draw(st.integers(2, 4))
    elif choice == "sparsity+beam":
        sc["scheduler"]["max_num_seqs"] = 16
        sc["kv"] = {"sparsity": {"policy": policy}}
        sc["workload"]["beam_width"] = draw(st.integers(2, 4))
    elif choice == "sparsity+contiguous":
        sc["kv"] = {"sparsity": {"policy": policy}, "layout": layout}
    elif choice == "tp":
        sc["parallelism"] = {"tensor_parallel_size": draw(st.sampled_from([3, 5, 6, 7, 64, 1000]))}
    elif choice == "rag-zipf":
        passages = draw(st.integers(5, 10000))
        sc["workload"] = {"kind": "rag", "rag": {"passages": passages, "top_k": draw(st.integers(
            1, min(passages, 20))), "zipf_s": draw(st.sampled_from([6, 12, 50, 1e3, 1e6]))},
            "output_len": {"dist": "fixed", "value": 8}}
        expect = "any"
    elif choice == "gamma-cv":
        cv = draw(st.sampled_from([1e3, 1e6, 1e30, 1e300, 1e-300, Raw(".inf")]))
        sc["workload"]["arrival"] = {"process": "gamma", "cv": cv, "rate": 10}
        expect = "fail" if isinstance(cv, Raw) else "any"
    elif choice == "tiny-pool":
        sc["kv"] = {"num_gpu_blocks_override": draw(st.integers(1, 3)), "block_size": 16}
        sc["workload"]["prompt_len"] = {"dist": "fixed", "value": draw(st.integers(64, 4000))}
        expect = "any"
    elif choice == "batched<prompt":
        sc["scheduler"] = {"max_num_seqs": 4, "max_num_batched_tokens": 16, "chunked_prefill": False}
        sc["workload"]["prompt_len"] = {"dist": "fixed", "value": draw(st.integers(17, 4000))}
        expect = "any"
    elif choice == "max_model_len":
        sc["scheduler"]["max_model_len"] = draw(st.sampled_from([1, 8, 10**6, 10**12]))
        expect = "any"
    elif choice == "mix-nested":
        sc["workload"] = {"kind": "mix", "mix": [{"kind": "mix", "mix": [{"kind": "synthetic"}]}]}
    elif choice == "mix-arrival":
        sc["workload"] = {"kind": "mix", "mix": [{"kind": "synthetic", "arrival": {"rate": 2}}]}
    elif choice == "chat-context":
        sc["workload"] = {"kind": "chat", "chat": {"max_context": draw(st.integers(1, 64)),
                                                   "turns": {"dist": "fixed", "value": 50}}}
        expect = "any"
    elif choice == "agentic-branches":
        sc["workload"] = {"kind": "agentic", "agentic": {"fork_prob": 1.0, "max_branches": draw(
            st.integers(1, 64)), "steps": {"dist": "fixed", "value": draw(st.integers(1, 30))}}}
        expect = "any"
    elif choice == "duration-only":  # tiny, small or (refused) huge arrival counts, never a long run
        duration, rate = draw(st.sampled_from([(1e-9, 1e6), (0.5, 10), (1e6, 1e-6), (1e6, 1e3), (1e9, 1e6),
                                               (5, 1e-6)]))
        sc["simulation"] = {"requests": None, "duration_s": duration}
        sc["workload"]["arrival"] = {"rate": rate}
        expect = "any"
    elif choice == "calibrated":
        sc["cost"] = {"model": "calibrated"}
        sc["hardware"] = draw(st.sampled_from(["h100-sxm", "a100-80gb"]))
    elif choice == "empirical":
        content = draw(st.sampled_from([b"", b"# only a comment\n", b"-5\n", b"nan\n", b"inf\n", b"1e400\n",
                                        b"\xff\xfe12\n", b"12\x0034\n", b"abc\n", b"12\n" * 3]))
        files["len.txt"] = content
        sc["workload"]["prompt_len"] = {"dist": "empirical", "path": "len.txt"}
        expect = "any" if content == b"12\n" * 3 else "fail"
    elif choice == "budget-both":
        sc["kv"] = {"sparsity": {"policy": policy, "budget_tokens": 64, "budget_fraction": 0.5}}
    elif choice == "lognormal-sigma":
        sc["workload"]["prompt_len"] = {"dist": "lognormal",
                                        "mean": draw(st.sampled_from([1e-300, 1, 1e300])),
                                        "sigma": draw(st.sampled_from([1e-300, 30, 1e3, 1e300]))}
        expect = "any"
    elif choice == "n+beam":
        sc["workload"]["n"] = 2
        sc["workload"]["beam_width"] = 2
    elif choice == "replicas":
        sc["parallelism"] = {"replicas": draw(st.sampled_from([2, 64, 10**6, 10**9]))}
        expect = "any"
    else:  # fit: any catalog model on any profile, any tensor-parallel size (most do not fit)
        sc["model"] = draw(st.sampled_from(ALL_MODELS))
        sc["hardware"] = draw(st.sampled_from(ALL_HARDWARE))
        sc["parallelism"] = {"tensor_parallel_size": draw(st.sampled_from([1, 2, 4, 8, 16]))}
        sc["kv"] = {"dtype": draw(st.sampled_from(["bf16", "fp8", "int4"])),
                    "gpu_memory_utilization": draw(st.sampled_from([0.05, 0.5, 0.9, 1.0]))}
        expect = "any"
    return Case("cross", run_argv(), {"s.yaml": to_yaml(sc), **files}, expect=expect, why=choice,
                validate_first=True)
