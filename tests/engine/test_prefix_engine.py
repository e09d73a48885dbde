"""Prefix caching through the whole engine: hash and radix agree when prefixes are block-aligned, the
cache shows up in the timeline and summary, and invariants hold at every iteration."""

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.metrics.summary import build_summary
from kvsim.scenario import build_scenario

ALIGNED_CHAT = {
    "model": "llama-3-8b", "hardware": "h100-sxm",
    "kv": {"block_size": 16, "num_gpu_blocks_override": 4000, "check_invariants": True},
    "workload": {
        "kind": "chat", "arrival": {"process": "poisson", "rate": 4.0},
        "output_len": {"dist": "fixed", "value": 64},
        "chat": {"system_prompts": 3, "system_prompt_len": {"dist": "fixed", "value": 512},
                 "user_turn_len": {"dist": "fixed", "value": 64}, "turns": {"dist": "uniform", "low": 1,
                                                                            "high": 4},
                 "think_time_s": 1.0},
    },
    "simulation": {"seed": 3, "requests": 120},
}


def run(data, **kv):
    data = {**data, "kv": {**data["kv"], **kv}}
    result = Simulation(build_scenario(data)).run()
    return result, build_summary(result.requests, result.timeline, result.meta)


def test_hash_and_radix_agree_on_block_aligned_prefixes():
    h, hs = run(ALIGNED_CHAT, prefix_cache="hash")
    r, rs = run(ALIGNED_CHAT, prefix_cache="radix")
    assert hs["prefix_cache"]["evictions"] == rs["prefix_cache"]["evictions"] == 0
    assert (h.requests["cached_tokens"] == r.requests["cached_tokens"]).all()
    assert hs["prefix_cache"]["hit_rate_tokens"] == rs["prefix_cache"]["hit_rate_tokens"] > 0.5
    assert h.requests["ttft_s"].equals(r.requests["ttft_s"])


def test_hits_are_whole_blocks_below_the_prompt():
    res, summary = run(ALIGNED_CHAT, prefix_cache="hash")
    req = res.requests
    assert (req["cached_tokens"] % 16 == 0).all()
    assert (req["cached_tokens"] <= (req["prompt_len"] - 1) // 16 * 16).all()
    # a later turn finds its whole history: system prompt, earlier turns and their answers (full blocks)
    assert (req["cached_tokens"] >= 512).sum() > len(req) / 2
    pc = summary["prefix_cache"]
    assert pc["prefill_tokens_saved"] == int(req["cached_tokens"].sum())
    assert pc["prefill_tokens_computed"] == int(res.timeline["prefill_tokens"].sum())
    assert pc["prefill_tokens_saved"] + pc["prefill_tokens_computed"] == int(req["prompt_len"].sum())


def test_no_cache_changes_nothing_and_reports_zero():
    res, summary = run(ALIGNED_CHAT)
    assert (res.requests["cached_tokens"] == 0).all()
    assert (res.timeline["kv_cached_blocks"] == 0).all()
    assert summary["prefix_cache"]["policy"] == "none" and summary["prefix_cache"]["hit_rate_tokens"] == 0


@pytest.mark.parametrize("cache", ["hash", "radix"])
@pytest.mark.parametrize("eviction", ["lru", "length"])
def test_small_pool_evicts_and_occupancy_is_in_the_timeline(cache, eviction):
    res, summary = run(ALIGNED_CHAT, prefix_cache=cache, eviction=eviction, num_gpu_blocks_override=400)
    tl = res.timeline
    assert summary["prefix_cache"]["evictions"] > 0
    assert tl["kv_cached_blocks"].max() > 0
    assert (tl["kv_used_blocks"] + tl["kv_cached_blocks"] <= 400).all()
    assert summary["kv"]["cached_blocks_mean"] > 0
    assert summary["requests"]["completed"] == len(res.requests)


def test_contiguous_layout_refuses_a_prefix_cache():
    from kvsim.errors import KvsimError

    with pytest.raises(KvsimError, match="kv.prefix_cache: 'hash' needs kv.layout: paged"):
        run(ALIGNED_CHAT, prefix_cache="hash", layout="contiguous:max")


def test_cached_tokens_count_the_first_admission_only():
    """A recompute-preempted request finds its own blocks when it is re-admitted; that is not a hit of
    the workload, so cached_tokens keeps the first admission's value (0 here: unique content)."""
    from kvsim.engine.group import Group
    from kvsim.engine.scheduler import Scheduler, SchedulerLimits
    from kvsim.kvcache.prefix_hash import PrefixHashKVManager
    from kvsim.workload.request import Request

    seen = []

    class Spy(PrefixHashKVManager):
        __slots__ = ()

        def admit(self, *args):
            hit = super().admit(*args)
            seen.append(hit.tokens)
            return hit

    kv = Spy(8, 4)
    s = Scheduler(SchedulerLimits(8, 64, True, "recompute", 0, 1.0), kv)
    groups = [Group(req=Request(i, 0.0, 8, 12), order=i, seqs=[i], output=12, prompt=8) for i in (0, 1)]
    for g in groups:
        s.add(g)
    t = 0.0
    while s.has_work():
        s.schedule(t)
        kv.check_invariants()
        t += 1.0
        s.complete(t)
    assert groups[1].preemptions >= 1 and max(seen) > 0  # re-admitted onto its own cached blocks
    assert [g.cached_tokens for g in groups] == [0, 0]
