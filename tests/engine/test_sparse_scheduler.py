"""The scheduler with token-level sparsity sizing (SparseSizing) on hand-built requests: compression,
footprint, decode reads, re-reads, recalls."""

from __future__ import annotations

import pytest

from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.sparse_columns import TIMELINE_COLUMNS
from kvsim.engine.sparse_sizing import SparseSizing
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.sparsity.attention import AttentionModel
from kvsim.kvcache.sparsity.config import AttentionConfig, SparsityConfig
from kvsim.kvcache.sparsity.keep import Keep
from kvsim.kvcache.sparsity.paging import block_mode_blocks, hole_slots
from kvsim.workload.request import Request

TOK = 10.0    # KV bytes per token
HOST = 100.0  # host link bytes per second


def make(policy="streaming", budget=32, reclaim="compact", heavy_fraction=0.05, blocks=64,
         mode="recompute"):
    kv = PagedKVManager(blocks, 16, swap_capacity_blocks=64 if mode == "swap" else 0)
    lim = SchedulerLimits(8, 512, True, mode, 0, bytes_per_block=16 * TOK)
    cfg = SparsityConfig(policy=policy, budget_tokens=budget, reclaim=reclaim,
                         attention=AttentionConfig(heavy_fraction=heavy_fraction))
    return Scheduler(lim, kv, SparseSizing(cfg, kv.block_size, TOK, HOST))


def group(rid, prompt, output, segments=(), rereads=()):
    r = Request(rid, 0.0, prompt, output, segments=segments, rereads=rereads)
    return Group(req=r, order=rid, seqs=[rid], output=output, prompt=prompt)


def timeline_values(s) -> dict:
    """The sparsity timeline columns of the iteration just scheduled, by name."""
    return dict(zip(TIMELINE_COLUMNS, s.sizing.timeline_values(), strict=True))


def run(s, g):
    s.add(g)
    batches = []
    t = 0.0
    while s.has_work():
        b = s.schedule(t)
        s.kv.check_invariants()
        assert 0 <= s.token_states() <= s.kv.used_blocks * 16
        batches.append(b)
        t += 1.0
        s.complete(t)
    return batches


def test_streaming_compresses_after_prefill():
    s = make()
    g = group(0, prompt=100, output=20)
    s.add(g)
    b0 = s.schedule(0.0)
    assert b0.prefill_tokens == 100 and s.kv.used_blocks == 7
    s.complete(1.0)
    assert s.kv.used_blocks == 2  # compressed to ceil(32 / 16) blocks
    b1 = s.schedule(1.0)
    assert (b1.decode_context_tokens, b1.decode_blocks) == (32, 2)
    # compaction: the 5 vacated blocks held 5 * 16 * 32 / 100 = 25.6 retained tokens, copied once
    assert b1.kv_copy_bytes == pytest.approx(25.6 * TOK)
    assert s.token_states() == 32
    cols = timeline_values(s)
    assert cols["kv_full_tokens"] == 101 and cols["kv_full_blocks"] == 7
    s.complete(2.0)
    rest = run(s, group(1, 1, 1))  # drain
    assert all(b.decode_context_tokens <= 32 for b in rest)
    row = dict(zip(("steps", "full", "kept", "frac"), s.sizing.stats[0].row()[:4], strict=True))
    frac = pytest.approx(32 * 19 / sum(range(101, 120)))
    assert row == {"steps": 19, "full": 119, "kept": 32, "frac": frac}
    assert s.kv.used_blocks == 0


def test_footprint_grows_until_the_budget():
    s = make(budget=32)
    batches = run(s, group(0, prompt=10, output=40))
    ctx = [b.decode_context_tokens for b in batches[1:]]
    assert ctx == [*range(11, 33), *([32] * 17)]
    assert [b.decode_blocks for b in batches[1:]][:8] == [1, 1, 1, 1, 1, 1, 2, 2]  # L = 17 takes block 2


def reread_case(policy):
    """prompt 100 = segment 1 (positions 0..49) + segment 2; one re-read of segment 1; 10 decode steps
    -> it fires at decode step ceil(1 * 10 / 2) = 5, context 105. Budget 32: sinks 4, window 16,
    12 outside; heavy_fraction 1 makes all 12 spread over the 85 outside positions [4, 89)."""
    s = make(policy=policy, budget=32, heavy_fraction=1.0)
    g = group(0, 100, 11, segments=((1, 50), (2, 50)), rereads=(1,))
    batches = run(s, g)
    kept = 4 + 46 * 12 / 85
    return s, batches, kept, 50 - kept


def test_h2o_reread_loses_evicted_kv():
    s, batches, kept, missing = reread_case("h2o")
    rs = s.sizing.stats[0]
    assert rs.rereads == [(5, 0, 50)] and rs.fired == 1 and rs.reread_tokens == 50
    assert rs.lost_tokens == pytest.approx(missing) and rs.recalled_tokens == 0
    assert all(b.recall_bytes == 0 and b.offload_bytes == 0 for b in batches)
    model = AttentionModel(AttentionConfig(heavy_fraction=1.0))
    base = model.mean_kept_mass(101, [Keep(4, 16, 12)] * 4)  # refreshed every 32 steps: step 1's value
    during = model.reread_step_mass(base, kept / 50)          # steps 5..10 (span 32 outlasts them)
    assert rs.mass_sum / rs.decode_steps == pytest.approx((4 * base + 6 * during) / 10)


def test_infinigen_recalls_offloaded_kv_over_the_host_link():
    s, batches, kept, missing = reread_case("infinigen")
    rs = s.sizing.stats[0]
    assert rs.lost_tokens == 0 and rs.recalled_tokens == pytest.approx(missing)
    assert rs.recall_bytes == pytest.approx(missing * TOK)
    assert rs.stall_s == pytest.approx(missing * TOK / HOST)
    recalls = [b.recall_bytes for b in batches]
    assert recalls[5] == pytest.approx(missing * TOK) and sum(recalls) == pytest.approx(missing * TOK)
    # offload writes: 68 tokens when prefill is compressed, then one per decode step
    assert batches[1].offload_bytes == pytest.approx(69 * TOK)
    assert [b.offload_bytes for b in batches[2:]] == [TOK] * 9
    assert s.sizing.host_tokens == 0 and s.sizing.host_tokens_max == 68 + 10
    model = AttentionModel(AttentionConfig(heavy_fraction=1.0))
    base = model.mean_kept_mass(101, [Keep(4, 16, 12)] * 4)
    during = model.reread_step_mass(base, 1)  # recalled: the whole segment is available
    assert rs.mass_sum / rs.decode_steps == pytest.approx((4 * base + 6 * during) / 10)


def test_block_reclaim_keeps_blocks_with_heavy_hitters():
    s = make(policy="h2o", budget=32, reclaim="block", blocks=64)
    g = group(0, prompt=400, output=3)
    s.add(g)
    s.schedule(0.0)
    s.complete(1.0)
    b = s.schedule(1.0)
    keep = Keep(4, 16, 12)
    want = block_mode_blocks(keep, 401, 4, 16, 0.05)
    assert b.decode_blocks == want == s.kv.used_blocks
    assert timeline_values(s)["kv_hole_slots"] == hole_slots(want, 32, 401, 16) > 0
    assert b.kv_copy_bytes == 0  # block reclaim never copies
    s.complete(2.0)


def test_shrink_waits_while_blocks_are_shared_and_the_pool_is_full():
    s = make(policy="h2o", budget=32, blocks=12)
    kv = s.kv
    g = group(0, prompt=160, output=50)
    kv.allocate(0, 160)
    kv.fork(0, 99)      # another holder (as a prefix-cache sharer would) keeps all 10 blocks alive
    kv.allocate(98, 32)  # and the last 2 free blocks are taken
    g.seq_blocks = s.dec_blocks = 10
    assert kv.num_free_blocks == 0 and kv.private_blocks(0) == 0
    # needs 2 fresh blocks and would release none: impossible without preempting
    assert not s._resize(g, 2, may_preempt=False)
    assert kv.num_blocks_of(0) == 10 and g.seq_blocks == s.dec_blocks == 10
    kv.free(99)                        # now its 10 blocks are private
    assert kv.private_blocks(0) == 10
    assert s._resize(g, 2, may_preempt=False)
    assert kv.num_blocks_of(0) == 2 and g.seq_blocks == s.dec_blocks == 2 and kv.num_free_blocks == 8
    kv.check_invariants()


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_held_offset_follows_preemptions(mode):
    """A group's growth preempts another inside the sizing's own call (before_decode), and a swapped-in
    group is resized at once: the scheduler's held offset stays the sum of what each decoding group holds
    below its context, and the decode reads are the kept tokens. B (prompt 10) and C (48) are admitted
    before A (96): the 10-block pool is full; A is compressed to the 64-token budget (4 blocks, 2 left
    free), C's fourth block and B's second take them, and B's third (at 33 tokens) preempts A, which by
    then holds 64 of its 119 tokens."""
    s = make(policy="h2o", budget=64, blocks=10, mode=mode)
    b_group, a_group = group(0, prompt=10, output=60), group(2, prompt=96, output=60)
    s.add(b_group)
    s.add(group(1, prompt=48, output=40))
    s.add(a_group)
    t = 0.0
    offsets = []
    while s.has_work():
        b = s.schedule(t)
        states = s.sizing.states
        assert s.dec_held_offset == sum(st.offset for st in states.values())
        assert b.decode_context_tokens == sum(g.n * int(st.resident + 0.5) for g, st in states.items())
        assert s.token_states() == b.decode_context_tokens + s.prefill_tokens_held
        assert s.dec_blocks == sum(g.seq_blocks for g in states)
        s.kv.check_invariants()
        offsets.append(s.dec_held_offset)
        t += 1.0
        s.complete(t)
    assert a_group.preemptions >= 1 and min(offsets) < 0 and s.kv.used_blocks == 0
    assert s.dec_held_offset == 0 and not s.sizing.states
