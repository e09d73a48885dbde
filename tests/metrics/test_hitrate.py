"""LRU hit-rate curve by stack distances: a hand-computed case, and equality with full LRU replays."""

from pathlib import Path

import numpy as np
import pytest

from kvsim.metrics.hitrate import (
    block_fingerprints,
    chain,
    lru_replay_hits,
    request_order,
    stack_distances,
)
from kvsim.workload.config import TraceConfig, WorkloadConfig
from kvsim.workload.factory import build_requests
from kvsim.workload.request import Request

EXCERPT = Path(__file__).parents[1] / "data" / "mooncake_conv_head50.jsonl"


def req(rid, segs, out=1, after=-1, think=0.0, t=0.0):
    return Request(rid=rid, arrival_s=t, prompt_len=sum(n for _, n in segs), output_len=out,
                   segments=tuple(segs), after=after, think_s=think)


def test_hand_computed_distances():
    """bs 4. R0 = A (8 tokens), R1 = B (8), R2 = A again, output 1 each: each touches 2 blocks and looks
    up (8 - 1) // 4 = 1. R2's lookup of A's block 0: since its last touch, B's two blocks were touched,
    so its stack distance is 3: a hit from capacity 3 on."""
    reqs = [req(0, [(1, 8)]), req(1, [(2, 8)]), req(2, [(1, 8)])]
    d = stack_distances(reqs, 4)
    assert d.distances.tolist() == [3.0]
    assert (d.lookups, d.prompt_blocks, d.prompt_tokens, d.distinct_blocks) == (3, 6, 24, 4)
    assert d.hits(2) == 0 and d.hits(3) == 1
    assert d.hit_rate_blocks(3) == pytest.approx(1 / 6) and d.hit_rate_tokens(3) == pytest.approx(4 / 24)
    assert [lru_replay_hits(reqs, 4, c) for c in (2, 3)] == [0, 1]


def test_deeper_blocks_are_evicted_before_earlier_ones():
    """A 12-token prompt (3 blocks touched, deepest first, 2 looked up) then the same prompt: block 0 is
    the most recent (distance 1), block 1 next (2), so capacity 1 keeps the first block and 2 both."""
    reqs = [req(0, [(1, 12)]), req(1, [(1, 12)])]
    assert stack_distances(reqs, 4).distances.tolist() == [1.0, 2.0]  # block 0, block 1
    assert lru_replay_hits(reqs, 4, 1) == 1 and lru_replay_hits(reqs, 4, 2) == 2


def streams():
    rng = np.random.default_rng
    chat = WorkloadConfig.model_validate({"kind": "chat"})
    agent = WorkloadConfig.model_validate({"kind": "agentic", "agentic": {"fork_prob": 0.2}})
    rag = WorkloadConfig.model_validate({"kind": "rag", "rag": {"passages": 300}})
    trace = WorkloadConfig(kind="trace", trace=TraceConfig(path=str(EXCERPT), format="mooncake"))
    return {
        "chat": request_order(build_requests(chat, rng(0), 150)),
        "agentic": request_order(build_requests(agent, rng(1), 120)),
        "rag": request_order(build_requests(rag, rng(2), 150)),
        "mooncake": request_order(build_requests(trace, rng(0), 50)),
    }


@pytest.mark.parametrize("name", ["chat", "agentic", "rag", "mooncake"])
@pytest.mark.parametrize("block_size", [16, 64])
def test_stack_distances_equal_full_lru_replays(name, block_size):
    reqs = streams()[name]
    d = stack_distances(reqs, block_size)
    caps = [1, 7, 64, 500, 3000, d.distinct_blocks]
    assert [d.hits(c) for c in caps] == [lru_replay_hits(reqs, block_size, c) for c in caps]
    assert d.hits(d.distinct_blocks) > 0


def test_sampling_at_rate_one_is_exact_and_below_estimates():
    reqs = streams()["rag"]
    full = stack_distances(reqs, 16)
    assert np.array_equal(stack_distances(reqs, 16, 1.0).distances, full.distances)
    half = stack_distances(reqs, 16, 0.5)
    assert half.sample_rate == 0.5 and half.lookups == full.lookups
    inf = 2**40
    assert half.hit_rate_tokens(inf) == pytest.approx(full.hit_rate_tokens(inf), abs=0.1)


def test_request_order_places_follow_ups_after_think_time():
    reqs = [req(0, [(1, 4)], t=0.0), req(1, [(1, 8)], after=0, think=5.0, t=0.0), req(2, [(2, 4)], t=3.0)]
    assert [r.rid for r in request_order(reqs)] == [0, 2, 1]


def test_fingerprints_follow_block_content():
    f = block_fingerprints(((7, 6), (9, 5)), 10, 4)
    assert len(f) == 2  # the third block would hold 3 tokens only
    g = block_fingerprints(((7, 20),), 10, 4)
    assert f[0] == g[0] and f[1] != g[1]
    assert len(set(chain(g).tolist())) == 5 and chain(g)[0] != chain(g[1:])[0]
