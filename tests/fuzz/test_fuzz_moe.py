"""Fuzz the expert-parallel keys (docs/moe.md, issue 26 item 3): hypothesis cases of strategies/moe.py and
fixed cases, each a run or one error line (category `moe` in the tally)."""

from __future__ import annotations

import pytest
from cases import Case
from harness import check
from hypothesis import given
from profile_settings import fuzz_settings
from strategies.common import run_argv, small_scenario, to_yaml
from strategies.moe import moe_cases

EP2 = {"tensor_parallel_size": 1, "data_parallel_size": 2, "enable_expert_parallel": True}


def _run(cid: str, par: dict, expect: str, model: str = "gpt-oss-20b", **sections) -> tuple[str, Case]:
    sc = small_scenario(3, model=model, parallelism=par, **sections)
    return cid, Case("moe", run_argv("s.yaml", "--no-plots"), {"s.yaml": to_yaml(sc)}, expect=expect, why=cid,
                     validate_first=True, outputs=("out/summary.json",) if expect == "pass" else ())


MOE_CASES = dict([
    _run("ep2-gpt-oss-20b", EP2, "pass"),
    _run("ep2-deepep", {**EP2, "all2all_backend": "deepep_low_latency"}, "pass"),
    _run("ep2-load-2", {**EP2, "expert_load_factor": 2.0}, "pass"),
    _run("ep2-roofline", EP2, "pass", cost={"model": "roofline"}),
    _run("ep2-size-stated", {**EP2, "expert_parallel_size": 2}, "pass"),
    _run("ep2-size-wrong", {**EP2, "expert_parallel_size": 4}, "fail"),
    _run("ep-size-without-enable", {"expert_parallel_size": 2}, "fail"),
    _run("load-without-enable", {"expert_load_factor": 2.0}, "fail"),
    _run("backend-without-enable", {"all2all_backend": "pplx"}, "pass"),  # vLLM ignores it too
    _run("load-above-ep", {**EP2, "expert_load_factor": 3.0}, "fail"),
    _run("load-below-1", {**EP2, "expert_load_factor": 0.99}, "fail"),
    _run("unknown-backend", {**EP2, "all2all_backend": "mori"}, "fail"),
    _run("dense-model", EP2, "fail", model="llama-3-8b"),
    _run("uneven-experts", {**EP2, "data_parallel_size": 3}, "fail"),
    _run("with-cluster", {"enable_expert_parallel": True},
         "fail", cluster={"pools": [{"data_parallel_size": 2}]}),
    _run("dsv2-lite-ep4", {**EP2, "data_parallel_size": 4}, "pass", model="deepseek-v2-lite",
         hardware="h200"),
])


@pytest.mark.parametrize("cid", sorted(MOE_CASES))
def test_fixed_moe_cases(worker, cid):
    check(MOE_CASES[cid], worker)


@fuzz_settings(30)
@given(moe_cases())
def test_moe_keys(worker, case):
    check(case, worker)
