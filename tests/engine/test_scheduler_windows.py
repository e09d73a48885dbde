"""The scheduler's windowed context sums (kvsim/engine/window_sums.py WindowSums: join / leave /
cross / batch_figures, and Scheduler.context_sums) against brute force, iteration by iteration.

Pinned, for the window caps of SchedulerLimits.windows (here 5 and 12, block size 4):
- Batch.decode_window_tokens[i] = sum over decoding sequences of min(context, cap_i), where a decoding
  sequence's context counts the token it feeds (prompt + 1 at its first decode step);
- Batch.prefill_window_pairs[i] = sum over prefill chunks (c new tokens after p) of
  sum_{q = p+1}^{p+c} min(q, cap_i + 1) (kvsim/cost/batch.py);
- ContextSums.windowed[i] = the decode sum plus, per prefilling request, min(computed + chunk, cap_i);
through hand-traced runs, chunked prefill, recompute and swap preemption and swap-in, n > 1 (parallel
sampling) groups, the KV coordinator as well as the paged manager, and a hypothesis property over random
workloads. The contexts are tracked independently of the scheduler (`Tracker`), from the chunks it
schedules and the preemptions it makes. Also: Scheduler rejects a KV manager whose window caps are
non-empty and differ from limits.windows, and window caps with a decode sizing that is not by context.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.engine.group import DECODE, FINISHED, PREFILL, RUNNING, SWAPPED, Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.scheduler_policy import VLLM_V0, VLLM_V1
from kvsim.kvcache.coordinator import KVCoordinator
from kvsim.kvcache.paged import PagedKVManager
from kvsim.specs import compute
from kvsim.specs.layers import LayerGroup
from kvsim.specs.pages import plan_pages
from kvsim.workload.request import Request

CAPS = (5, 12)
BS = 4


def limits(max_seqs=8, max_tokens=64, chunked=True, mode="recompute", windows=CAPS,
           rules=VLLM_V1) -> SchedulerLimits:
    return SchedulerLimits(max_seqs, max_tokens, chunked, mode, 0, bytes_per_block=100.0, windows=windows,
                           rules=rules)


def make(num_blocks=64, max_seqs=8, max_tokens=64, chunked=True, mode="recompute", swap_blocks=0,
         windows=CAPS) -> Scheduler:
    kv = PagedKVManager(num_blocks, BS, swap_capacity_blocks=swap_blocks)
    return Scheduler(limits(max_seqs, max_tokens, chunked, mode, windows), kv)


def coordinator(num_pages=200, swap_pages=64) -> KVCoordinator:
    """Full layers plus sliding windows of 6 and 13 tokens: window caps (5, 12)."""
    groups = (LayerGroup("full", (0, 1), 2048.0), LayerGroup("sliding", (2, 3), 2048.0, window=6),
              LayerGroup("sliding", (4, 5), 2048.0, window=13))
    return KVCoordinator(plan_pages(groups, BS), num_pages, swap_pages)


_seq = [0]


def group(rid, prompt, output, n=1) -> Group:
    seqs = list(range(_seq[0], _seq[0] + n))
    _seq[0] += n
    return Group(req=Request(rid, 0.0, prompt, output, n=n), order=rid, seqs=seqs, output=output,
                 prompt=prompt, n=n)


def brute_pairs(chunks, cap) -> float:
    """Pairs of prefill chunks (start, size) within a window of cap + 1 keys, one query at a time."""
    return float(sum(min(q, cap + 1) for p, c in chunks for q in range(p + 1, p + c + 1)))


class Tracker:
    """Each group's context, tracked from outside the scheduler.

    prompt[g]: tokens its (re)prefill must compute; done[g]: prompt tokens computed so far (the chunks the
    scheduler scheduled); gen[g]: tokens generated; ctx[g]: for a decoding or swapped group, the context of
    its next decode step (the KV tokens it attends, the one it feeds included)."""

    def __init__(self, caps=CAPS) -> None:
        self.caps = caps
        self.prompt: dict[Group, int] = {}
        self.done: dict[Group, int] = {}
        self.gen: dict[Group, int] = {}
        self.ctx: dict[Group, int] = {}
        self.preemptions = self.swap_outs = self.swap_ins = 0
        self.batches = 0

    def add(self, s: Scheduler, g: Group) -> None:
        self.prompt[g] = g.req.prompt_len
        self.done[g] = 0
        self.gen[g] = 0
        s.add(g)

    def _recomputed(self, g: Group) -> None:
        """g was preempted by recompute: its prompt is redone from scratch."""
        if g in self.ctx:  # it was decoding
            del self.ctx[g]
            if g.n == 1:  # the prompt now holds what it had generated
                self.prompt[g] = g.req.prompt_len + self.gen[g]
            else:  # a multi-sample group restarts
                self.prompt[g] = g.req.prompt_len
                self.gen[g] = 0
        self.done[g] = 0

    def step(self, s: Scheduler, t: float):
        """One iteration, asserting the scheduler's windowed sums against brute force."""
        preemptions = {g: g.preemptions for g in self.prompt}
        swapped = {g for g in self.ctx if g.state == SWAPPED}
        b = s.schedule(t)
        s.kv.check_invariants()
        for g, before in preemptions.items():
            if g.preemptions == before:
                continue
            assert g.preemptions == before + 1
            self.preemptions += 1
            if g.phase == DECODE:  # swapped out (and maybe back in at once): it keeps its context
                assert g in self.ctx
                self.swap_outs += 1
                swapped.add(g)
            else:
                self._recomputed(g)
        self.swap_ins += sum(1 for g in swapped if g.state == RUNNING)
        decoding = [g for g in s.running if g.phase == DECODE]
        prefills = [g for g in s.running if g.phase == PREFILL and g.chunk]
        # vLLM V0 without chunked prefill: an iteration of prompts only; the decoding groups wait, each
        # holding the tokens before the one its next step feeds
        paused = b is not None and bool(prefills) and b.decode_seqs == 0 and bool(decoding)
        assert set(decoding) <= set(self.ctx)
        for g in decoding:  # every sequence's pages cover the tokens it holds (its next one's, if it runs)
            held = self.ctx[g] - 1 if paused else self.ctx[g]
            assert all(s.kv.capacity_tokens(q) >= held for q in g.seqs)
        for g in prefills:
            assert g.computed == self.done[g] and g.prompt == self.prompt[g]
        if b is None:
            assert not decoding and not prefills
            return None, s.complete(t + 1.0)
        self.batches += 1
        caps = self.caps
        ctx = self.ctx
        if paused:
            assert b.decode_context_tokens == 0 and b.decode_window_tokens == (0,) * len(caps)
            expected = tuple(sum(g.n * min(ctx[g] - 1, cap) for g in decoding) for cap in caps)
        else:
            assert b.decode_seqs == sum(g.n for g in decoding)
            assert b.decode_context_tokens == sum(g.n * ctx[g] for g in decoding)
            expected = tuple(sum(g.n * min(ctx[g], cap) for g in decoding) for cap in caps)
            assert b.decode_window_tokens == expected
        chunks = [(self.done[g], g.chunk) for g in prefills]
        assert b.prefill_tokens == sum(c for _, c in chunks)
        assert b.prefill_window_pairs == tuple(brute_pairs(chunks, cap) for cap in caps)
        assert b.prefill_window_pairs == tuple(
            float(sum(compute.window_pairs(p, c, cap + 1) for p, c in chunks)) for cap in caps)
        held = [self.done[g] + g.chunk for g in s.prefilling]
        assert s.context_sums().windowed == tuple(e + sum(min(h, cap) for h in held)
                                                  for e, cap in zip(expected, caps, strict=True))
        done = s.complete(t + 1.0)
        for g in () if paused else decoding:
            self.gen[g] += 1
            if g.state == FINISHED:
                del ctx[g]
                assert self.gen[g] == g.output
            else:
                ctx[g] += 1
        for g, (p, c) in zip(prefills, chunks, strict=True):
            self.done[g] = p + c
            if self.done[g] < self.prompt[g]:
                assert g.phase == PREFILL
                continue
            self.gen[g] += 1
            if self.gen[g] >= g.output:
                assert g.state == FINISHED
            else:
                assert g.phase == DECODE and g.state == RUNNING
                ctx[g] = self.done[g] + 1
        return b, done

    def run(self, s: Scheduler, t: float = 0.0, limit: int = 5000) -> list:
        batches = []
        while s.has_work():
            b, _ = self.step(s, t)
            batches.append(b)
            t += 1.0
            assert len(batches) < limit
        return batches


# ----------------------------------------------------------------- hand-traced
def test_two_requests_cross_both_caps_by_hand():
    s = make()
    tr = Tracker()
    a, b_ = group(0, prompt=3, output=12), group(1, prompt=9, output=4)
    tr.add(s, a)
    tr.add(s, b_)
    # iteration 0: both prompts in one batch. a: queries 1..3 see 1 + 2 + 3 = 6 keys (both caps);
    # b: min(q, 6) for q = 1..9 = 21 + 3 x 6 = 39 at cap 5, 45 at cap 12 -> (45, 51)
    batch, _ = tr.step(s, 0.0)
    assert batch.prefill_window_pairs == (45.0, 51.0) and batch.decode_window_tokens == (0, 0)
    # then a decodes at context 4, 5, 6, ..., 14 (iterations 1..11), b at 10, 11, 12 (iterations 1..3)
    figures = []
    for it in range(1, 12):
        batch, _ = tr.step(s, float(it))
        figures.append(batch.decode_window_tokens)
    assert figures == [
        (4 + 5, 4 + 10),    # it 1: a 4, b 10
        (5 + 5, 5 + 11),    # it 2: a reaches cap 5
        (5 + 5, 6 + 12),    # it 3: b reaches cap 12; b's last step
        (5, 7), (5, 8), (5, 9), (5, 10), (5, 11),  # it 4..8: a alone, 7..11
        (5, 12), (5, 12), (5, 12),                 # it 9..11: a at 12, 13, 14
    ]
    assert a.state == FINISHED and b_.state == FINISHED and not s.has_work()


def test_chunked_prefill_windowed_pairs_by_hand():
    s = make(max_tokens=8)
    tr = Tracker()
    g = group(0, prompt=20, output=3)
    tr.add(s, g)
    pairs, windowed = [], []
    for it in range(3):
        s_batch, _ = tr.step(s, float(it))
        pairs.append(s_batch.prefill_window_pairs)
    # chunks (0, 8), (8, 8), (16, 4):
    # cap 5 (6 keys): 1+..+6 + 2 x 6 = 33; 8 x 6 = 48; 4 x 6 = 24
    # cap 12 (13 keys): 1+..+8 = 36; 9+..+13 + 3 x 13 = 94; 4 x 13 = 52
    assert pairs == [(33.0, 36.0), (48.0, 94.0), (24.0, 52.0)]
    # the decode steps: contexts 21 and 22, past both caps
    for it in range(3, 5):
        s_batch, _ = tr.step(s, float(it))
        windowed.append(s_batch.decode_window_tokens)
    assert windowed == [(5, 12), (5, 12)] and g.state == FINISHED


def test_context_sums_count_prefilling_requests_once_each():
    s = make(max_tokens=8)
    g = group(0, prompt=20, output=3, n=2)
    s.add(g)
    s.schedule(0.0)
    # one chunk of 8 held by the request's one prefill sequence: min(8, 5), min(8, 12)
    assert s.context_sums().windowed == (5, 8)
    s.complete(1.0)
    s.schedule(1.0)
    assert s.context_sums().windowed == (5, 12)


def test_decode_and_prefill_share_an_iteration():
    s = make(max_tokens=10)
    tr = Tracker()
    a = group(0, prompt=4, output=10)
    tr.add(s, a)
    tr.step(s, 0.0)
    tr.add(s, group(1, prompt=30, output=2))
    # a decodes at context 5 (1 token of the budget); the new prompt takes a chunk of 9
    batch, _ = tr.step(s, 1.0)
    assert (batch.decode_window_tokens, batch.prefill_tokens) == ((5, 5), 9)
    # chunk (0, 9): cap 5: 21 + 3 x 6 = 39; cap 12: 45
    assert batch.prefill_window_pairs == (39.0, 45.0)
    tr.run(s, 2.0)


# ----------------------------------------------------------------- preemption, swap, parallel sampling
def test_recompute_preemption_drops_the_victims_window_terms():
    s = make(num_blocks=5, max_tokens=64)
    tr = Tracker()
    gs = [group(0, prompt=7, output=12), group(1, prompt=6, output=10), group(2, prompt=3, output=9)]
    for g in gs:
        tr.add(s, g)
    tr.run(s)
    assert tr.preemptions >= 1 and s.total_preemptions == tr.preemptions
    assert all(g.state == FINISHED for g in gs) and s.kv.used_blocks == 0
    # a recomputed request's prompt holds what it had generated: its later contexts are past both caps
    assert max(g.preemptions for g in gs) >= 1


def test_swap_preemption_keeps_the_context_for_the_swap_in():
    s = make(num_blocks=5, max_tokens=64, mode="swap", swap_blocks=32)
    tr = Tracker()
    gs = [group(0, prompt=6, output=14), group(1, prompt=5, output=12), group(2, prompt=2, output=8)]
    for g in gs:
        tr.add(s, g)
    batches = tr.run(s)
    assert tr.swap_outs >= 1 and tr.swap_ins == tr.swap_outs
    assert sum(b.swap_out_bytes for b in batches if b) > 0 and sum(b.swap_in_bytes for b in batches if b) > 0
    assert all(g.state == FINISHED for g in gs) and s.kv.swap_used_blocks == 0


def test_swap_in_rejoins_below_or_past_each_cap_by_hand():
    # 3 blocks of 4: a (prompt 4) and b (prompt 4) take one block each; at iteration 1 both need a second
    # one (context 5): a gets the last free block, b (admitted last) is swapped out with context 4 held
    s = make(num_blocks=3, max_tokens=64, mode="swap", swap_blocks=8)
    tr = Tracker()
    a, b_ = group(0, prompt=4, output=3), group(1, prompt=4, output=8)
    tr.add(s, a)
    tr.add(s, b_)
    tr.step(s, 0.0)
    batch, _ = tr.step(s, 1.0)
    assert b_.state == SWAPPED and batch.decode_window_tokens == (5, 5)  # a alone at context 5
    batch, _ = tr.step(s, 2.0)  # a: context 6, its last step
    assert batch.decode_window_tokens == (5, 6) and a.state == FINISHED
    # b comes back at context 5 (its next token: past cap 5, below cap 12) and decodes up to 11
    figures = [tr.step(s, float(it))[0].decode_window_tokens for it in range(3, 10)]
    assert figures == [(5, 5), (5, 6), (5, 7), (5, 8), (5, 9), (5, 10), (5, 11)]
    assert tr.swap_ins == 1 and b_.state == FINISHED


def test_parallel_sampling_groups_count_every_sample():
    s = make(num_blocks=64)
    tr = Tracker()
    g2, g3 = group(0, prompt=3, output=6, n=2), group(1, prompt=10, output=4, n=3)
    tr.add(s, g2)
    tr.add(s, g3)
    tr.step(s, 0.0)
    # g2's samples at context 4, g3's at 11: cap 5: 2 x 4 + 3 x 5 = 23; cap 12: 2 x 4 + 3 x 11 = 41
    batch, _ = tr.step(s, 1.0)
    assert batch.decode_seqs == 5 and batch.decode_window_tokens == (23, 41)
    batch, _ = tr.step(s, 2.0)  # 5 and 12: 2 x 5 + 3 x 5 = 25; 2 x 5 + 3 x 12 = 46
    assert batch.decode_window_tokens == (25, 46)
    tr.run(s, 3.0)


def test_parallel_sampling_preempted_with_recompute_restarts():
    s = make(num_blocks=7, max_tokens=64)
    tr = Tracker()
    gs = [group(0, prompt=6, output=10), group(1, prompt=5, output=9, n=2)]
    for g in gs:
        tr.add(s, g)
    tr.run(s)
    assert gs[1].preemptions >= 1 and all(g.state == FINISHED for g in gs)


def test_parallel_sampling_swapped_out_and_back():
    # each needs 2 x 4 blocks at its longest (contexts up to 15 and 13): 10 blocks hold one at a time
    s = make(num_blocks=10, max_tokens=64, mode="swap", swap_blocks=32)
    tr = Tracker()
    gs = [group(0, prompt=6, output=10, n=2), group(1, prompt=5, output=9, n=2)]
    for g in gs:
        tr.add(s, g)
    tr.run(s)
    assert tr.swap_outs >= 1 and tr.swap_ins == tr.swap_outs
    assert all(g.state == FINISHED for g in gs)


def test_the_coordinator_gets_the_same_sums():
    kv = coordinator(num_pages=24, swap_pages=64)
    s = Scheduler(limits(max_tokens=16, mode="swap"), kv)
    tr = Tracker()
    gs = [group(0, prompt=9, output=15), group(1, prompt=14, output=8), group(2, prompt=3, output=12, n=2),
          group(3, prompt=20, output=5)]
    for g in gs:
        tr.add(s, g)
    tr.run(s)
    assert all(g.state == FINISHED for g in gs)


def test_a_swapped_group_comes_back_with_a_page_per_group_for_its_next_block():
    # full + sliding layers: a sequence's next block takes 2 pages. b (n = 1, 7 blocks), then a (n = 2, one
    # block) prefill: 16 of 20 pages; at iteration 1 both cross a block: b takes 2 pages, a needs 4 of the 2
    # left and is swapped out (its 2 pages). Coming back at context 5 it needs those 2 pages and 2 per
    # sample: 6, and 4 are free while b runs. Counting one page per sample (4) let it in, and the second
    # sample's block failed silently: it decoded past its pages (more token states than slots, stress seed
    # 776). (Both requests pass the deployment's refusal: b's 37 tokens take 20 pages, a's 2 x 6 + 2 x 2.)
    groups = (LayerGroup("full", (0, 1), 2048.0), LayerGroup("sliding", (2, 3), 2048.0, window=64))
    kv = KVCoordinator(plan_pages(groups, BS), 20, 64)
    assert kv.block_pages == 2
    s = Scheduler(limits(mode="recompute", windows=(63,)), kv)
    tr = Tracker((63,))
    b_, a = group(0, prompt=28, output=10), group(1, prompt=4, output=6, n=2)
    tr.add(s, b_)
    tr.add(s, a)
    tr.step(s, 0.0)
    tr.step(s, 1.0)
    assert a.state == SWAPPED and kv.num_free_blocks == 4
    tr.step(s, 2.0)
    assert a.state == SWAPPED  # 6 pages needed, 4 free
    tr.run(s, 3.0)  # (the tracker checks that every sequence's pages cover its context)
    assert tr.swap_ins >= 1 and a.state == FINISHED and b_.state == FINISHED


# ----------------------------------------------------------------- property
requests = st.lists(st.tuples(st.integers(1, 30), st.integers(1, 20), st.sampled_from((1, 1, 1, 2, 3)),
                              st.integers(0, 6)), min_size=2, max_size=7)


@settings(max_examples=50, deadline=None)
@given(reqs=requests, caps=st.lists(st.integers(1, 24), min_size=1, max_size=3, unique=True),
       extra_blocks=st.sampled_from((0, 0, 1, 2, 4, 8, 32)), max_tokens=st.integers(4, 40),
       chunked=st.booleans(), mode=st.sampled_from(("recompute", "swap")), max_seqs=st.integers(1, 8),
       swap_blocks=st.sampled_from((0, 256)), layout=st.sampled_from(("paged", "coordinator")),
       v0=st.booleans())
def test_random_workloads_keep_the_windowed_sums_exact(reqs, caps, extra_blocks, max_tokens, chunked, mode,
                                                       max_seqs, swap_blocks, layout, v0):
    caps = (5, 12) if layout == "coordinator" else tuple(sorted(caps))
    chunked = chunked and not v0  # vLLM V0 without chunked prefill: iterations of prompts only
    # enough blocks for the largest group at its longest (each sample, plus a copied last block), and
    # without chunking a budget for the longest recomputed prompt: nothing can stall
    need = max(n * (-(-(p + o) // BS) + 1) for p, o, n, _ in reqs)
    if not chunked:
        max_tokens = max(max_tokens, max(p + o for p, o, _, _ in reqs))
    max_seqs = max(max_seqs, max(n for _, _, n, _ in reqs))
    lim = limits(max_seqs, max_tokens, chunked, mode, caps, VLLM_V0 if v0 else VLLM_V1)
    if layout == "paged":
        kv = PagedKVManager(need + extra_blocks, BS, swap_capacity_blocks=swap_blocks)
    else:  # a page per block in each of the three groups (the sliding ones give some back)
        kv = coordinator(3 * (need + extra_blocks), swap_blocks)
    s = Scheduler(lim, kv)
    tr = Tracker(caps)
    arrivals = sorted(((at, group(i, p, o, n)) for i, (p, o, n, at) in enumerate(reqs)),
                      key=lambda x: (x[0], x[1].order))
    it = 0
    while arrivals or s.has_work():
        while arrivals and arrivals[0][0] <= it:
            tr.add(s, arrivals.pop(0)[1])
        tr.step(s, float(it))
        it += 1
        assert it < 5000
    assert all(g.state == FINISHED for g in tr.prompt)


# ----------------------------------------------------------------- construction checks
class WindowedPaged(PagedKVManager):
    """A paged manager that reports window caps (5, 12), as a KV coordinator of sliding groups would."""

    windows = (5, 12)


def test_scheduler_rejects_a_kv_manager_with_other_window_caps():
    with pytest.raises(ValueError, match="differ"):
        Scheduler(limits(windows=(5,)), WindowedPaged(16, BS))
    with pytest.raises(ValueError, match="differ"):
        Scheduler(limits(windows=()), WindowedPaged(16, BS))
    with pytest.raises(ValueError, match="differ"):
        Scheduler(limits(windows=(5, 13)), coordinator())
    Scheduler(limits(windows=(5, 12)), WindowedPaged(16, BS))
    Scheduler(limits(windows=(5, 12)), coordinator())
    # a manager without window caps takes any: the scheduler keeps the model's sums itself
    assert Scheduler(limits(windows=(5, 12)), PagedKVManager(16, BS)).windows == (5, 12)


def test_scheduler_rejects_window_caps_with_a_sizing_that_is_not_by_context():
    from kvsim.engine.sparse_sizing import SparseSizing
    from kvsim.kvcache.sparsity.config import SparsityConfig

    sizing = SparseSizing(SparsityConfig(policy="streaming", budget_tokens=32), BS, 10.0, 100.0)
    with pytest.raises(ValueError, match="not by context"):
        Scheduler(limits(windows=(5,)), PagedKVManager(16, BS), sizing)
    Scheduler(limits(windows=()), PagedKVManager(16, BS), sizing)


def test_no_caps_no_sums():
    s = make(windows=())
    s.add(group(0, prompt=5, output=3))
    b = s.schedule(0.0)
    assert (b.decode_window_tokens, b.prefill_window_pairs, s.context_sums().windowed) == ((), (), ())

