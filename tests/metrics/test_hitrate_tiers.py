"""Hit rates of a chain of KV tiers (GPU, CPU, SSD, ...) from stack distances: a hand-computed stream,
and equality with explicit replays of exclusive and inclusive chains."""

import pytest

from kvsim.metrics.hitrate import stack_distances, tier_bounds, tier_hits, tier_replay_hits
from kvsim.workload.request import Request

from .test_hitrate import streams

# Block size 4; each request is 5 prompt tokens of one content and 1 output token, so it touches one
# block (its content's block 0) and looks it up. The block stream A A B A C D B E A C has the stack
# distances (1 + distinct blocks since the last touch), by hand:
#   t2 A: 1 (nothing since t1)   t4 A: 2 (B)   t7 B: 4 (A, C, D)   t9 A: 5 (C, D, B, E)
#   t10 C: 5 (D, B, E, A); the other five lookups are cold.
STREAM = "AABACDBEAC"


def hand_requests():
    return [Request(rid=i, arrival_s=float(i), prompt_len=5, output_len=1, segments=((ord(c), 5),))
            for i, c in enumerate(STREAM)]


def hand_data():
    return stack_distances(hand_requests(), 4)


def test_hand_stream_distances():
    assert hand_data().distances.tolist() == [1, 2, 4, 5, 5]


@pytest.mark.parametrize(("caps", "placement", "bounds", "hits"), [
    # exclusive: tier k serves (C1+..+C_{k-1}, C1+..+C_k]
    ([1, 2, 2], "exclusive", [(0, 1), (1, 3), (3, 5)], [1, 1, 3]),
    ([2, 2], "exclusive", [(0, 2), (2, 4)], [2, 1]),
    ([1, 0, 4], "exclusive", [(0, 1), (1, 1), (1, 5)], [1, 0, 4]),   # an empty tier passes blocks on
    ([4, 1], "exclusive", [(0, 4), (4, 5)], [3, 2]),
    # inclusive: tier k serves (max(C1..C_{k-1}), C_k]
    ([1, 2, 4], "inclusive", [(0, 1), (1, 2), (2, 4)], [1, 1, 1]),
    ([2, 5], "inclusive", [(0, 2), (2, 5)], [2, 3]),
    ([3, 2], "inclusive", [(0, 3), (3, 3)], [2, 0]),                 # a smaller lower tier serves nothing
    ([1, 0, 4], "inclusive", [(0, 1), (1, 1), (1, 4)], [1, 0, 2]),
])
def test_hand_stream_tier_hits(caps, placement, bounds, hits):
    d = hand_data()
    assert tier_bounds(caps, placement) == bounds
    assert tier_hits(d, caps, placement) == hits
    assert tier_replay_hits(hand_requests(), 4, caps, placement) == hits


def test_exclusive_chain_total_is_one_cache_of_the_summed_capacity():
    d = hand_data()
    for c1 in range(0, 7):
        for c2 in range(0, 7):
            per_tier = tier_hits(d, [c1, c2], "exclusive")
            assert sum(per_tier) == d.hits(c1 + c2)
            assert sum(tier_hits(d, [c1, c2], "inclusive")) == d.hits(max(c1, c2))


@pytest.mark.parametrize("name", ["chat", "agentic", "rag", "mooncake"])
def test_tier_hits_equal_explicit_chain_replays(name):
    reqs = streams()[name]
    d = stack_distances(reqs, 16)
    for caps in ([7, 30, 200], [64, 0, 3000], [500, 100]):
        ex = tier_hits(d, caps, "exclusive")
        assert ex == tier_replay_hits(reqs, 16, caps, "exclusive")
        assert sum(ex) == d.hits(sum(caps))
        inc = tier_hits(d, caps, "inclusive")
        assert inc == tier_replay_hits(reqs, 16, caps, "inclusive")
        assert sum(inc) == d.hits(max(caps))
    assert sum(tier_hits(d, [7, 30, 200], "exclusive")) > 0


def test_unknown_placement():
    with pytest.raises(ValueError, match="placement"):
        tier_bounds([1], "mirrored")
