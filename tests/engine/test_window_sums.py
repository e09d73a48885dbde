"""WindowSums (kvsim/engine/window_sums.py): per-cap decode sums by hand."""

from __future__ import annotations

from kvsim.engine.group import DECODE, RUNNING, Group
from kvsim.engine.window_sums import WindowSums
from kvsim.workload.request import Request


def _group(base: int, n: int = 1) -> Group:
    g = Group(req=Request(0, 0.0, 10, 10, n=n), order=0, seqs=list(range(n)), output=10, prompt=10, n=n)
    g.base, g.state = base, RUNNING
    return g


def test_join_cross_and_leave_by_hand():
    w = WindowSums((4, 8))
    g = _group(base=2, n=2)  # context at iteration it: 2 + it
    w.join(g, 1)  # context 3: below both caps
    assert (w.below_n, w.below_base, w.past_n) == ([2, 2], [4, 4], [0, 0])
    assert list(w.context(1, [])) == [2 * 3, 2 * 3]
    w.cross(2)  # context 4 reaches cap 4
    assert g.past_windows == 0b01 and list(w.context(2, [])) == [2 * 4, 2 * 4]
    assert list(w.context(5, [])) == [2 * 4, 2 * 7]  # capped at 4 in the first group of layers
    w.cross(6)  # context 8 reaches cap 8
    assert list(w.context(9, [])) == [8, 16] and g.past_windows == 0b11
    w.leave(g)
    assert (w.below_n, w.below_base, w.past_n) == ([0, 0], [0, 0], [0, 0])


def test_a_group_past_a_cap_at_join_and_a_stale_heap_entry():
    w = WindowSums((4,))
    g = _group(base=5)
    w.join(g, 0)  # context 5 >= 4: past at once, nothing pushed
    assert w.past_n == [1] and list(w.context(0, [])) == [4]
    h = _group(base=0)
    w.join(h, 1)
    h.epoch += 1  # it left (preempted) before crossing: the heap entry is stale
    w.leave(h)
    w.cross(10)
    assert (w.below_n, w.past_n) == ([0], [1])


def test_context_adds_prefilling_groups_up_to_each_cap():
    w = WindowSums((4, 8))
    p = _group(base=0)
    p.computed, p.chunk = 3, 3  # holds 6 tokens after this iteration's chunk
    assert w.context(0, [p]) == (4, 6)


def test_prefill_pairs_by_hand():
    w = WindowSums((2,))
    p = _group(base=0)
    p.computed, p.chunk = 1, 3  # queries at positions 1, 2, 3; window of 3 keys (cap + 1)
    # position 1 sees keys 0-1 (2 pairs), position 2 sees 0-2 (3), position 3 sees 1-3 (3): 8
    assert w.batch_figures(0, [p]) == ((0,), (8.0,))


def test_context_in_a_prefill_only_iteration_holds_one_token_less():
    # vLLM V0 without chunked prefill: an iteration that runs prompts only leaves the decode clock at it and
    # writes no decode token, so each decoding sequence holds min(base + it - 1, cap) (it once counted
    # base + it: more token states than pages in check mode, with n = 1 as well)
    below, at_cap, past = _group(base=1, n=2), _group(base=2), _group(base=9, n=3)
    w = WindowSums((4, 8), {below: None, at_cap: None, past: None})  # (the scheduler's running groups)
    for g in (below, at_cap, past):
        g.phase = DECODE
        w.join(g, 0)
    w.cross(2)  # at_cap reaches cap 4 at it = 2
    assert w.context(2, []) == (2 * 3 + 4 + 3 * 4, 2 * 3 + 4 + 3 * 8)
    assert w.context(2, [], paused=True) == (2 * 2 + 3 + 3 * 4, 2 * 2 + 3 + 3 * 8)
    p = _group(base=0)
    p.computed, p.chunk = 0, 6  # the prompt prefilling in that iteration holds its chunk, as in context()
    assert w.context(2, [p], paused=True) == (2 * 2 + 3 + 3 * 4 + 4, 2 * 2 + 3 + 3 * 8 + 6)
