"""Block content keys from segments: page keys, chained keys, Mooncake hash ids on any block size."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache import hashing
from kvsim.kvcache.hashing import (
    OUTPUT_ID_BASE,
    PAD_ID_BASE,
    UNBOUNDED,
    UNIQUE_ID_BASE,
    BlockContent,
    block_keys,
    namespace_key,
    page_keys,
    request_content,
)
from kvsim.workload.config import TraceConfig, WorkloadConfig
from kvsim.workload.request import Request
from kvsim.workload.trace import trace_requests

EXCERPT = Path(__file__).parents[1] / "data" / "mooncake_conv_head50.jsonl"


def test_page_keys_inside_and_across_segments():
    segs = ((7, 6), (9, 5))  # block 0 = 7[0:4], block 1 = 7[4:6] + 9[0:2], block 2 = 9[2:5] partial
    assert page_keys(segs, 11, 4) == [(7, 0), ((7, 4, 2), (9, 0, 2))]
    assert page_keys(segs, 7, 4) == [(7, 0)]  # only full blocks among the first 7 tokens


def test_page_keys_do_not_depend_on_how_a_run_ends():
    # the same first 8 tokens of content 5, whether the segment is 8 or 20 long
    assert page_keys(((5, 8),), 8, 4) == page_keys(((5, 20),), 8, 4) == [(5, 0), (5, 4)]


def test_chained_keys_share_exactly_the_common_prefix():
    a = block_keys(((1, 8), (2, 8)), 16, 4)
    b = block_keys(((1, 8), (3, 8)), 16, 4)
    c = block_keys(((3, 8), (2, 8)), 16, 4)
    assert a[:2] == b[:2] and a[2] != b[2] and a[3] != b[3]
    assert a[2] != c[2] and a[3] != c[3]  # same content later, different prefix: no match
    assert len(set(a)) == 4


def test_namespace_separates_keys():
    segs = ((1, 8),)
    assert block_keys(segs, 8, 4, "tenant-a") != block_keys(segs, 8, 4, "tenant-b")
    assert block_keys(segs, 8, 4, "tenant-a") == block_keys(segs, 8, 4, "tenant-a")


def test_lazy_extension_matches_one_shot():
    segs = ((1, 10), (2, 3), (3, 30))
    lazy = BlockContent(segs, 4)
    lazy.upto(2)
    lazy.upto(5)
    assert lazy.upto(10)[:10] == block_keys(segs, 43, 4)[:10]


def test_request_content():
    r = Request(rid=3, arrival_s=0.0, prompt_len=10, output_len=5)
    assert request_content(r) == ((UNIQUE_ID_BASE + 3, 10), (OUTPUT_ID_BASE + 3, UNBOUNDED))
    r = Request(rid=4, arrival_s=0.0, prompt_len=10, output_len=5, segments=((1, 6),), output_id=77)
    assert request_content(r) == ((1, 6), (PAD_ID_BASE + 4, 4), (77, UNBOUNDED))


@pytest.mark.parametrize("bs", [1, 16, 32, 48, 100, 512, 1024])
def test_mooncake_hash_ids_map_onto_any_block_size(bs):
    """Blocks inside the shared hash blocks hash alike across requests; from the first differing hash
    block on, every block differs (requests 0 and 1 share hash id 0 only)."""
    cfg = WorkloadConfig(kind="trace", trace=TraceConfig(path=str(EXCERPT), format="mooncake"))
    r0, r1 = trace_requests(cfg, np.random.default_rng(0), 2, None)[:2]
    assert r0.segments[0] == r1.segments[0] and r0.segments[1] != r1.segments[1]
    k0 = BlockContent(request_content(r0), bs).upto(6000 // bs)[: 6000 // bs]
    k1 = BlockContent(request_content(r1), bs).upto(6000 // bs)[: 6000 // bs]
    shared = 512 // bs  # blocks lying wholly inside hash block 0
    assert k0[:shared] == k1[:shared]
    assert all(x != y for x, y in zip(k0[shared:], k1[shared:], strict=True))


def test_mooncake_same_hash_ids_same_keys_for_every_block():
    # two requests with equal hash ids 0..2 and different 4th ids: the first 3 * 512 tokens match
    segs_a = ((100, 512), (101, 512), (102, 512), (103, 200))
    segs_b = ((100, 512), (101, 512), (102, 512), (104, 300))
    for bs in (16, 48, 512):
        n = 1536 // bs
        assert block_keys(segs_a, 1536, bs) == block_keys(segs_b, 1536, bs)
        assert block_keys(segs_a, 1712, bs)[n:] != block_keys(segs_b, 1712, bs)[n:] or 1712 // bs == n


def test_a_shared_memo_keeps_several_requests():
    from kvsim.kvcache.hashing import ContentMemo
    from kvsim.workload.request import Request
    memo = ContentMemo(16, chained=True, size=2)
    a, b, c = (Request(i, 0.0, 64, 4, segments=((7, 64),)) for i in range(3))
    ca = memo.get(a)
    assert memo.get(b) is not ca and memo.get(a) is ca  # a kept while b was looked up
    memo.get(c)  # evicts b (a was used more recently)
    assert memo.get(a) is ca
    assert list(ca.upto(4)) == list(ContentMemo(16, chained=True).get(a).upto(4))


SEGS = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 9)), max_size=5)


@settings(max_examples=300, deadline=None)
@given(SEGS, SEGS, SEGS, st.integers(1, 5), st.booleans(), st.integers(0, 12), st.integers(0, 30))
def test_a_resumed_content_has_the_keys_of_a_fresh_one(common, a, b, bs, chained, known, n):
    """Contents whose segments share a start (then go their own ways, a segment of the same id possibly
    shorter or longer): the second resumed from the first's known keys computes what it would alone."""
    prev = BlockContent(tuple(common + a), bs, chained, "ns")
    prev.upto(known)
    fresh = BlockContent(tuple(common + b), bs, chained, "ns").upto(n)
    resumed = BlockContent(tuple(common + b), bs, chained, "ns")
    resumed.resume(prev, [7] * len(prev.out))
    assert len(resumed.out) <= len(prev.out) and (resumed.hint is None) == (not resumed.out)
    assert resumed.upto(n)[:n] == fresh[:n] and len(resumed.out) >= min(n, len(fresh))


def test_a_follow_up_starts_from_the_keys_its_turn_kept():
    from kvsim.kvcache.hashing import ContentMemo
    memo = ContentMemo(4, chained=True)
    turn0 = Request(0, 0.0, 10, 6, segments=((5, 10),), output_id=50)
    c0 = memo.get(turn0)
    c0.upto(3)
    memo.keep(0, c0, [9, 8, 7])
    turn1 = Request(1, 0.0, 19, 2, segments=((5, 10), (50, 6), (6, 3)), after=0, output_id=51)
    c1 = memo.get(turn1)
    assert c1.out == c0.out[:3] and c1.out[0] is c0.out[0] and c1.hint == [9, 8, 7]
    assert c1.upto(5) == BlockContent(request_content(turn1), 4).upto(5)
    assert memo.get(Request(2, 0.0, 19, 2, segments=((5, 10),), after=0)).hint is None  # taken once


def test_a_follow_up_whose_turn_nobody_holds_has_the_keys_of_a_fresh_content():
    """(compiled, the follow-up takes the key list of a kept content nothing else holds instead of a copy)"""
    from kvsim.kvcache.hashing import ContentMemo
    memo = ContentMemo(4, chained=True)
    turn0 = Request(0, 0.0, 10, 6, segments=((5, 10),), output_id=50)
    c0 = memo.get(turn0)
    c0.upto(4)
    memo.keep(0, c0, [9, 8, 7, 6])
    memo.get(Request(7, 0.0, 8, 1))  # (the memo's last content another one)
    del c0
    turn1 = Request(1, 0.0, 19, 2, segments=((5, 10), (50, 6), (6, 3)), after=0, output_id=51)
    c1 = memo.get(turn1)
    assert c1.hint == [9, 8, 7, 6] and len(c1.out) == 4
    assert c1.upto(6) == BlockContent(request_content(turn1), 4).upto(6)


def test_a_kept_table_is_the_hint_of_its_request_admitted_again():
    from kvsim.kvcache.hashing import ContentMemo
    memo = ContentMemo(4, chained=True)
    turn = Request(0, 0.0, 10, 6, segments=((5, 10),))
    c = memo.get(turn)
    memo.keep(0, c, [3, 1])
    assert memo.get(turn) is c and c.hint == [3, 1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, OUTPUT_ID_BASE * 4), st.integers(1, 200)), min_size=1, max_size=6),
       st.sampled_from([1, 4, 16]), st.one_of(st.text(max_size=4), st.integers(-(1 << 70), 1 << 70)))
def test_chained_keys_are_the_hash_of_the_previous_key_and_the_page(segs, bs, namespace):
    # (compiled, upto hashes whole blocks with pair_hash instead of building the tuples: the same keys)
    n = sum(length for _, length in segs)
    last = namespace_key(namespace)
    expected = []
    for page in page_keys(tuple(segs), n, bs):
        last = hash((last, page))
        expected.append(last)
    assert block_keys(tuple(segs), n, bs, namespace) == expected


def test_keys_are_plain_ints_of_their_values():
    # (compiled, the keys of at least 2**60 in absolute value are built from their digits directly)
    keys = block_keys(((3, 4096), (UNIQUE_ID_BASE + 5, 333)), 4429, 16, "k")
    assert len(keys) == 4429 // 16 and any(k < -(1 << 60) for k in keys) and any(k > 1 << 60 for k in keys)
    for k in keys:
        assert type(k) is int and int(repr(k)) == k and hash(k) == hash(int(repr(k))) and 0 - k == -k


def test_pair_hash_agrees_with_the_interpreters_hashes():
    assert hashing._pair_hash_agrees()
    if hasattr(hashing, "pair_hash"):  # (as Python; compiled, both are C functions)
        for a, b in ((0, 0), (-1, 5), (-(1 << 63), (1 << 63) - 1), (hash("x"), 17)):
            assert hashing.pair_hash(hash(a), hash(b)) == hash((a, b))
        for r in (0, -1, -2, (1 << 61) - 1, -(1 << 61) + 1, -(1 << 63), (1 << 63) - 1):
            assert hashing.int_hash(r) == hash(r)
