"""The adapter table and each request's adapter (kvsim/lora/adapters.py): popularity shares by hand, one
draw per session, the base-model share, determinism, a trace's names."""

from __future__ import annotations

import numpy as np
import pytest

from kvsim.errors import KvsimError
from kvsim.lora.adapters import adapter_table, tag_requests
from kvsim.lora.config import LoraConfig
from kvsim.workload.request import Request, RequestTable


def cfg(**kw):
    return LoraConfig.model_validate({"max_lora_rank": 16, **kw})


def test_table_shares_named_adapters_by_weight_and_a_group_by_zipf():
    # weights: a 3, the group 1 in all (zipf s=1 over 2: 1 and 1/2, normalised 2/3 and 1/3), b 0 -> sum 4
    t = adapter_table(cfg(adapters=[{"name": "a", "popularity": 3}, {"count": 2, "popularity": "zipf"},
                                    {"name": "b", "popularity": 0, "rank": 8}]))
    assert t.names == ("a", "adapter-0", "adapter-1", "b")
    assert t.ranks.tolist() == [16, 16, 16, 8]
    assert t.probs == pytest.approx([0.75, 2 / 3 / 4, 1 / 3 / 4, 0.0])


def stream(n=400):
    # sessions of 4 requests each (rid // 4), then 40 requests of no session
    return [Request(i, float(i), 10, 2, session=i // 4 if i < n - 40 else -1) for i in range(n)]


def test_a_session_keeps_its_adapter_and_draws_are_seeded():
    c = cfg(adapters=[{"count": 5}], base_fraction=0.2)
    a = [r.adapter for r in tag_requests(stream(), c, adapter_table(c), seed=3)]
    b = [r.adapter for r in tag_requests(stream(), c, adapter_table(c), seed=3)]
    assert a == b
    for s in range(90):
        assert len(set(a[4 * s: 4 * s + 4])) == 1
    assert set(a) <= {-1, 0, 1, 2, 3, 4} and -1 in a and len(set(a)) > 3
    assert a != [r.adapter for r in tag_requests(stream(), c, adapter_table(c), seed=4)]


def test_base_fraction_one_and_no_adapters_mean_the_base_model():
    for c in (cfg(adapters=[{"name": "a"}], base_fraction=1), cfg()):
        assert {r.adapter for r in tag_requests(stream(), c, adapter_table(c), seed=0)} == {-1}


def test_a_request_table_gets_the_column():
    t = RequestTable(np.arange(6.0), np.full(6, 10), np.full(6, 2), session=np.array([0, 0, 1, 1, -1, -1]))
    c = cfg(adapters=[{"count": 3}])
    tag_requests(t, c, adapter_table(c), seed=0)
    got = [r.adapter for r in t]
    assert got[0] == got[1] and got[2] == got[3] and all(0 <= a < 3 for a in got)
    assert got == t.adapter.tolist()


def test_trace_names_map_to_adapters():
    c = cfg(adapters=[{"name": "x"}, {"name": "y"}])
    reqs = [Request(i, 0.0, 10, 2, adapter_name=n) for i, n in enumerate(["y", "", "x"])]
    assert [r.adapter for r in tag_requests(reqs, c, adapter_table(c), seed=0)] == [1, -1, 0]
    with pytest.raises(KvsimError, match="adapter 'z'"):
        tag_requests([Request(0, 0.0, 10, 2, adapter_name="z")], c, adapter_table(c), seed=0)


def test_the_columns_trace_reads_an_adapter_column(tmp_path):
    from kvsim.workload.config import WorkloadConfig
    from kvsim.workload.trace import trace_requests

    (tmp_path / "t.csv").write_text("t,p,o,model\n0.5,10,2, x \n0.0,20,3,\n")
    wl = WorkloadConfig.model_validate({"kind": "trace", "trace": {
        "path": str(tmp_path / "t.csv"), "format": "columns",
        "columns": {"arrival": "t", "prompt": "p", "output": "o", "adapter": "model"}}})
    reqs = trace_requests(wl, np.random.default_rng(0), None, None)
    assert [(r.prompt_len, r.adapter_name) for r in reqs] == [(20, ""), (10, "x")]  # sorted by arrival


def test_adapter_requests_get_content_ids_of_their_own():
    # vLLM keys cached blocks by the adapter too: the same prompt under two adapters shares nothing
    c = cfg(adapters=[{"name": "x"}, {"name": "y"}])
    reqs = [Request(i, 0.0, 10, 2, segments=((5, 10),), output_id=7, rereads=(5,), adapter_name=n)
            for i, n in enumerate(["x", "y", "", "x"])]
    tag_requests(reqs, c, adapter_table(c), seed=0)
    assert [r.segments[0][0] for r in reqs] == [5 + (1 << 64), 5 + (2 << 64), 5, 5 + (1 << 64)]
    assert [r.output_id for r in reqs] == [7 + (1 << 64), 7 + (2 << 64), 7, 7 + (1 << 64)]
    assert reqs[1].rereads == (5 + (2 << 64),)


def test_a_request_table_shifts_its_segments_and_output_ids():
    t = RequestTable(np.zeros(20), np.full(20, 10), np.full(20, 2), session=np.arange(20),
                     output_id=np.where(np.arange(20) == 2, -1, 7), segments=lambda i: ((5, 10),))
    c = cfg(adapters=[{"name": "x"}], base_fraction=0.5)
    tag_requests(t, c, adapter_table(c), seed=1)
    assert set(t.adapter.tolist()) == {-1, 0}
    for r in t:
        shift = 0 if r.adapter < 0 else 1 << 64
        assert r.segments == ((5 + shift, 10),)
        assert r.output_id == (-1 if r.rid == 2 else 7 + shift)
