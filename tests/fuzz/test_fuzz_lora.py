"""Fuzz the `lora` section (multi-LoRA serving, docs/lora.md): drawn cases (strategies/lora.py) and fixed
ones: each must run or end in one `error:` line with exit 2."""

from __future__ import annotations

import pytest
from cases import Case
from harness import check
from hypothesis import given
from profile_settings import fuzz_settings
from strategies.common import run_argv, small_scenario, to_yaml
from strategies.lora import lora_cases


def _case(cid: str, expect: str, **top) -> Case:
    sc = small_scenario(4)
    sc.update(top)
    return Case("lora", run_argv("s.yaml", "--no-plots"), {"s.yaml": to_yaml(sc)}, expect=expect, why=cid,
                validate_first=True, outputs=("out/summary.json",) if expect == "pass" else ())


FIXED = {
    "vllm-names-only": _case("vllm-names-only", "pass", enable_lora=True, max_loras=2, max_lora_rank=8),
    "enable-lora-false": _case("enable-lora-false", "pass", enable_lora=False),
    "engine-map": _case("engine-map", "pass", engine={"enable_lora": True, "max_cpu_loras": 4}),
    "many-adapters": _case("many-adapters", "pass", lora={"max_loras": 4, "adapters": [
        {"count": 100000, "popularity": "zipf", "zipf_s": 1.2}]}),
    "rank-512-slots-over-memory": _case("rank-512-slots-over-memory", "fail", lora={
        "max_loras": 1024, "max_lora_rank": 512, "max_cpu_loras": 1024, "adapters": [{"name": "a"}]}),
    "cpu-below-gpu": _case("cpu-below-gpu", "fail", lora={"max_loras": 4, "max_cpu_loras": 2}),
    "swap-preemption": _case("swap-preemption", "pass", scheduler={"preemption_mode": "swap"},
                             lora={"max_loras": 1, "adapters": [{"count": 3}]}),
    "v0-punica-era": _case("v0-punica-era", "pass", scheduler={"policy": "vllm_v0", "chunked_prefill": False},
                           lora={"max_loras": 2, "graph_kernel_overhead_s": 0, "adapters": [{"count": 3}]}),
    "kernel-overhead-string": _case("kernel-overhead-string", "fail", lora={"kernel_overhead_s": "fast"}),
}


@pytest.mark.parametrize("cid", list(FIXED))
def test_fixed_lora_cases(worker, cid):
    check(FIXED[cid], worker)


@fuzz_settings(30)
@given(lora_cases())
def test_lora_sections(worker, case):
    check(case, worker)
