"""Speculative decoding with a prefix cache (docs/speculative.md "Prefix caching"): a decoding sequence holds
blocks for its draft and lookahead slots past its tokens, and the scheduler tells the KV manager the tokens
with KV before it frees the sequence (KVManager.set_computed_tokens), so the hash and radix caches register
the same blocks as without speculation: the floor(tokens with KV / block size) blocks they fill exactly, as
vLLM's cache_blocks does (docs/prefix_cache.md "What a finished sequence registers")."""

from __future__ import annotations

import numpy as np
import pytest

import kvsim
from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.spec_sizing import SpecSizing
from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.kvcache.radix import RadixKVManager
from kvsim.workload.request import Request

BS = 4
CACHES = {"hash": PrefixHashKVManager, "radix": RadixKVManager}


def scheduler(cache: str, k: int = 0, rates=(), lookahead: int = 0, blocks: int = 64) -> Scheduler:
    """A scheduler over a prefix-caching manager; k = 0: no speculation (the default decode sizing)."""
    kv = CACHES[cache](blocks, BS)
    lim = SchedulerLimits(8, 512, True, "recompute", 0, bytes_per_block=BS * 10.0)
    sizing = SpecSizing(k, rates, np.random.default_rng(0), BS, lookahead) if k else None
    return Scheduler(lim, kv, sizing)


def finish_one(s: Scheduler, prompt: int, output: int) -> Group:
    g = Group(req=Request(0, 0.0, prompt, output), order=0, seqs=[0], output=output, prompt=prompt)
    s.add(g)
    t = 0.0
    peak = 0
    while s.has_work():
        s.schedule(t)
        s.kv.check_invariants()
        peak = max(peak, s.kv.used_blocks)
        t += 1.0
        s.complete(t)
    assert g.generated == output and s.kv.used_blocks == 0
    return peak


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("rates", [(0.0, 0.0), (1.0, 1.0)], ids=["reject", "accept"])
def test_prompt_8_output_10_registers_4_blocks(cache, rates):
    """Prompt 8, output 10, block size 4, k = 2 with lookahead 2 (eagle-like). The last sampled token has
    no KV: 8 + 10 - 1 = 17 tokens with KV fill floor(17 / 4) = 4 blocks (the fifth holds 1 token), and all 4
    are registered. Every draft rejected: the last step holds context 17 + 2 drafts + 2 lookahead = 21
    slots = 6 blocks, whose "all but the last" would be 5 (a block of draft / lookahead slots keyed as
    output); every draft accepted: 19 slots = 5 blocks held at the end. Without speculation: 17 slots, 5
    blocks, 4 registered."""
    s = scheduler(cache, 2, rates, lookahead=2)
    peak = finish_one(s, 8, 10)
    assert peak == (6 if rates[0] == 0 else 5)
    assert s.kv.cached_blocks == 4 == (8 + 10 - 1) // 4
    plain = scheduler(cache)
    finish_one(plain, 8, 10)
    assert plain.kv.cached_blocks == 4


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("k,lookahead", [(1, 0), (2, 2), (3, 3)])
def test_a_full_last_block_is_kept_as_without_speculation(cache, k, lookahead):
    """Prompt 8, output 9, block size 4: 16 tokens with KV fill 4 blocks exactly. Without speculation the
    table is those 4 blocks and the cache registers floor(16 / 4) = 4, the exactly full last one included
    (vLLM's cache_blocks; before, every block but the last: 3). With speculation (every draft rejected) the
    table holds 16 + k + lookahead slots (5, 6 or 6 blocks), and the cache registers the same 4."""
    plain = scheduler(cache)
    finish_one(plain, 8, 9)
    assert plain.kv.cached_blocks == 4
    s = scheduler(cache, k, (0.0,) * k, lookahead=lookahead)
    peak = finish_one(s, 8, 9)
    assert peak == -(-(16 + k + lookahead) // 4)
    assert s.kv.cached_blocks == 4


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("told,registered", [(17, 4), (16, 4), (15, 3), (None, 5)])
def test_set_computed_tokens_bounds_what_free_registers(cache, told, registered):
    """Prompt 8 (2 blocks, registered as allocated), grown to 21 slots (6 blocks: a speculative sequence's
    context, drafts and lookahead). Told 17 tokens with KV, free registers the floor(17 / 4) = 4 blocks they
    fill; told 16: floor(16 / 4) = 4 (the fourth exactly full); told 15: 3; not told (a prefill's blocks),
    every block of the table but the last: 5."""
    kv = CACHES[cache](16, BS)
    kv.admit(0, Request(0, 0.0, 8, 10), 8, 10)
    kv.allocate(0, 8)
    assert kv.cached_blocks == 0 and kv.allocate(0, 21) and kv.num_blocks_of(0) == 6
    if told is not None:
        kv.set_computed_tokens(0, told)
    kv.free(0)
    kv.check_invariants()
    assert kv.cached_blocks == registered


@pytest.mark.parametrize("cache", CACHES)
def test_a_recompute_preemption_registers_only_the_tokens_with_kv(cache):
    """Prompt 8, output 20, block size 4, k = 2 with lookahead 2, every draft rejected: the prefill samples
    token 1, steps 0 and 1 one token each: 3 generated, 8 + 3 - 1 = 10 tokens with KV. Step 1 held context
    10 + 2 drafts + 2 lookahead = 14 slots = 4 blocks. Preempted (recompute) after it, the sequence is
    freed told 10 tokens: the cache keeps floor(10 / 4) = 2 blocks (the prompt's, registered as
    allocated), not 4 - 1 = 3 (block 2, tokens 8..11, holds slots of rejected drafts)."""
    s = scheduler(cache, 2, (0.0, 0.0), lookahead=2)
    g = Group(req=Request(0, 0.0, 8, 20), order=0, seqs=[0], output=20, prompt=8)
    s.add(g)
    for t in range(3):  # the prefill, then steps 0 and 1
        s.schedule(float(t))
        s.complete(t + 1.0)
    assert s.kv.num_blocks_of(0) == 4
    assert s._preempt_last() is g
    s.kv.check_invariants()
    assert g.generated == 3 and g.prompt == 8 + 3 and s.kv.cached_blocks == 2


def _cached_tokens(cache: str, speculative: dict | None, requests: int = 200) -> int:
    over = {"kv": {"prefix_cache": cache, "num_gpu_blocks_override": 200000},
            "simulation": {"requests": requests}}
    if speculative:
        over["speculative"] = speculative
    summary = kvsim.run("workloads/chat.yaml", over).summary
    assert summary["prefix_cache"]["evictions"] == 0
    return summary["requests"]["cached_tokens"]


@pytest.mark.parametrize("cache", CACHES)
def test_chat_cached_tokens_equal_with_and_without_speculation(cache):
    """workloads/chat.yaml (multi-turn: each turn's prompt is the history), 200 requests, a pool too large
    to evict. Every block a finished turn registers stays cached, and the next turn arrives after it
    finished (think time), so the cached tokens depend only on which blocks the caches register: the same
    with ngram k = 1 or 3 (no lookahead) and eagle3 k = 3 (lookahead 3), every draft rejected or 60%
    accepted, as without speculation. (Before set_computed_tokens the 600-request run cached 782,112
    tokens without speculation, 782,736 with ngram k = 1 and 783,104 with k = 3 or eagle3: blocks of
    draft / lookahead slots keyed past the turns' tokens; with it, 782,112 for all; since the exactly
    full last block is registered as vLLM does, 782,736 for all.)"""
    plain = _cached_tokens(cache, None)
    assert plain > 0
    for spec in ({"method": "ngram", "num_speculative_tokens": 1, "acceptance": 0.0},
                 {"method": "ngram", "num_speculative_tokens": 3, "acceptance": 0.0},
                 {"method": "eagle3", "num_speculative_tokens": 3, "acceptance": 0.0},
                 {"method": "eagle3", "num_speculative_tokens": 3, "acceptance": 0.6}):
        assert _cached_tokens(cache, spec) == plain, spec


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_check_mode_under_preemption(cache, mode):
    """Check mode (every manager and summary invariant) with speculation, a prefix cache and a pool of 300
    blocks that forces preemptions (10 in each of the four runs; recompute frees speculative sequences
    mid-decode, each told its prompt + generated - 1 tokens) and evictions (~9,000)."""
    res = kvsim.run("workloads/chat.yaml", {
        "kv": {"prefix_cache": cache, "num_gpu_blocks_override": 300, "check_invariants": True},
        "scheduler": {"preemption_mode": mode}, "simulation": {"requests": 120},
        "speculative": {"method": "eagle3", "num_speculative_tokens": 3, "acceptance": 0.7}})
    s = res.summary
    assert s["preemptions"] >= 5 and s["prefix_cache"]["evictions"] > 0
    assert s["requests"]["completed"] == 120


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("output,registered", [(9, 4), (10, 4), (8, 3)])
def test_a_finished_sequence_registers_its_full_blocks(cache, output, registered):
    """No speculation, prompt 8, block size 4. The last sampled token has no KV: 8 + output - 1 tokens with
    KV, and the cache registers floor((8 + output - 1) / 4) blocks, as vLLM V1 (cache_blocks over
    num_tokens_to_cache = min(num_computed + num_new, num_tokens)) and SGLang (cache_finished_req: the
    full pages of (input + output)[:-1]). Output 9: 16 tokens, the table's 4 blocks all full: 4 (before
    this rule: 3); output 10: 17 tokens, 5 blocks, 4 full: 4 (unchanged); output 8: 15 tokens, 4 blocks, 3
    full: 3."""
    s = scheduler(cache)
    assert finish_one(s, 8, output) == -(-(8 + output - 1) // 4)
    assert s.kv.cached_blocks == registered == (8 + output - 1) // 4
    s.kv.check_invariants()


@pytest.mark.parametrize("model,cache", [("llama-3-8b", "hash"), ("llama-3-8b", "radix"),
                                         ("gpt-oss-20b", "hash")])
def test_check_mode_under_preemption_without_speculation(model, cache):
    """Check mode with a prefix cache and no speculation, a pool small enough to preempt (recompute: each
    preempted sequence told prompt + generated - 1 tokens) and evict: the hash and radix caches and the
    layer-group coordinator's cached pages (gpt-oss-20b: full + sliding groups) register the full blocks of
    the tokens with KV, the exactly full last one included, under every invariant. (Today: 15, 15 and 2
    preemptions, 9,124 / 9,952 / 16,182 evictions; gpt-oss-20b rejects 8 requests its 300 pages cannot
    hold.)"""
    res = kvsim.run("workloads/chat.yaml", {
        "model": model,
        "kv": {"prefix_cache": cache, "num_gpu_blocks_override": 300, "check_invariants": True},
        "simulation": {"requests": 120}})
    s = res.summary
    assert s["preemptions"] >= 1 and s["prefix_cache"]["evictions"] > 0
    assert s["requests"]["completed"] + s["requests"]["rejected"] == 120
    assert s["requests"]["cached_tokens"] > 0
