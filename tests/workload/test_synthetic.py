import numpy as np
import pytest

from kvsim.errors import KvsimError
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.synthetic import synthetic_requests


def test_open_loop_requests():
    cfg = WorkloadConfig(kind="synthetic", arrival={"process": "fixed", "rate": 2.0}, n=2,
                         prompt_len={"dist": "uniform", "low": 10, "high": 20},
                         output_len={"dist": "fixed", "value": 5})
    reqs = synthetic_requests(cfg, np.random.default_rng(0), 4, None)
    assert [r.rid for r in reqs] == [0, 1, 2, 3]
    assert [r.arrival_s for r in reqs] == [0.0, 0.5, 1.0, 1.5]
    assert all(10 <= r.prompt_len <= 20 and r.output_len == 5 for r in reqs)
    assert all(r.n == 2 and r.segments == () and r.after == -1 and r.source == "synthetic" for r in reqs)
    assert all(isinstance(r.prompt_len, int) and isinstance(r.arrival_s, float) for r in reqs)


def test_closed_loop_chains():
    cfg = WorkloadConfig(kind="synthetic",
                         arrival={"process": "closed_loop", "users": 3, "think_time_s": 1.5})
    reqs = synthetic_requests(cfg, np.random.default_rng(0), 7, None)
    # users get 3, 2, 2 requests, listed user by user
    assert [r.after for r in reqs] == [-1, 0, 1, -1, 3, -1, 5]
    assert [r.think_s for r in reqs] == [0.0, 1.5, 1.5, 0.0, 1.5, 0.0, 1.5]
    assert all(r.arrival_s == 0.0 for r in reqs)


def test_closed_loop_fewer_requests_than_users():
    cfg = WorkloadConfig(kind="synthetic", arrival={"process": "closed_loop", "users": 8})
    reqs = synthetic_requests(cfg, np.random.default_rng(0), 3, None)
    assert [r.after for r in reqs] == [-1, -1, -1]


def test_closed_loop_needs_request_cap():
    cfg = WorkloadConfig(kind="synthetic", arrival={"process": "closed_loop"})
    with pytest.raises(KvsimError, match="closed_loop needs simulation.requests"):
        synthetic_requests(cfg, np.random.default_rng(0), None, 60.0)


def test_deterministic():
    cfg = WorkloadConfig(kind="synthetic")
    a = synthetic_requests(cfg, np.random.default_rng(9), 200, None)
    b = synthetic_requests(cfg, np.random.default_rng(9), 200, None)
    assert a == b
