"""End-to-end runs of models with layer groups (docs/layer_groups.md): the page plan of
kvsim/specs/pages.py and the KV coordinator (kvsim/kvcache/coordinator.py) under the engine.

What this file pins:

- every catalog model of each layer-group kind (mistral-7b: 32 sliding(4096); gpt-oss-20b: 12 sliding(128)
  + 12 full; gemma-2-9b / gemma-3-27b: local / global; nemotron-h-8b: Mamba-2 states + 4 attention layers;
  deepseek-v4-flash: compressed; deepseek-v3: MLA; llama-3-8b: full) runs a small KV-bound scenario to
  completion with recompute and with swap preemption under `kv.check_invariants`: every request finishes
  (all its tokens) or is reported refused, `kv_used_blocks` never exceeds the pool, the KV breakdown sums
  to the pool's slots;
- hash prefix caching on gpt-oss-20b and mistral-7b hits shared prefixes under the invariant checks, and
  with nothing evicted the hybrid manager serves the same prefix hits as allocating every layer in full;
- the pages a sliding model holds for one 16,448-token request (the hand counts of docs/specs.md): 257 =
  ceil(4096 / 16) + 1 per sliding group once the prefill is done, 1,028 with
  `kv.disable_hybrid_kv_cache_manager` (and what the prefill iterations hold: vLLM allocates a chunk
  before trimming the window);
- `disable_hybrid_kv_cache_manager` on mistral-7b changes only the KV: with a pool nothing is bound by, every
  request's TTFT / TPOT and every iteration's timing equal the hybrid run's (the cost model charges the
  window either way), while the pages used grow and the sequences (tokens) the pool can hold shrink;
- every refusal of `Simulation._check_layer_groups` is a one-line KvsimError naming its key, raised when
  the Simulation is built (sparsity on mistral-7b is refused even with the hybrid manager disabled);
- a hybrid run is deterministic: the same scenario twice gives identical request and timeline frames.

Parallel sampling / beam search on deepseek-v4-flash (a compressed group with a per-sequence state cache) is
refused like a state model's (test_parallel_sampling_on_a_model_with_a_state_cache).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.metrics.summary import build_summary
from kvsim.scenario import build_scenario

BLOCK = 16
REQUESTS = 30
PARTS = ["kv_token_states", "kv_reservation", "kv_internal_frag", "kv_external_frag", "kv_free"]

# model: (hardware, tensor_parallel_size, pool pages, longest prompt, longest output, max_model_len).
# Pools sized so that every run preempts (a few requests' pages): gemma-3-27b has 7 cache groups (1 full +
# 6 sliding of 10 layers), nemotron-h-8b pages of 528 tokens (6 state pages a sequence), deepseek-v4-flash
# pages of 128 tokens (10 state-cache pages a sequence).
SMALL = {
    "mistral-7b": ("h100-sxm", 1, 100, 300, 200, 1024),
    "gpt-oss-20b": ("h100-sxm", 1, 100, 300, 200, 1024),
    "gemma-2-9b": ("h100-sxm", 1, 200, 300, 200, 1024),
    "gemma-3-27b": ("h100-sxm", 1, 500, 300, 200, 1024),
    "nemotron-h-8b": ("h100-sxm", 1, 40, 1000, 600, 2048),
    "deepseek-v4-flash": ("h100-sxm", 4, 30, 600, 300, 2048),
    "deepseek-v3": ("h200", 8, 100, 300, 200, 1024),
    "llama-3-8b": ("h100-sxm", 1, 100, 300, 200, 1024),
}
PAGE_TOKENS = {"nemotron-h-8b": 528, "deepseek-v4-flash": 128}  # raised by the page plan; the rest 16


def small(model: str, mode: str = "recompute", kv: dict | None = None, workload: dict | None = None,
          seed: int = 3) -> dict:
    hardware, tp, pool, prompt, output, max_len = SMALL[model]
    return {
        "model": model, "hardware": hardware, "parallelism": {"tensor_parallel_size": tp},
        "kv": {"block_size": BLOCK, "num_gpu_blocks_override": pool, "check_invariants": True, **(kv or {})},
        "scheduler": {"max_num_seqs": 16, "max_num_batched_tokens": 512, "max_model_len": max_len,
                      "preemption_mode": mode},
        "workload": {"kind": "synthetic", "arrival": {"process": "poisson", "rate": 50.0},
                     "prompt_len": {"dist": "uniform", "low": 16, "high": prompt},
                     "output_len": {"dist": "uniform", "low": 1, "high": output}, **(workload or {})},
        "simulation": {"seed": seed, "requests": REQUESTS},
    }


def simulate(data: dict):
    sim = Simulation(build_scenario(data))
    result = sim.run()
    return sim, result, build_summary(result.requests, result.timeline, result.meta)


# ---- every model runs to completion under pressure -------------------------------------------------------

@pytest.mark.parametrize("mode", ["recompute", "swap"])
@pytest.mark.parametrize("model", list(SMALL))
def test_catalog_model_runs_to_completion_under_preemption(model, mode):
    sim, result, summary = simulate(small(model, mode))
    assert sim.block_size == PAGE_TOKENS.get(model, BLOCK)
    assert (sim.plan is None or sim.plan.single) == (model in ("deepseek-v3", "llama-3-8b"))
    req, tl = result.requests, result.timeline
    stream = {r.rid: r for r in sim.build_requests()}
    assert sorted(req["rid"]) == sorted(stream) and len(stream) == REQUESTS
    done, refused = req[req["rejected"] == 0], req[req["rejected"] == 1]
    assert summary["requests"]["completed"] + summary["requests"]["rejected"] == REQUESTS
    assert len(refused) == 0  # every request fits these pools
    assert done["finish_s"].notna().all() and (done["finish_s"] >= done["first_token_s"]).all()
    assert refused["finish_s"].isna().all()
    for row in done.itertuples():  # every token generated
        r = stream[row.rid]
        assert row.output_len == min(r.output_len, sim.max_model_len - r.prompt_len)
    # the pool was the bound: preemptions happened, with swap some group went to the host
    assert summary["preemptions"] > 0 and req["preemptions"].sum() == summary["preemptions"]
    if mode == "swap":
        assert tl["swapped"].max() > 0
    assert (tl["kv_used_blocks"] >= 0).all()
    assert tl["kv_used_blocks"].max() <= sim.num_blocks == SMALL[model][2]
    assert tl["kv_used_blocks"].iloc[-1] == 0  # every page went back
    capacity = sim.num_blocks * sim.block_size
    assert (tl[PARTS].sum(axis=1) == capacity).all()
    assert (tl[PARTS] >= 0).all().all()
    assert (tl["kv_token_states"] <= tl["kv_used_blocks"] * sim.block_size).all()


def test_a_request_larger_than_the_pool_is_refused_not_stalled():
    # gemma-3-27b holds 7 pages per 16 tokens below its 1,024-token window (1 full + 6 sliding groups):
    # a 300-token prompt with 200 output tokens needs 7 x ceil(499 / 16) = 224 pages > a 120-page pool
    sim, result, summary = simulate({**small("gemma-3-27b"), "kv": {**small("gemma-3-27b")["kv"],
                                                                  "num_gpu_blocks_override": 120}})
    req = result.requests
    assert 0 < summary["requests"]["rejected"] < REQUESTS
    assert summary["requests"]["completed"] + summary["requests"]["rejected"] == REQUESTS
    total = req["prompt_len"] + req["output_len"] - 1
    for row, tokens in zip(req.itertuples(), total, strict=True):
        assert bool(row.rejected) == (sim.plan.pages(tokens) > 120)
    assert result.timeline["kv_used_blocks"].max() <= 120


def tiny_sliding(window: int, layer_types: list[str]) -> dict:
    return {"name": "tiny-sliding", "num_layers": len(layer_types), "hidden_size": 512,
            "num_attention_heads": 8, "num_kv_heads": 2, "num_params": 2.0e8, "sliding_window": window,
            "layer_types": layer_types}


@pytest.mark.parametrize(("window", "workload", "seed"), [
    # beams forked after a one-chunk prompt once shared the pages before the window: the sliding group's
    # shared slots exceeded what its window holds, negative token states (stress seeds 428, 776, 869)
    (32, {"beam_width": 3, "prompt_len": {"dist": "uniform", "low": 1, "high": 400},
          "output_len": {"dist": "uniform", "low": 1, "high": 40}}, 2),
    # an iteration of prompts only counted each waiting decode's next token in the window sums: more token
    # states than slots (with one sequence a request too)
    (128, {"prompt_len": {"dist": "fixed", "value": 48}, "output_len": {"dist": "fixed", "value": 40}}, 0),
], ids=["beams", "n1"])
def test_vllm_v0_prefill_only_iterations_keep_token_states_within_the_pages(window, workload, seed):
    data = {"model": tiny_sliding(window, ["sliding", "full", "sliding", "full"]), "hardware": "h200",
            "kv": {"block_size": BLOCK, "num_gpu_blocks_override": 400, "check_invariants": True},
            "scheduler": {"policy": "vllm_v0", "chunked_prefill": False},
            "workload": {"kind": "synthetic", "arrival": {"process": "poisson", "rate": 2000.0}, **workload},
            "simulation": {"seed": seed, "requests": 8}}
    sim, result, summary = simulate(data)  # (check mode: the O(1) checks after every iteration)
    tl = result.timeline
    assert summary["requests"]["completed"] == 8
    assert (tl["kv_token_states"] >= 0).all()
    assert (tl["kv_token_states"] <= tl["kv_used_blocks"] * sim.block_size).all()


# ---- prefix caching across groups ------------------------------------------------------------------------

def chat(model: str, pool: int, system_len: int, disable: bool = False, requests: int = 30) -> dict:
    """Chat sessions over 2 shared system prompts: every later turn re-sends its session's history."""
    return {
        "model": model, "hardware": "h100-sxm",
        "kv": {"block_size": BLOCK, "num_gpu_blocks_override": pool, "check_invariants": True,
               "prefix_cache": "hash", "disable_hybrid_kv_cache_manager": disable},
        "scheduler": {"max_num_seqs": 16, "max_num_batched_tokens": 1024, "max_model_len": 8192},
        "workload": {"kind": "chat", "arrival": {"process": "poisson", "rate": 5.0},
                     "output_len": {"dist": "uniform", "low": 8, "high": 120},
                     "chat": {"system_prompts": 2,
                              "system_prompt_len": {"dist": "fixed", "value": system_len},
                              "turns": {"dist": "uniform", "low": 2, "high": 4},
                              "user_turn_len": {"dist": "uniform", "low": 10, "high": 80},
                              "think_time_s": 0.5}},
        "simulation": {"seed": 5, "requests": requests},
    }


@pytest.mark.parametrize(("model", "pool"), [("gpt-oss-20b", 200), ("mistral-7b", 100)])
def test_hash_prefix_cache_hits_on_sliding_models(model, pool):
    # small pools: cached pages are evicted (and requests preempted) while the checks run every iteration
    sim, result, summary = simulate(chat(model, pool, system_len=300))
    req = result.requests
    assert summary["requests"]["completed"] == REQUESTS
    assert req["cached_tokens"].sum() > 0
    assert summary["prefix_cache"]["prefill_tokens_saved"] == req["cached_tokens"].sum()
    assert result.meta["prefix_cache_evictions"] > 0
    # a hit is whole pages, and the last prompt token is always computed
    assert (req["cached_tokens"] % BLOCK == 0).all()
    assert (req["cached_tokens"] < req["prompt_len"]).all()
    assert result.timeline["kv_used_blocks"].max() <= pool


@pytest.mark.parametrize(("model", "pool"), [("mistral-7b", 1200), ("gpt-oss-20b", 1500)])
def test_prefix_hits_equal_full_allocation_when_nothing_is_evicted(model, pool):
    """System prompts of 4,200 tokens are longer than mistral's window (and far longer than gpt-oss's 128):
    the sliding groups' pages that left the window stay cached, so with no eviction every hit is the one
    the full-attention allocation (disable_hybrid_kv_cache_manager) finds, request by request."""
    _, hybrid, hs = simulate(chat(model, pool, system_len=4200, requests=20))
    _, full, fs = simulate(chat(model, pool, system_len=4200, disable=True, requests=20))
    assert hybrid.meta["prefix_cache_evictions"] == full.meta["prefix_cache_evictions"] == 0
    assert hs["preemptions"] == fs["preemptions"] == 0
    assert hybrid.requests["cached_tokens"].tolist() == full.requests["cached_tokens"].tolist()
    # 18 of the 20 turns hit, each at least the 4,192 tokens (262 pages)
    # of its system prompt: 77,456 tokens in all
    cached = hybrid.requests["cached_tokens"]
    assert (cached > 0).sum() == 18 and cached[cached > 0].min() == 4192 and cached.sum() == 77_456


# ---- pages a sliding model holds for one long request ----------------------------------------------------

def long_request(model: str = "mistral-7b", disable: bool = False, chunk: int | None = None,
                 pool: int = 2200, prompt: int = 16_448, output: int = 16) -> dict:
    """One request of `prompt` tokens and `output` output tokens; chunk None: the prompt in one iteration."""
    return {
        "model": model, "hardware": "h100-sxm",
        "kv": {"block_size": BLOCK, "num_gpu_blocks_override": pool, "check_invariants": True,
               "disable_hybrid_kv_cache_manager": disable},
        "scheduler": {"max_num_seqs": 4, "max_num_batched_tokens": chunk or prompt, "max_model_len": 32768,
                      "chunked_prefill": chunk is not None},
        "workload": {"kind": "synthetic", "arrival": {"process": "poisson", "rate": 1.0},
                     "prompt_len": {"dist": "fixed", "value": prompt},
                     "output_len": {"dist": "fixed", "value": output}},
        "simulation": {"seed": 1, "requests": 1},
    }


def phases(timeline: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    busy = timeline[timeline["iteration"] >= 0]
    return busy[busy["prefill_tokens"] > 0], busy[busy["decode_seqs"] > 0]


def test_mistral_holds_the_window_after_prefill():
    # kv_used_blocks counts pages of the one pool referenced by sequences; mistral has one cache group of
    # all 32 sliding layers, so its pages are that group's (a page = 16 tokens x 32 layers, the classic
    # block). Hand count (docs/specs.md): the prompt spans 16,448 / 16 = 1,028 blocks (0..1027). The first
    # decode step computes from 16,448 tokens: vLLM keeps the blocks holding the last W - 1 = 4,095 tokens,
    # from block (16,448 - 4,095) // 16 = 772 on, and takes block 1,028 for token 16,449:
    # 1,029 - 772 = 257 = ceil(4096 / 16) + 1 pages. The prefill iteration itself holds all 1,028: the
    # blocks are allocated before the window is trimmed (trimming needs the tokens computed).
    sim, result, _ = simulate(long_request())
    prefill, decode = phases(result.timeline)
    assert sim.plan.groups[0].kind == "sliding" and len(sim.plan.groups) == 1
    assert prefill["kv_used_blocks"].tolist() == [1028]
    assert decode["kv_used_blocks"].iloc[0] == 257 == math.ceil(4096 / BLOCK) + 1
    assert (decode["kv_used_blocks"] == 257).all()  # 15 more tokens stay within block 1,028
    assert result.requests["rejected"].iloc[0] == 0 and result.requests["output_len"].iloc[0] == 16


def test_mistral_holds_a_chunk_and_the_window_during_a_chunked_prefill():
    # chunks of 2,048: a chunk's blocks are taken before the window before it is trimmed, so a prefill
    # iteration holds up to ceil((2048 + 4095) / 16) + 1 = 385 pages. Measured: 128, 256, then 384 (computed
    # 4,096: blocks 0 .. 383; computed 6,144: from (6,144 - 4,095) // 16 = 128 to 511; and so on), and the
    # last chunk of 64 tokens (computed 16,384): blocks 768 .. 1,027 = 260. After the prefill: 257.
    _, result, _ = simulate(long_request(chunk=2048))
    prefill, decode = phases(result.timeline)
    assert prefill["kv_used_blocks"].tolist() == [128, 256, 384, 384, 384, 384, 384, 384, 260]
    assert prefill["kv_used_blocks"].max() <= math.ceil((2048 + 4095) / BLOCK) + 1
    assert (decode["kv_used_blocks"] == 257).all()


def test_mistral_without_the_hybrid_manager_holds_every_block():
    # every layer allocated as full attention: 16,448 / 16 = 1,028 blocks after the prefill, then block
    # 1,028 for token 16,449 (1,029) and nothing is ever given back
    sim, result, _ = simulate(long_request(disable=True))
    prefill, decode = phases(result.timeline)
    assert sim.plan.single
    assert prefill["kv_used_blocks"].tolist() == [1028]
    assert (decode["kv_used_blocks"] == 1029).all()
    _, chunked, _ = simulate(long_request(disable=True, chunk=2048))
    prefill, _ = phases(chunked.timeline)
    assert prefill["kv_used_blocks"].tolist() == [128, 256, 384, 512, 640, 768, 896, 1024, 1028]


@pytest.mark.parametrize(("model", "after_prefill", "during"), [
    # gpt-oss-20b: full 1,029 + sliding(128) from block (16,448 - 127) // 16 = 1,020: 9 -> 1,038
    # (docs/specs.md: 1,036 = 1,028 + 8 with the last prompt token written, before block 1,028 is taken)
    ("gpt-oss-20b", 1029 + 9, 2 * 1028),
    # gemma-3-27b: full 1,029 + 6 sliding(1024) groups from block (16,448 - 1,023) // 16 = 964: 6 x 65
    ("gemma-3-27b", 1029 + 6 * 65, 7 * 1028),
])
def test_mixed_models_hold_full_context_plus_windows(model, after_prefill, during):
    sim, result, _ = simulate(long_request(model, pool=8000))
    prefill, decode = phases(result.timeline)
    assert prefill["kv_used_blocks"].tolist() == [during]
    assert (decode["kv_used_blocks"] == after_prefill).all()
    assert sim.plan.pages(16_448) == after_prefill - len(sim.plan.groups)  # the plan's count before the grow


# ---- disable_hybrid_kv_cache_manager changes the KV, not the cost ----------------------------------------

def roomy_mistral(disable: bool) -> dict:
    # 12 requests of 3,000-7,000 tokens (most past the 4,096 window); 4,000 pages are more than either run
    # ever holds (mistral's page is the same 2 MiB block both ways, so the override is the same bytes)
    return {
        "model": "mistral-7b", "hardware": "h100-sxm", "cost": {"model": "roofline"},
        "kv": {"block_size": BLOCK, "num_gpu_blocks_override": 4000, "check_invariants": True,
               "disable_hybrid_kv_cache_manager": disable},
        "scheduler": {"max_num_seqs": 8, "max_num_batched_tokens": 2048, "max_model_len": 8192},
        "workload": {"kind": "synthetic", "arrival": {"process": "poisson", "rate": 4.0},
                     "prompt_len": {"dist": "uniform", "low": 3000, "high": 7000},
                     "output_len": {"dist": "uniform", "low": 16, "high": 300}},
        "simulation": {"seed": 4, "requests": 12},
    }


def test_disabling_the_hybrid_manager_keeps_every_latency_and_costs_pages():
    hsim, hybrid, hs = simulate(roomy_mistral(False))
    fsim, full, fs = simulate(roomy_mistral(True))
    assert hs["preemptions"] == fs["preemptions"] == 0
    assert hs["requests"]["completed"] == fs["requests"]["completed"] == 12
    cols = ["first_scheduled_s", "first_token_s", "finish_s", "ttft_s", "tpot_s", "e2e_s"]
    pd.testing.assert_frame_equal(hybrid.requests[cols], full.requests[cols])
    timing = ["t_s", "dt_s", "num_seqs", "prefill_tokens", "decode_seqs", "waiting"]
    pd.testing.assert_frame_equal(hybrid.timeline[timing], full.timeline[timing])
    # the KV differs: every token kept, so more pages in use ...
    assert full.timeline["kv_used_blocks"].max() == 2943 > hybrid.timeline["kv_used_blocks"].max() == 2156
    assert (full.timeline["kv_used_blocks"] >= hybrid.timeline["kv_used_blocks"]).all()
    assert fs["kv"]["used_blocks_mean"] > hs["kv"]["used_blocks_mean"]
    # ... in a pool of the same pages (the page count and page tokens do not change) ...
    assert hs["kv"]["capacity_tokens"] == fs["kv"]["capacity_tokens"] == 4000 * BLOCK
    assert hs["kv"]["bytes_per_block"] == fs["kv"]["bytes_per_block"] == 16 * 131_072
    # ... that holds fewer sequences (tokens in all) of a given length: the unbounded h100-sxm pool of
    # 27,522 pages holds 27,522 // 256 = 107 sequences of 32,768 tokens, against 27,522 // 2,048 = 13
    assert hsim.capacity.num_blocks == fsim.capacity.num_blocks == 27_522
    assert hsim.capacity.sequences(32_768) == 107 and fsim.capacity.sequences(32_768) == 13


def test_disabling_the_hybrid_manager_refuses_what_only_the_window_fits():
    # 300 pages: the 16,448-token request holds at most max(256 after, ceil((512 + 4,095) / 16) + 1 = 289
    # while a 512-token chunk is computed) with the hybrid manager; every token's 1,029 blocks without
    hybrid = simulate(long_request(chunk=512, pool=300))[1].requests
    full = simulate(long_request(chunk=512, pool=300, disable=True))[1].requests
    assert hybrid["rejected"].tolist() == [0] and hybrid["finish_s"].notna().all()
    assert full["rejected"].tolist() == [1] and full["finish_s"].isna().all()


# ---- what is refused -------------------------------------------------------------------------------------

REFUSED = [
    ("gpt-oss-20b", {"layout": "contiguous:max"}, {}, "kv.layout"),
    ("mistral-7b", {"layout": "contiguous:oracle"}, {}, "kv.layout"),
    ("nemotron-h-8b", {"layout": "contiguous:pow2"}, {}, "kv.layout"),
    ("deepseek-v4-flash", {"layout": "contiguous:max"}, {}, "kv.layout"),
    ("gpt-oss-20b", {"sparsity": {"policy": "h2o"}}, {}, "kv.sparsity.policy"),
    ("gemma-2-9b", {"sparsity": {"policy": "snapkv"}}, {}, "kv.sparsity.policy"),
    ("nemotron-h-8b", {"sparsity": {"policy": "streaming"}}, {}, "kv.sparsity.policy"),
    ("deepseek-v4-flash", {"sparsity": {"policy": "h2o"}}, {}, "kv.sparsity.policy"),
    ("mistral-7b", {"sparsity": {"policy": "h2o"}}, {}, "kv.sparsity.policy"),
    # the hybrid manager disabled makes mistral / gpt-oss one full group, yet their layers stay sliding
    ("mistral-7b", {"sparsity": {"policy": "h2o"}, "disable_hybrid_kv_cache_manager": True}, {},
     "kv.sparsity.policy"),
    ("mistral-7b", {"sparsity": {"policy": "streaming"}, "disable_hybrid_kv_cache_manager": True}, {},
     "kv.sparsity.policy"),
    ("gpt-oss-20b", {"sparsity": {"policy": "infinigen"}, "disable_hybrid_kv_cache_manager": True}, {},
     "kv.sparsity.policy"),
    ("gpt-oss-20b", {"prefix_cache": "radix"}, {}, "kv.prefix_cache"),
    ("mistral-7b", {"prefix_cache": "radix"}, {}, "kv.prefix_cache"),
    ("deepseek-v4-flash", {"prefix_cache": "radix"}, {}, "kv.prefix_cache"),
    ("nemotron-h-8b", {"prefix_cache": "hash"}, {}, "kv.prefix_cache"),
    ("nemotron-h-8b", {"prefix_cache": "hash", "disable_hybrid_kv_cache_manager": True}, {},
     "kv.prefix_cache"),
    ("nemotron-h-8b", {}, {"n": 2}, "workload.n"),
    ("nemotron-h-8b", {}, {"beam_width": 2}, "workload.n"),
    ("nemotron-h-8b", {"disable_hybrid_kv_cache_manager": True}, {"n": 3}, "workload.n"),
]


@pytest.mark.parametrize(("model", "kv", "workload", "key"), REFUSED,
                         ids=[f"{m}-{k}-{i}" for i, (m, _, _, k) in enumerate(REFUSED)])
def test_unmodelled_combinations_are_one_line_errors(model, kv, workload, key):
    sc = build_scenario(small(model, kv=kv, workload=workload))  # the schema alone does not know the model
    with pytest.raises(KvsimError) as info:
        Simulation(sc)  # before simulating: what `kvsim validate` builds
    message = str(info.value)
    assert type(info.value) is KvsimError
    assert message.startswith(f"{key}: {model} ")
    assert "\n" not in message and "(" in message  # one line, with the way out in parentheses


def test_validate_reports_sparsity_on_a_sliding_model_as_one_line(tmp_path):
    path = tmp_path / "sliding_sparse.yaml"
    path.write_text("model: mistral-7b\nkv:\n  disable_hybrid_kv_cache_manager: true\n"
                    "  sparsity:\n    policy: h2o\n")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "kv.sparsity.policy: mistral-7b" in lines[0]


@pytest.mark.parametrize(("model", "kv", "workload"), [
    # one full group once sliding layers are allocated in full: the classic managers take them
    ("mistral-7b", {"layout": "contiguous:oracle", "disable_hybrid_kv_cache_manager": True}, {}),
    ("mistral-7b", {"prefix_cache": "radix", "disable_hybrid_kv_cache_manager": True}, {}),
    ("gpt-oss-20b", {"layout": "contiguous:pow2", "disable_hybrid_kv_cache_manager": True}, {}),
    # forks of token-paged groups are modelled
    ("gpt-oss-20b", {}, {"n": 3}),
    ("mistral-7b", {}, {"beam_width": 3}),
    ("gemma-3-27b", {}, {"n": 2}),
])
def test_modelled_combinations_run_clean(model, kv, workload):
    data = small(model, kv=kv, workload=workload)
    data["kv"]["num_gpu_blocks_override"] = 1000  # ample: contiguous layouts reserve whole regions
    data["simulation"]["requests"] = 10
    sim, result, summary = simulate(data)
    assert summary["requests"]["completed"] == 10
    tl = result.timeline
    assert (tl[PARTS].sum(axis=1) == sim.num_blocks * sim.block_size).all() and (tl[PARTS] >= 0).all().all()


@pytest.mark.parametrize("workload", [{"n": 2}, {"beam_width": 2}], ids=["n2", "beam2"])
def test_parallel_sampling_on_a_model_with_a_state_cache(workload):
    """DeepSeek-V4's compressed group keeps a per-sequence state cache: refused like a state model's."""
    data = small("deepseek-v4-flash", kv={"num_gpu_blocks_override": 400}, workload=workload)
    with pytest.raises(KvsimError, match=r"^workload\.n: deepseek-v4-flash .*per-sequence states"):
        Simulation(build_scenario(data))


def test_prefix_caching_on_a_model_with_a_state_cache_is_refused():
    data = small("deepseek-v4-flash", kv={"num_gpu_blocks_override": 400, "prefix_cache": "hash"})
    with pytest.raises(KvsimError, match=r"^kv\.prefix_cache: deepseek-v4-flash .*not cached at block"):
        Simulation(build_scenario(data))


# ---- determinism -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("data", [
    chat("gpt-oss-20b", 200, system_len=300, requests=20),  # hash prefix cache across groups, evictions
    small("gemma-3-27b", "swap"),
    small("nemotron-h-8b", "recompute"),
], ids=["gpt-oss-20b-prefix", "gemma-3-27b-swap", "nemotron-h-8b"])
def test_a_hybrid_run_is_deterministic(data):
    first = Simulation(build_scenario(data)).run()
    second = Simulation(build_scenario(data)).run()
    pd.testing.assert_frame_equal(first.requests, second.requests)
    pd.testing.assert_frame_equal(first.timeline, second.timeline)
    assert first.meta == second.meta
