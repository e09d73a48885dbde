from pathlib import Path

import numpy as np
import pytest

from kvsim.errors import KvsimError
from kvsim.workload.config import RATE_UNITS, WORKLOAD_KINDS, WorkloadConfig
from kvsim.workload.factory import _GENERATORS, _TABLES, build_request_stream, build_requests
from kvsim.workload.request import RequestTable

DATA = Path(__file__).resolve().parents[1] / "data"

CONFIGS = [
    {"kind": "synthetic"},
    {"kind": "synthetic", "arrival": {"process": "gamma", "rate": 3.0, "cv": 3.0}},
    {"kind": "synthetic", "arrival": {"process": "closed_loop", "users": 5}},
    {"kind": "chat"},
    {"kind": "chat", "arrival": {"process": "closed_loop", "users": 5}},
    {"kind": "trace", "trace": {"path": str(DATA / "azure_conv_head200.csv")}},
    {"kind": "trace", "trace": {"path": str(DATA / "mooncake_conv_head50.jsonl"), "format": "mooncake"}},
]


@pytest.mark.parametrize("data", CONFIGS)
def test_contract(data):
    reqs = build_requests(WorkloadConfig(**data), np.random.default_rng(0), 300, None)
    assert 0 < len(reqs) <= 300
    assert [r.rid for r in reqs] == list(range(len(reqs)))
    keys = [(r.arrival_s, r.rid) for r in reqs]
    assert keys == sorted(keys)
    for r in reqs:
        assert r.prompt_len >= 1 and r.output_len >= 1
        assert not r.segments or sum(n for _, n in r.segments) == r.prompt_len
        if r.after >= 0:
            assert r.after < r.rid and r.arrival_s == reqs[r.after].arrival_s
    again = build_requests(WorkloadConfig(**data), np.random.default_rng(0), 300, None)
    assert again == reqs


def test_needs_a_limit():
    with pytest.raises(KvsimError, match="requests"):
        build_requests(WorkloadConfig(), np.random.default_rng(0), None, None)


def test_relative_trace_path_uses_base_dir():
    cfg = WorkloadConfig(kind="trace", trace={"path": "azure_conv_head200.csv", "limit": 5})
    assert len(build_requests(cfg, np.random.default_rng(0), 100, None, base_dir=DATA)) == 5


@pytest.mark.parametrize("data", [*CONFIGS, {"kind": "chat", "beam_width": 3},
                                  {"kind": "chat", "rereads": {"mean": 1.0}}])
def test_the_stream_the_engine_replays_is_the_list(data):
    cfg = WorkloadConfig(**data)
    stream = build_request_stream(cfg, np.random.default_rng(4), 300, None)
    listed = build_requests(cfg, np.random.default_rng(4), 300, None)
    lazy = cfg.kind in ("synthetic", "chat") and cfg.rereads.mean == 0
    assert isinstance(stream, RequestTable) == lazy
    assert list(stream) == listed


def test_the_kind_names_are_the_generator_registry():
    assert tuple(_GENERATORS) == WORKLOAD_KINDS and set(RATE_UNITS) == set(WORKLOAD_KINDS)
    assert set(_TABLES) <= set(WORKLOAD_KINDS)
    assert WorkloadConfig.model_json_schema()["properties"]["kind"]["enum"] == list(WORKLOAD_KINDS)
