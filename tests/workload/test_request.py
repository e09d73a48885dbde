"""RequestTable and FollowUps: a stream held as columns, each Request built when it is read."""

from __future__ import annotations

import numpy as np
import pytest

from kvsim.workload.request import Request, RequestTable


def _table(**kw) -> RequestTable:
    # rid 0 and 2 open loop; 1 waits for 0, 3 and 4 wait for 2 (listed after it, in rid order)
    cols = dict(after=np.array([-1, 0, -1, 2, 2]), think_s=np.array([0.0, 1.5, 0.0, 2.0, 3.0]),
                session=np.array([0, 0, 1, 1, 1]), output_id=np.array([10, 11, 12, 13, 14]))
    return RequestTable(np.array([0.0, 0.0, 0.25, 0.25, 0.25]), np.array([5, 9, 7, 8, 6]),
                        np.array([2, 3, 4, 1, 2]), n=2, source="x", **(cols | kw))


def test_rows_become_requests_of_python_values():
    t = _table(segments=lambda i: ((100 + i, 3), (7, i + 1)))
    assert len(t) == 5
    r = t[3]
    assert r == Request(rid=3, arrival_s=0.25, prompt_len=8, output_len=1, n=2, segments=((103, 3), (7, 4)),
                        session=1, after=2, think_s=2.0, source="x", output_id=13)
    assert type(r.prompt_len) is int and type(r.arrival_s) is float and type(r.after) is int
    assert t[-1].rid == 4 and [q.rid for q in t[1:3]] == [1, 2]
    assert [q.prompt_len for q in t] == [5, 9, 7, 8, 6]
    assert t[0] is not t[0]  # a new object per read
    with pytest.raises(IndexError):
        t[5]
    assert t == list(t) and list(t) == t


def test_defaults_when_columns_are_left_out():
    t = RequestTable(np.array([0.0, 1.0]), np.array([3, 4]), np.array([1, 1]), beam_width=4)
    assert t[1] == Request(rid=1, arrival_s=1.0, prompt_len=4, output_len=1, beam_width=4)
    assert [r.rid for r in t.open_loop()] == [0, 1]
    assert t.follow_ups().pop(0, ()) == ()


def test_open_loop_and_follow_ups_each_once():
    t = _table()
    assert [r.rid for r in t.open_loop()] == [0, 2]
    links = t.follow_ups()
    assert [r.rid for r in links.pop(2, ())] == [3, 4]
    assert links.pop(2, ()) == ()  # handed out once, as dict.pop
    assert [r.rid for r in links.pop(0, ())] == [1]
    assert links.pop(1, ()) == () and links.pop(4, ()) == () and links.pop(99, ()) == ()


def test_every_field_lands_in_its_place():
    """request() builds a Request positionally: each column reaches its own field."""
    t = _table(segments=lambda i: ((100 + i, 3),))
    t.adapter = np.array([-1, 3, -1, 0, 1])
    r = t[1]
    assert r == Request(rid=1, arrival_s=0.0, prompt_len=9, output_len=3, n=2, segments=((101, 3),),
                        session=0, after=0, think_s=1.5, source="x", output_id=11, beam_width=1, rereads=(),
                        adapter=3, adapter_name="")
