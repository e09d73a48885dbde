import time
from collections import Counter

import numpy as np
import pytest

from kvsim.errors import KvsimError
from kvsim.workload import chat as chat_module
from kvsim.workload import links
from kvsim.workload.chat import SYSTEM_PROMPT_ID_BASE, TURN_ID_BASE, chat_requests, zipf_weights
from kvsim.workload.config import WorkloadConfig


def _cfg(**chat) -> WorkloadConfig:
    return WorkloadConfig(kind="chat", arrival={"process": "poisson", "rate": 2.0},
                          output_len={"dist": "uniform", "low": 5, "high": 50}, chat=chat)


def _gen(cfg: WorkloadConfig, n: int | None = 500, duration: float | None = None, seed: int = 0):
    return chat_requests(cfg, np.random.default_rng(seed), n, duration)


def test_zipf_weights_hand_computed():
    assert zipf_weights(3, 1.0) == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    assert zipf_weights(4, 0.0) == pytest.approx([0.25] * 4)


def test_history_carried_and_segments_sum():
    reqs = _gen(_cfg())
    follow_ups = 0
    for r in reqs:
        assert sum(length for _, length in r.segments) == r.prompt_len
        assert r.segments[0][0] - SYSTEM_PROMPT_ID_BASE in range(4)
        if r.after < 0:
            assert len(r.segments) == 2
            continue
        follow_ups += 1
        parent = reqs[r.after]
        k = len(parent.segments)
        assert r.segments[:k] == parent.segments
        answer_id, answer_len = r.segments[k]
        assert answer_id == parent.segments[-1][0] + 1 and answer_len == parent.output_len
        assert len(r.segments) == k + 2
        assert r.prompt_len == parent.prompt_len + parent.output_len + r.segments[-1][1]
        assert r.session == parent.session and r.arrival_s == parent.arrival_s
    assert follow_ups > 100


def test_turn_pieces_have_unique_ids():
    reqs = _gen(_cfg())
    owner: dict[int, int] = {}
    for r in reqs:
        for cid, _ in r.segments[1:]:
            assert cid >= TURN_ID_BASE
            assert owner.setdefault(cid, r.session) == r.session


def test_follow_up_links_and_order():
    reqs = _gen(_cfg())
    assert [r.rid for r in reqs] == list(range(len(reqs)))
    assert len(reqs) == 500
    heads = [r for r in reqs if r.after == -1]
    assert [r.arrival_s for r in heads] == sorted(r.arrival_s for r in heads)
    assert all(r.arrival_s <= s.arrival_s for r, s in zip(reqs, reqs[1:], strict=False))
    for r in reqs:
        if r.after >= 0:
            assert r.after == r.rid - 1
            assert 2.0 <= r.think_s <= 20.0
        else:
            assert r.think_s == 0.0


def test_fixed_turns_cut_by_max_requests():
    cfg = _cfg(turns={"dist": "fixed", "value": 3}, think_time_s=0)
    reqs = _gen(cfg, n=10)
    assert [r.after for r in reqs] == [-1, 0, 1, -1, 3, 4, -1, 6, 7, -1]
    assert [r.session for r in reqs] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    assert all(r.think_s == 0.0 for r in reqs)


def test_abandon_prob_one_gives_single_turns():
    reqs = _gen(_cfg(turns={"dist": "fixed", "value": 5}, abandon_prob=1.0), n=50)
    assert all(r.after == -1 for r in reqs)


def test_abandon_prob_shortens_sessions():
    full = _gen(_cfg(turns={"dist": "fixed", "value": 8}), n=2000)
    half = _gen(_cfg(turns={"dist": "fixed", "value": 8}, abandon_prob=0.5), n=2000)
    turns_full = len(full) / len({r.session for r in full})
    turns_half = len(half) / len({r.session for r in half})
    assert turns_full == pytest.approx(8, abs=0.01)
    assert turns_half == pytest.approx(2, rel=0.1)  # min(8, geometric(0.5)) has mean ~1.99


def test_max_context_stops_sessions():
    cfg = _cfg(turns={"dist": "fixed", "value": 50}, max_context=2000)
    reqs = _gen(cfg, n=300)
    assert max(r.prompt_len for r in reqs) <= 2000
    assert len({r.session for r in reqs}) > 10


def test_max_context_too_small_is_an_error():
    with pytest.raises(KvsimError, match="max_context"):
        _gen(_cfg(max_context=100))


def test_zipf_popularity():
    def share_of_top(s: float) -> float:
        reqs = _gen(_cfg(zipf_s=s, system_prompts=4, turns={"dist": "fixed", "value": 1}), n=4000)
        counts = Counter(r.segments[0][0] - SYSTEM_PROMPT_ID_BASE for r in reqs)
        return counts[0] / len(reqs), len(counts)

    uniform_top, uniform_used = share_of_top(0.0)
    assert uniform_top == pytest.approx(0.25, abs=0.03) and uniform_used == 4
    skewed_top, _ = share_of_top(6.0)
    assert skewed_top > 0.95


def test_system_prompt_length_drawn_once_per_prompt():
    reqs = _gen(_cfg(system_prompt_len={"dist": "uniform", "low": 100, "high": 900}))
    lengths: dict[int, set[int]] = {}
    for r in reqs:
        lengths.setdefault(r.segments[0][0], set()).add(r.segments[0][1])
    assert all(len(v) == 1 for v in lengths.values())


def test_closed_loop_users_run_sessions_back_to_back():
    cfg = WorkloadConfig(kind="chat", arrival={"process": "closed_loop", "users": 2, "think_time_s": 7.0},
                         chat={"turns": {"dist": "fixed", "value": 2}, "think_time_s": 1.0})
    reqs = _gen(cfg, n=8)
    # sessions 0..3 of 2 turns; user 0 runs sessions 0 and 2, user 1 runs 1 and 3
    assert [r.session for r in reqs] == [0, 0, 2, 2, 1, 1, 3, 3]
    assert [r.after for r in reqs] == [-1, 0, 1, 2, -1, 4, 5, 6]
    assert [r.think_s for r in reqs] == [0.0, 1.0, 7.0, 1.0, 0.0, 1.0, 7.0, 1.0]
    assert all(r.arrival_s == 0.0 for r in reqs)


def test_duration_keeps_follow_ups_of_started_sessions():
    cfg = _cfg(turns={"dist": "fixed", "value": 3})
    reqs = _gen(cfg, n=None, duration=20.0)
    heads = [r for r in reqs if r.after == -1]
    assert max(r.arrival_s for r in heads) <= 20.0
    assert len(reqs) == 3 * len(heads)


def test_deterministic():
    assert _gen(_cfg(), seed=3) == _gen(_cfg(), seed=3)
    assert _gen(_cfg(), seed=3) != _gen(_cfg(), seed=4)


def test_twenty_thousand_requests_fast():
    start = time.perf_counter()
    reqs = chat_requests(WorkloadConfig(kind="chat"), np.random.default_rng(0), 20_000, None)
    assert len(reqs) == 20_000
    assert time.perf_counter() - start < 1.0


def test_sessions_longer_than_the_request_cap_are_cut_before_they_are_built(monkeypatch):
    """Ten sessions of 10^8 turns once allocated 10^9-element arrays; past MAX_REQUESTS turns, each
    session is cut to the request cap first (it cannot give the stream more)."""
    monkeypatch.setattr(chat_module, "MAX_REQUESTS", 1000)
    cfg = _cfg(turns={"dist": "fixed", "value": 10**8}, user_turn_len={"dist": "fixed", "value": 1},
               max_context=10**9)
    reqs = _gen(cfg, 10)
    assert len(reqs) == 10 and all(r.session == 0 for r in reqs)


def test_too_many_turns_without_a_cap_is_an_error(monkeypatch):
    monkeypatch.setattr(chat_module, "MAX_REQUESTS", 1000)
    cfg = _cfg(turns={"dist": "fixed", "value": 500})
    with pytest.raises(KvsimError, match=r"^workload\.chat\.turns: the workload draws \d+,\d{3} requests, "
                                         r"more than the 1,000 one run may generate"):
        _gen(cfg, None, duration=10.0)  # rate 2: about 20 sessions of 500 turns


def test_quadratic_history_is_bounded(monkeypatch):
    monkeypatch.setattr(links, "MAX_SEGMENTS", 1000)
    cfg = _cfg(turns={"dist": "fixed", "value": 40}, user_turn_len={"dist": "fixed", "value": 1},
               system_prompt_len={"dist": "fixed", "value": 1})
    # turn k lists 2k + 1 segments: one session of 40 turns lists 1 + 3 + ... + 79 = 1600
    with pytest.raises(KvsimError, match=r"^workload\.chat\.turns: the prompts would list 1,600 segments"):
        _gen(cfg, 40)


@pytest.mark.parametrize("arrival", [{"process": "poisson", "rate": 2.0},
                                     {"process": "closed_loop", "users": 3, "think_time_s": 1.0}])
def test_segments_read_in_order_equal_segments_read_alone(arrival):
    # a session's turns read in order extend the turn before's segments (kept until then); read in any
    # other order, or again, each row lists its whole history: the same segments either way
    cfg = WorkloadConfig(kind="chat", arrival=arrival, output_len={"dist": "uniform", "low": 5, "high": 50})
    table = chat_module.chat_table(cfg, np.random.default_rng(3), 300, None)
    in_order = [table.segments(i) for i in range(len(table))]
    alone = chat_module.chat_table(cfg, np.random.default_rng(3), 300, None).segments
    backwards = [alone(i) for i in reversed(range(len(table)))][::-1]
    assert in_order == backwards == [table.segments(i) for i in range(len(table))]
    assert not table.segments._kept  # the last turn of every session is not kept


def test_a_chat_table_copies_and_pickles_and_reads_as_item_does():
    """A chat RequestTable (its columns read through item views) copies and pickles, and its requests are
    those item() reads give; a column set after a read is read afresh."""
    import copy
    import pickle

    from kvsim.workload.chat import chat_table

    table = chat_table(_cfg(), np.random.default_rng(0), 200, None)
    want = [table.request(i) for i in range(len(table))]
    for r in want[:50]:
        assert type(r.arrival_s) is float and type(r.prompt_len) is int and type(r.after) is int
        assert r.prompt_len == table.prompt_len.item(r.rid) and r.after == table.after.item(r.rid)
    for how in (copy.deepcopy, lambda t: pickle.loads(pickle.dumps(t))):
        other = how(table)
        assert [other.request(i) for i in range(len(other))] == want
    table.prompt_len = table.prompt_len + 1
    assert table.request(3).prompt_len == want[3].prompt_len + 1
