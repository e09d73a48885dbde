"""The scheduler with token-level sparsity sizing (SparseSizing) on hand-built requests: compression,
footprint, decode reads, re-reads, recalls."""

from __future__ import annotations

import pytest

from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.sparse_columns import TIMELINE_COLUMNS
from kvsim.engine.sparse_sizing import SparseSizing
from kvsim.errors import KvsimError
from kvsim.kvcache.paged import PagedKVManager
from kvsim.kvcache.sparsity.attention import AttentionModel
from kvsim.kvcache.sparsity.config import AttentionConfig, SparsityConfig
from kvsim.kvcache.sparsity.keep import Keep
from kvsim.kvcache.sparsity.paging import block_mode_blocks, hole_slots
from kvsim.workload.request import Request

TOK = 10.0    # KV bytes per token
HOST = 100.0  # host link bytes per second


def make(policy="streaming", budget=32, reclaim="compact", heavy_fraction=0.05, blocks=64,
         mode="recompute", num_layers=None, **sparsity):
    kv = PagedKVManager(blocks, 16, swap_capacity_blocks=64 if mode == "swap" else 0)
    lim = SchedulerLimits(8, 512, True, mode, 0, bytes_per_block=16 * TOK)
    cfg = SparsityConfig(policy=policy, budget_tokens=budget, reclaim=reclaim,
                         attention=AttentionConfig(heavy_fraction=heavy_fraction), **sparsity)
    return Scheduler(lim, kv, SparseSizing(cfg, kv.block_size, TOK, HOST, num_layers=num_layers))


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


def reread_case(policy, **sparsity):
    """prompt 100 = segment 1 (positions 0..49) + segment 2; one re-read of segment 1; 10 decode steps
    -> it fires at decode step ceil(1 * 10 / 2) = 5, context 105. Budget 32: sinks 4, window 16,
    12 outside; heavy_fraction 1 makes all 12 spread over the 85 outside positions [4, 89)."""
    s = make(policy=policy, budget=32, heavy_fraction=1.0, **sparsity)
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


def test_infinigen_prefetches_its_selection_every_step_and_recalls_rereads():
    """The sinks and the 16-token window stay on the GPU; the rest lives in host memory: 100 - 16 - 4 = 80
    positions written when prefill ends, one more per decode step. Every decode step prefetches the 12
    selected (outside) entries, Batch.prefetch_bytes = 12 x KV bytes per token; the re-read at step 5
    recalls the segment's missing tokens, Batch.recall_bytes (serial)."""
    s, batches, kept, missing = reread_case("infinigen")
    rs = s.sizing.stats[0]
    step = 12 * TOK  # prefetch per decode step
    assert rs.lost_tokens == 0 and rs.recalled_tokens == pytest.approx(missing)
    assert rs.prefetch_bytes == pytest.approx(10 * step)
    assert rs.recall_bytes == pytest.approx(missing * TOK + 10 * step)
    assert rs.stall_s == pytest.approx(rs.recall_bytes / HOST)
    assert [b.prefetch_bytes for b in batches] == [0.0] + [step] * 10
    recalls = [b.recall_bytes for b in batches]
    assert recalls[5] == pytest.approx(missing * TOK) and recalls[:5] + recalls[6:] == [0.0] * 10
    assert timeline_values(s)["prefetch_bytes"] == step and timeline_values(s)["recall_bytes"] == step
    assert batches[1].offload_bytes == pytest.approx((80 + 1) * TOK)
    assert [b.offload_bytes for b in batches[2:]] == [TOK] * 9
    assert s.sizing.host_tokens == 0 and s.sizing.host_tokens_max == 80 + 10
    assert s.sizing.totals["prefetch_tokens"] == 120
    model = AttentionModel(AttentionConfig(heavy_fraction=1.0))
    base = model.mean_kept_mass(101, [Keep(4, 16, 12)] * 4)
    during = model.reread_step_mass(base, 1)  # recalled: the whole segment is available
    assert rs.mass_sum / rs.decode_steps == pytest.approx((4 * base + 6 * during) / 10)


@pytest.mark.parametrize("reclaim, blocks", [("compact", 2), ("block", 3)])
def test_infinigen_gpu_holds_sinks_window_and_a_double_buffer(reclaim, blocks):
    """8 layers, prefetch_layers 2: the GPU pool holds 4 sinks + 16 window + 12 x 2 / 8 = 3 staged
    entries = 23 tokens: compact ceil(23 / 16) = 2 blocks; block mode the 2 blocks touching the window
    (context 100 or 101) plus ceil((4 + 3) / 16) = 1 for the packed sinks and buffer. Attention still reads
    4 + 16 + 12 = 32 tokens a step (the 9 not held are read as they arrive) and 12 are prefetched."""
    s = make(policy="infinigen", budget=32, heavy_fraction=1.0, reclaim=reclaim, num_layers=8,
             prefetch_layers=2)
    g = group(0, 100, 11)
    s.add(g)
    s.schedule(0.0)
    s.complete(1.0)
    assert s.kv.used_blocks == blocks  # compressed to the same charge when prefill ends (context 100)
    b = s.schedule(1.0)
    assert s.token_states() == 23 and s.kv.used_blocks == blocks
    assert b.decode_context_tokens == 32 and b.prefetch_bytes == 12 * TOK
    assert s.sizing.stats[0].kept_sum == 32  # the read (decode_kv_read_fraction) counts what is attended
    s.complete(2.0)
    batches = run(s, group(1, 1, 1))
    assert all(x.decode_context_tokens <= 32 for x in batches) and s.kv.used_blocks == 0


def test_infinigen_prefetch_layers_cannot_exceed_the_layers():
    cfg = SparsityConfig(policy="infinigen", prefetch_layers=9)
    with pytest.raises(KvsimError, match=r"^kv\.sparsity\.prefetch_layers must be at most the model's 8 "):
        SparseSizing(cfg, 16, TOK, HOST, num_layers=8)
    assert SparseSizing(cfg, 16, TOK, HOST, num_layers=9).share == 1.0


def test_infinigen_full_host_pool_evicts_unselected_entries_for_good():
    """A host pool of 80 tokens: 81 entries after step 1 -> 1 never-selected one evicted, then one per
    step (the pool stays at 80). At the re-read (step 5) 4 of the 85 - 12 = 73 unselected positions are
    gone, so that share of the segment's missing tokens is lost instead of recalled."""
    s, batches, kept, missing = reread_case("infinigen", host_pool_bytes=80 * TOK)
    rs = s.sizing.stats[0]
    lost = missing * 4 / 73
    assert rs.lost_tokens == pytest.approx(lost)
    assert rs.recalled_tokens == pytest.approx(missing - lost)
    assert rs.host_evicted == pytest.approx(1 + 9)  # steps 1..10: 1 each
    assert s.sizing.totals["evicted_tokens"] == pytest.approx(10)
    assert s.sizing.host_tokens_max == pytest.approx(80)  # measured as each iteration closes
    assert rs.prefetch_bytes == pytest.approx(10 * 12 * TOK)  # the selected entries are all still there
    model = AttentionModel(AttentionConfig(heavy_fraction=1.0))
    base = model.mean_kept_mass(101, [Keep(4, 16, 12)] * 4)
    during = model.reread_step_mass(base, (50 - lost) / 50)
    assert rs.mass_sum / rs.decode_steps == pytest.approx((4 * base + 6 * during) / 10)


def test_infinigen_pool_smaller_than_the_selection_loses_selected_entries():
    """A 10-token pool cannot even hold the 12 selected entries: all unselected ones go, then selected
    ones; those are no longer prefetched, and the GPU set (and its attention mass) shrinks."""
    s, batches, kept, missing = reread_case("infinigen", host_pool_bytes=10 * TOK)
    rs = s.sizing.stats[0]
    st_prefetch = [b.prefetch_bytes for b in batches[6:]]
    assert all(b == pytest.approx(10 * TOK) for b in st_prefetch)  # 12 - 2 lost selected entries
    # step 1: 81 entries, the 69 unselected and 2 selected evicted; the re-read (step 5) finds 10 of 12
    # outside tokens on the GPU and 72 of the 73 unselected positions gone (the newest was just written)
    missing = 50 - (4 + 46 * 10 / 85)
    assert rs.lost_tokens == pytest.approx(missing * 72 / 73)
    assert batches[-1].decode_context_tokens == 32 - 2


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
        s.sizing.sync()  # (steady groups are accounted when due: kvsim/engine/sparse_steady.py)
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
