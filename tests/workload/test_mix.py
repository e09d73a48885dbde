"""kind: mix: weights split the arrival rate, streams merge by time, ids stay disjoint."""

import numpy as np
import pytest
from pydantic import ValidationError

from kvsim.errors import KvsimError
from kvsim.kvcache.sparsity.tracker import reread_schedule
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.factory import build_requests
from kvsim.workload.mix import COMPONENT_ID_SHIFT


def mix(components, **kw):
    return WorkloadConfig.model_validate({"kind": "mix", "arrival": {"process": "poisson", "rate": 10.0},
                                          "mix": components, **kw})


def test_weights_split_arrivals_and_streams_merge_by_time():
    cfg = mix([{"kind": "rag", "weight": 3}, {"kind": "synthetic", "weight": 1}])
    reqs = build_requests(cfg, np.random.default_rng(0), 4000)
    assert [r.rid for r in reqs] == list(range(4000))
    times = [r.arrival_s for r in reqs]
    assert times == sorted(times)
    share = sum(r.source == "rag" for r in reqs) / len(reqs)
    assert share == pytest.approx(0.75, abs=0.03)
    assert reqs[-1].arrival_s == pytest.approx(4000 / 10.0, rel=0.06)  # total rate 10 req/s


def test_follow_ups_and_content_ids_are_remapped():
    cfg = mix([{"kind": "rag"}, {"kind": "chat"}])
    reqs = build_requests(cfg, np.random.default_rng(1), 500)
    by_rid = {r.rid: r for r in reqs}
    shift = 1 << COMPONENT_ID_SHIFT
    for r in reqs:
        if r.source == "chat":
            assert all(cid >= shift for cid, _ in r.segments) and r.output_id >= shift
        else:
            assert all(cid < shift for cid, _ in r.segments)
        if r.after >= 0:
            parent = by_rid[r.after]
            assert parent.rid < r.rid and parent.source == r.source == "chat"
            assert (parent.output_id, parent.output_len) in r.segments  # the answer is quoted


def test_rereads_of_a_component_follow_its_shifted_content_ids():
    # only the 300-token system prompt (segment 0) is >= min_tokens, and Poisson(50) draws >= 1 re-read:
    # every rag request of component 1 re-reads exactly its first segment, id shifted by 2^52
    rereads = {"mean": 50, "min_tokens": 300, "skip_first": 0, "skip_last": 0}
    cfg = mix([{"kind": "synthetic"}, {"kind": "rag", "rereads": rereads}])
    reqs = build_requests(cfg, np.random.default_rng(3), 40)
    rag = [r for r in reqs if r.source == "rag"]
    assert rag and all(r.segments[0][1] == 300 and r.segments[0][0] >= 1 << COMPONENT_ID_SHIFT for r in rag)
    assert all(r.rereads == (r.segments[0][0],) for r in rag)
    assert all(r.rereads == () for r in reqs if r.source != "rag")
    # the engine finds the segment: one re-read of positions 0..299, half-way through 10 decode steps
    assert reread_schedule(rag[0].segments, rag[0].rereads, 10) == [(5, 0, 300)]


def test_component_streams_do_not_depend_on_each_other():
    a = build_requests(mix([{"kind": "rag"}, {"kind": "synthetic"}]), np.random.default_rng(2), None, 30.0)
    b = build_requests(mix([{"kind": "rag"}, {"kind": "synthetic", "prompt_len": {"dist": "fixed",
                                                                                   "value": 9}}]),
                       np.random.default_rng(2), None, 30.0)
    assert [r.segments for r in a if r.source == "rag"] == [r.segments for r in b if r.source == "rag"]


def test_invalid_mixes():
    with pytest.raises(ValidationError, match="needs a 'mix' list"):
        WorkloadConfig.model_validate({"kind": "mix"})
    with pytest.raises(ValidationError, match="cannot itself be a mix"):
        mix([{"kind": "mix", "mix": [{"kind": "rag"}]}])
    with pytest.raises(ValidationError, match="set 'arrival' on the mix"):
        mix([{"kind": "rag", "arrival": {"rate": 1.0}}])
    with pytest.raises(KvsimError, match="open-loop arrival process"):
        cfg = mix([{"kind": "rag"}], arrival={"process": "closed_loop"})
        build_requests(cfg, np.random.default_rng(0), 10)
