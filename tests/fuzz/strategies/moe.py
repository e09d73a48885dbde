"""Expert parallelism keys (docs/moe.md): `parallelism.enable_expert_parallel`, `expert_parallel_size`,
`all2all_backend`, `expert_load_factor` with `data_parallel_size` / `tensor_parallel_size`, on MoE and dense
models, under each cost model, in the scenario, by --set, under vLLM's `engine:` names and through
`kvsim footprint --ep` (`moe_cases`); valid and bad values. The category `moe` in the tally."""

from __future__ import annotations

from typing import Any

from cases import Case
from hypothesis import strategies as st

from .common import Raw, run_argv, small_scenario, to_yaml, yaml_scalar_text

ENABLE: tuple[tuple[Any, str], ...] = ((True, "ok"), (False, "ok"), (None, "fail"), ("yes", "any"),
                                       (1, "any"), (Raw("yes"), "any"), ([], "fail"))
DP: tuple[tuple[Any, str], ...] = ((1, "ok"), (2, "ok"), (4, "ok"), (3, "any"), (0, "fail"), (-1, "fail"),
                                   (1025, "fail"), (2.5, "fail"), ("2", "any"), (Raw(".nan"), "fail"))
TP: tuple[tuple[Any, str], ...] = ((1, "ok"), (2, "ok"), (3, "any"), (0, "fail"), (True, "fail"))
EP_SIZE: tuple[tuple[Any, str], ...] = (("match", "ok"), ("other", "fail"), (0, "fail"), ("8", "any"),
                                        (2.5, "fail"), (10**9, "fail"), (Raw(".inf"), "fail"))
BACKENDS: tuple[tuple[Any, str], ...] = (
    ("allgather_reducescatter", "ok"), ("naive", "ok"), ("deepep_low_latency", "ok"),
    ("deepep_high_throughput", "ok"), ("pplx", "ok"), ("mori", "fail"), ("", "fail"), (3, "fail"),
    ("DeepEP", "fail"), ("[bold]x[/]", "fail"))
LOAD: tuple[tuple[Any, str], ...] = ((1.0, "ok"), (1.5, "ok"), (0.5, "fail"), (Raw(".nan"), "fail"),
                                     (Raw(".inf"), "fail"), ("2", "fail"), (1e300, "fail"), (True, "fail"))
MODELS: tuple[tuple[str, str], ...] = (("gpt-oss-20b", "h100-sxm"), ("deepseek-v2-lite", "h200"),
                                       ("llama-3-8b", "h100-sxm"))
"""gpt-oss-20b: 32 experts (MXFP4), deepseek-v2-lite: 64 (MLA, bf16), llama-3-8b: dense."""
COST_MODELS = ("auto", "auto", "roofline", "kernels", "calibrated")
SIZES = ("tensor_parallel_size", "data_parallel_size")
VLLM_NAMES = ("enable_expert_parallel", "all2all_backend")
"""The keys kvsim also takes under an `engine:` section (vLLM's engine arguments)."""


def _worst(*verdicts: str) -> str:
    return "fail" if "fail" in verdicts else "any" if "any" in verdicts else "ok"


@st.composite
def moe_cases(draw) -> Case:
    """One expert-parallel configuration, valid or with bad values, in a file, by --set or on footprint."""
    model, hardware = draw(st.sampled_from(MODELS))
    enable, v_enable = draw(st.sampled_from(ENABLE))
    dp, v_dp = draw(st.sampled_from(DP))
    tp, v_tp = draw(st.sampled_from(TP))
    par: dict[str, Any] = {"tensor_parallel_size": tp, "data_parallel_size": dp,
                           "enable_expert_parallel": enable}
    verdicts = [v_enable, v_dp, v_tp]
    for key, pool in (("expert_parallel_size", EP_SIZE), ("all2all_backend", BACKENDS),
                      ("expert_load_factor", LOAD)):
        if draw(st.booleans()):
            value, verdict = draw(st.sampled_from(pool))
            if value == "match":
                value = tp * dp if isinstance(tp, int) and isinstance(dp, int) else 8
            elif value == "other":
                value = (tp * dp + 1) if isinstance(tp, int) and isinstance(dp, int) else 7
            par[key] = value
            verdicts.append(verdict)
            if enable is False and key != "all2all_backend":
                verdicts.append("fail")  # needs enable_expert_parallel
    cost = draw(st.sampled_from(COST_MODELS))
    verdict = _worst(*verdicts)
    if verdict == "ok" and enable is True:
        verdict = "fail" if model == "llama-3-8b" or cost == "calibrated" else "any"  # sizes, memory
    elif verdict == "ok":
        verdict = "any"  # (TP 2 on one profile, memory)
    sc = small_scenario(3, model=model, hardware=hardware, parallelism=par, cost={"model": cost})
    how = draw(st.sampled_from(["file", "file", "set", "engine", "footprint"]))
    files: dict[str, Any] = {}
    if how == "set":
        sc["parallelism"] = {k: v for k, v in par.items() if k in SIZES}
        extra = [x for k, v in par.items() if k not in sc["parallelism"]
                 for x in ("--set", f"parallelism.{k}={yaml_scalar_text(v)}")]
        argv = run_argv("s.yaml", "--no-plots", *extra)
        if enable is None or par.get("all2all_backend") == "":
            verdict = "any"  # an empty --set value reads as null
    elif how == "engine":
        sc["parallelism"] = {k: v for k, v in par.items() if k not in VLLM_NAMES}
        sc["engine"] = {k: v for k, v in par.items() if k in VLLM_NAMES}
        argv = run_argv("s.yaml", "--no-plots")
    elif how == "footprint":
        ep = par.get("expert_parallel_size", 8)
        ep_text = yaml_scalar_text(ep) if not isinstance(ep, Raw) else ep.text
        argv = ["footprint", model, "--tokens", "1000", "--hardware", hardware, "--tp",
                str(tp if isinstance(tp, int) and not isinstance(tp, bool) else 1), "--ep", str(ep_text)]
        verdict = "any"
    else:
        argv = draw(st.sampled_from([run_argv("s.yaml", "--no-plots"), ["validate", "s.yaml"]]))
    files["s.yaml"] = to_yaml(sc)
    return Case("moe", argv, files, expect={"ok": "pass"}.get(verdict, verdict),
                why=f"{how} {par!r} on {model}, cost {cost}",
                outputs=())
