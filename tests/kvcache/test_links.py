"""kvsim/kvcache/links.py: a link serves transfers first come first served at full bandwidth (hand-timed),
and a tier load arrives when its slowest path has."""

from __future__ import annotations

import pytest

from kvsim.kvcache.links import Link, TierLinks


def test_fcfs_transfers_by_hand():
    link = Link("h2d", bandwidth=10.0, latency=1.0)
    assert link.transfer(0.0, 100) == 11.0      # 1 + 100 / 10
    assert link.transfer(5.0, 50) == 17.0       # waits for the first: 11 + 1 + 5
    assert link.transfer(20.0, 10) == 22.0      # idle again: 20 + 1 + 1
    assert (link.bytes, link.busy_s, link.transfers) == (160, 19.0, 3)
    assert link.transfer(30.0, 0) == 30.0 and link.transfers == 3
    with pytest.raises(ValueError):
        Link("x", 0.0)


def test_tier_loads_take_their_slowest_path():
    links = TierLinks(64.0, [("cpu", 64.0, 0.0), ("ssd", 32.0, 0.0)], bytes_per_token=2.0, shards=2)
    # gpu tokens need no load; 32 cpu tokens x 2 B = 64 B over the 64 B/s host link: 1 s
    assert links.load(0.0, (("gpu", 16), ("cpu", 32))) == 1.0
    # 16 ssd tokens: 32 B per GPU over the host link (after the cpu load: 1 + 0.5), 2 x 32 B over NVMe: 2 s
    assert links.load(0.0, (("ssd", 16),)) == 2.0
    assert [lk.name for lk in links.links()] == ["h2d", "ssd"]


def test_a_cpu_tiers_bandwidth_and_latency_are_the_host_links():
    # the cpu tier names 16 B/s and 0.5 s: the host link every load crosses takes them (the profile's 64 is
    # the default the deployment passes when the tier sets none)
    links = TierLinks(64.0, [("cpu", 16.0, 0.5), ("ssd", 32.0, 0.0)], bytes_per_token=2.0)
    assert links.load(0.0, (("cpu", 8),)) == 0.5 + 16 / 16.0
    assert links.paths["ssd"][1] is links.h2d and links.h2d.bandwidth == 16.0
    assert TierLinks(64.0, [("ssd", 32.0, 0.0)], bytes_per_token=2.0).h2d.bandwidth == 64.0
