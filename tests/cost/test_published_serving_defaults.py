"""kvsim.cost.published_serving.vllm_serve_defaults: the max_num_seqs / max_num_batched_tokens vLLM picks when
its command line states neither (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults, v0.9.0 on), on hand
cases, and how a published case's scenario takes them (an explicit flag wins)."""

from __future__ import annotations

import pytest

from kvsim.cost.published_serving import serving_scenario, vllm_serve_defaults
from kvsim.errors import KvsimError


@pytest.mark.parametrize("hardware, usage, expected", [
    # h100-sxm: 79.11 GiB >= 70 GiB, no "a100" in the name -> the large-GPU branch
    ("h100-sxm", "serve", (1024, 8192)),
    ("h100-sxm", "llm", (1024, 16384)),
    ("h200", "serve", (1024, 8192)),
    ("mi300x", "llm", (1024, 16384)),  # 191.98 GiB; vLLM's comment names MI300x
    # a100-80gb: 79.35 GiB but "a100" in the name (PR #17885) -> the small branch
    ("a100-80gb", "serve", (256, 2048)),
    ("a100-80gb", "llm", (256, 8192)),
    ("l40s", "serve", (256, 2048)),  # 44.4 GiB < 70 GiB
])
def test_vllm_0_10_defaults_by_device(hardware, usage, expected):
    got = vllm_serve_defaults("vllm", "0.10.2", hardware, usage)
    assert got == {"max_num_seqs": expected[0], "max_num_batched_tokens": expected[1]}


def test_the_rule_holds_from_0_9_0_and_v0_has_the_old_defaults():
    assert vllm_serve_defaults("vllm", "v0.9.0", "h100-sxm") == {"max_num_seqs": 1024,
                                                                 "max_num_batched_tokens": 8192}
    assert vllm_serve_defaults("vllm", "0.11.0", "a100-40gb")["max_num_batched_tokens"] == 2048
    # V0 (< 0.8.0), any device and usage: 256 sequences; at Llama 3's 8,192 context chunked prefill stays off
    # and the budget is max(8192, 2048) = 8192; at a 1,024 context max(1024, 2048) = 2048
    v0 = {"policy": "vllm_v0", "chunked_prefill": False, "max_num_seqs": 256, "max_num_batched_tokens": 8192}
    assert vllm_serve_defaults("vllm", "0.6.3", "h100-sxm", "serve", 8192) == v0
    assert vllm_serve_defaults("vllm", "0.6.3", "a100-80gb", "llm", 1024)["max_num_batched_tokens"] == 2048


def test_unmodelled_versions_and_other_engines():
    assert vllm_serve_defaults("tensorrt-llm", "1.0", "h100-sxm") is None  # kvsim's defaults stay
    assert vllm_serve_defaults("nvidia-nim", "1.8.0", "h100-sxm") is None
    with pytest.raises(KvsimError, match="0.8.4.*not modelled"):
        vllm_serve_defaults("vllm", "0.8.4", "h100-sxm")
    with pytest.raises(KvsimError, match="not modelled"):  # V0 above 32K: chunked prefill on by itself
        vllm_serve_defaults("vllm", "0.7.3", "h100-sxm", "llm", 131072)
    with pytest.raises(KvsimError, match="not a version"):
        vllm_serve_defaults("vllm", "latest", "h100-sxm")


def _case(engine_args: str, hardware: str = "h100-sxm", version: str = "0.10.2") -> dict:
    return {"case": "hand", "group": "gpustack-perf-lab", "model": "llama-3.1-8b", "hardware": hardware,
            "tensor_parallel_size": 1, "quantization": "none", "engine": "vllm", "engine_version": version,
            "engine_args": engine_args, "dataset": "fixed", "input_len": 100, "output_len": 10,
            "concurrency": None, "request_rate": "inf", "num_prompts": 4, "metrics": {}}


def test_a_case_takes_the_defaults_and_an_explicit_flag_wins():
    assert serving_scenario(_case("vllm serve m"), "roofline")["scheduler"] == {
        "max_num_batched_tokens": 8192, "max_num_seqs": 1024}
    assert serving_scenario(_case("vllm serve m", "a100-80gb"), "roofline")["scheduler"] == {
        "max_num_batched_tokens": 2048, "max_num_seqs": 256}
    assert serving_scenario(_case("vllm serve m --max-num-seqs 64"), "roofline")["scheduler"] == {
        "max_num_seqs": 64, "max_num_batched_tokens": 8192}
    # an explicit token budget under the default sequence count caps it, as vLLM's min(seqs, tokens)
    assert serving_scenario(_case("vllm serve m --max-num-batched-tokens 512"), "roofline")["scheduler"] == {
        "max_num_batched_tokens": 512, "max_num_seqs": 512}
    # the LLM class (benchmark_latency): 16384 tokens on an H100
    assert serving_scenario(_case("benchmark_latency.py --dtype float16"), "roofline")["scheduler"] == {
        "max_num_batched_tokens": 16384, "max_num_seqs": 1024}
    # V0: llama-3.1-8b's 131,072 context is over 32K (refused); --max-model-len 4096 gives V0's scheduler
    with pytest.raises(KvsimError, match="not modelled"):
        serving_scenario(_case("vllm serve m", version="0.6.3"), "roofline")
    assert serving_scenario(_case("vllm serve m --max-model-len 4096", version="0.6.3"), "roofline")[
        "scheduler"] == {"max_model_len": 4096, "policy": "vllm_v0", "chunked_prefill": False,
                         "max_num_seqs": 256, "max_num_batched_tokens": 4096}
    # both flags stated: no defaults looked up, so even an unmodelled version builds
    both = _case("vllm serve m --max-num-seqs 8 --max-num-batched-tokens 64", version="0.8.2")
    assert serving_scenario(both, "roofline")["scheduler"] == {"max_num_seqs": 8,
                                                               "max_num_batched_tokens": 64}
