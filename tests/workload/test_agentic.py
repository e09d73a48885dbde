"""kind: agentic: every step re-sends the growing episode, tool times, forks, limits."""

import numpy as np
import pytest

from kvsim.errors import KvsimError
from kvsim.workload import agentic as agentic_module
from kvsim.workload import links
from kvsim.workload.agentic import AGENT_SCAFFOLD_ID_BASE, AGENT_TASK_ID_BASE
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.factory import build_requests


def agentic(**agent):
    base = {"scaffold_len": {"dist": "fixed", "value": 1000}, "task_len": {"dist": "fixed", "value": 50},
            "tool_output_len": {"dist": "fixed", "value": 30}, "tool_time_s": 1.5, "fork_prob": 0.0}
    return WorkloadConfig.model_validate({"kind": "agentic", "output_len": {"dist": "fixed", "value": 20},
                                          "agentic": {**base, **agent}})


def test_steps_resend_the_growing_episode():
    cfg = agentic(steps={"dist": "fixed", "value": 3}, scaffolds=1)
    reqs = build_requests(cfg, np.random.default_rng(0), 6)
    assert [r.after for r in reqs] == [-1, 0, 1, -1, 3, 4]
    assert [r.think_s for r in reqs] == [0.0, 1.5, 1.5, 0.0, 1.5, 1.5]
    # step k prompt: scaffold 1000 + task 50 + k * (call 20 + tool output 30)
    assert [r.prompt_len for r in reqs[:3]] == [1050, 1100, 1150]
    s0, s1, s2 = reqs[:3]
    assert s0.segments == ((AGENT_SCAFFOLD_ID_BASE, 1000), (AGENT_TASK_ID_BASE, 50))
    assert s1.segments[:2] == s0.segments and s1.segments[2] == (s0.output_id, 20)
    assert s2.segments[:4] == s1.segments and s2.segments[4] == (s1.output_id, 20)
    assert reqs[3].segments[0] == s0.segments[0] and reqs[3].segments[1] == (AGENT_TASK_ID_BASE + 1, 50)
    assert all(r.session == (0 if i < 3 else 1) for i, r in enumerate(reqs))
    assert all(r.arrival_s == reqs[3].arrival_s for r in reqs[3:])  # the episode start, a placeholder


def test_fork_fans_a_call_out_to_two_tool_outputs():
    """3 steps, fork after every step, at most 2 branches: step 0 forks; branch A runs steps 1 and 2,
    then branch B (another tool output for call 0) runs its steps 1 and 2."""
    cfg = agentic(steps={"dist": "fixed", "value": 3}, fork_prob=1.0, max_branches=2)
    reqs = build_requests(cfg, np.random.default_rng(0), 5)
    assert [r.after for r in reqs] == [-1, 0, 1, 0, 3]
    a1, b1 = reqs[1], reqs[3]
    assert a1.segments[:3] == b1.segments[:3]  # scaffold, task, call 0
    assert a1.segments[3] != b1.segments[3] and a1.prompt_len == b1.prompt_len == 1100


def test_branches_stop_at_max_context_and_unfit_episodes_are_an_error():
    reqs = build_requests(agentic(steps={"dist": "fixed", "value": 10}, max_context=1160),
                          np.random.default_rng(0), 20)
    assert max(r.prompt_len for r in reqs) <= 1160 and [r.prompt_len for r in reqs[:4]] == [1050, 1100,
                                                                                            1150, 1050]
    with pytest.raises(KvsimError, match="workload.agentic.max_context"):
        build_requests(agentic(max_context=500), np.random.default_rng(0), 20)


def test_closed_loop_users_run_episodes_back_to_back():
    cfg = agentic(steps={"dist": "fixed", "value": 2})
    cfg.arrival.process = "closed_loop"
    cfg.arrival.users = 2
    cfg.arrival.think_time_s = 7.0
    reqs = build_requests(cfg, np.random.default_rng(0), 8)
    # episodes 0, 2 (user 0) then 1, 3 (user 1); an episode's first step follows the previous episode
    assert [r.after for r in reqs] == [-1, 0, 1, 2, -1, 4, 5, 6]
    assert [r.think_s for r in reqs] == [0.0, 1.5, 7.0, 1.5, 0.0, 1.5, 7.0, 1.5]
    assert all(r.arrival_s == 0 for r in reqs)


def test_request_cap_and_determinism():
    cfg = agentic(fork_prob=0.3)
    a = build_requests(cfg, np.random.default_rng(5), 57)
    assert len(a) == 57 and a == build_requests(cfg, np.random.default_rng(5), 57)
    assert all(r.after < r.rid for r in a)
    assert [r.rid for r in a] == list(range(57))


def test_an_episode_too_long_to_hold_is_an_error_not_a_hang(monkeypatch):
    # steps of 1 + 1 tokens under a 10^9-token context would run ~5e8 steps, each re-sending the episode
    monkeypatch.setattr(agentic_module, "MAX_SEGMENTS", 10_000)
    monkeypatch.setattr(links, "MAX_SEGMENTS", 10_000)
    cfg = agentic(steps={"dist": "fixed", "value": 10**8}, max_context=10**9,
                  tool_output_len={"dist": "fixed", "value": 1})
    # step k lists 2 + 2k segments: the sum passes 10,000 at the 100th step (2 + 4 + ... + 200 = 10,100)
    with pytest.raises(KvsimError, match=r"^workload\.agentic\.steps: the prompts would list 10,100 "
                                         r"segments"):
        build_requests(cfg, np.random.default_rng(0), 10)


def test_too_many_steps_is_an_error(monkeypatch):
    monkeypatch.setattr(agentic_module, "MAX_REQUESTS", 50)
    cfg = agentic(steps={"dist": "fixed", "value": 60}, max_context=10**6)
    with pytest.raises(KvsimError, match=r"^workload\.agentic\.steps: the workload draws 51 requests, more "
                                         r"than the 50 one run may generate"):
        build_requests(cfg, np.random.default_rng(0), 10)
