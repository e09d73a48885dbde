"""kvsim/engine/sparse_steady.py: stepping only the groups due (steady groups accounted in bulk) gives the
scheduler and every request the same figures, iteration by iteration, as stepping every group every
iteration (hypothesis: random groups, budgets, re-reads, a pool small enough to preempt, both modes)."""

from __future__ import annotations

from dataclasses import astuple

from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.sparse_sizing import SparseSizing
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.sparsity.config import AttentionConfig, SparsityConfig
from kvsim.workload.request import Request

TOK = 10.0


def _scheduler(policy: str, budget: int, blocks: int, mode: str, steady: bool) -> Scheduler:
    kv = PagedKVManager(blocks, 16, swap_capacity_blocks=64 if mode == "swap" else 0)
    lim = SchedulerLimits(8, 512, True, mode, 0, bytes_per_block=16 * TOK)
    cfg = SparsityConfig(policy=policy, budget_tokens=budget, reclaim="compact",
                         attention=AttentionConfig(heavy_fraction=0.05))
    sizing = SparseSizing(cfg, kv.block_size, TOK, 100.0)
    if not steady:
        sizing.steady = None
    return Scheduler(lim, kv, sizing)


def _figures(s: Scheduler, sync: bool) -> tuple:
    sz = s.sizing
    if not sync:  # (what the scheduler and the recorder read each iteration)
        return s.dec_held_offset, s.dec_blocks, s.kv.used_blocks, sz.full_blocks_sum, sz.timeline_values()
    sz.sync()
    states = [(g.req.rid, astuple(st.rs), st.length, st.resident, st.blocks, st.full_blocks, st.offset)
              for g, st in sz.states.items()]
    stats = sorted((rid, astuple(rs)) for rid, rs in sz.stats.items())
    return (s.dec_held_offset, s.dec_blocks, s.kv.used_blocks, sz.full_blocks_sum, sz.timeline_values(),
            states, stats)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 120), st.integers(1, 90), st.integers(0, 2)), min_size=1,
                max_size=6),
       st.sampled_from(["h2o", "streaming", "scissorhands", "snapkv"]), st.integers(16, 70),
       st.integers(6, 40), st.sampled_from(["recompute", "swap"]))
def test_steady_stepping_matches_stepping_every_group(reqs, policy, budget, blocks, mode):
    blocks = max(blocks, -(-max(p + o for p, o, _ in reqs) // 16) + 2)  # the longest request fits alone
    runs = []
    for steady in (True, False):
        s = _scheduler(policy, budget, blocks, mode, steady)
        for rid, (prompt, output, rereads) in enumerate(reqs):
            segs = ((rid % 2, prompt),)
            r = Request(rid, 0.0, prompt, output, segments=segs, rereads=(rid % 2,) * rereads)
            s.add(Group(req=r, order=rid, seqs=[rid], output=output, prompt=prompt))
        seen = []
        t = 0.0
        while s.has_work() and t < 400:
            s.schedule(t)
            seen.append(_figures(s, sync=t % 23 == 22))  # (a sync accounts the steady steps so far)
            t += 1.0
            s.complete(t)
        seen.append(_figures(s, sync=True))
        runs.append(seen)
    assert runs[0] == runs[1]
