"""`kind: agentic`: multi-step agent episodes over a shared tool scaffold.

An episode picks scaffold i (a block of tool descriptions; 0-based popularity rank) with probability
proportional to 1/(i+1)^zipf_s, gets a task of `task_len` tokens and runs `steps` model calls. Step k's
prompt re-sends the whole episode so far:

    (scaffold i) (task) (call 0) (tool output 0) ... (call k-1) (tool output k-1)

Each step's output (`workload.output_len` tokens) is its tool call, appended to the next step's prompt
with the tool's output (`tool_output_len`); the next step is released `tool_time_s` after the step
completes. After a step that is not the last, with probability `fork_prob` the episode forks (up to
`max_branches` branches): the call fans out to a second tool output, and a new branch runs the remaining
steps from there, sharing the history up to and including the call. A branch ends before a step whose
prompt would exceed `max_context` tokens; an episode whose first prompt does not fit is dropped.

Parallel episodes: open loop, episodes start at the arrival process's times (`rate` is episodes per
second) and overlap freely; closed loop, episode j is run by user j % users, each user's episodes back to
back (`arrival.think_time_s` apart, the next episode following the previous episode's last-listed step).

Order: episode after episode (closed loop: user after user), each episode's steps in creation order, so
every step comes after the step it follows (after = that step's rid; arrival_s = the episode start as a
placeholder). `max_requests` keeps the first requests in episode order.

Content ids: scaffold i is AGENT_SCAFFOLD_ID_BASE + i, the task of episode e AGENT_TASK_ID_BASE + e, calls
and tool outputs AGENT_STEP_ID_BASE + a counter; a step's `output_id` is its call's id, so the KV it
generates matches the next step's prompt.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np

from kvsim.errors import KvsimError
from kvsim.schema import MAX_REQUESTS, MAX_SEGMENTS
from kvsim.workload.chat import zipf_weights
from kvsim.workload.config import LengthDist, WorkloadConfig
from kvsim.workload.lengths import sample_lengths, sample_values
from kvsim.workload.links import check_requests, check_segments, session_starts
from kvsim.workload.request import Request

AGENT_SCAFFOLD_ID_BASE = 7 << 40
AGENT_TASK_ID_BASE = 8 << 40
AGENT_STEP_ID_BASE = 12 << 40


class _Draws:
    """Sequential draws from one distribution, taken from the rng in chunks."""

    __slots__ = ("dist", "rng", "base_dir", "real", "_buf", "_i")

    def __init__(self, dist: LengthDist | float | None, rng: np.random.Generator,
                 base_dir: str | Path | None, real: bool = False) -> None:
        self.dist, self.rng, self.base_dir, self.real = dist, rng, base_dir, real
        self._buf: list = []
        self._i = 0

    def next(self):
        if self._i == len(self._buf):
            d = self.dist
            if d is None:
                self._buf = self.rng.random(1024).tolist()
            elif self.real:
                self._buf = sample_values(d, self.rng, 1024, self.base_dir).tolist()
            else:
                self._buf = sample_lengths(d, self.rng, 1024, self.base_dir).tolist()
            self._i = 0
        self._i += 1
        return self._buf[self._i - 1]


class _Episodes:
    """Builds episodes step by step; a step is (segments, prompt_len, output_len, output_id, parent
    index in the episode or -1, think_s)."""

    def __init__(self, cfg: WorkloadConfig, rng: np.random.Generator, base_dir: str | Path | None) -> None:
        ag = cfg.agentic
        self.ag = ag
        self.out = _Draws(cfg.output_len, rng, base_dir)
        self.tool = _Draws(ag.tool_output_len, rng, base_dir)
        self.fork = _Draws(None, rng, base_dir)
        const = isinstance(ag.tool_time_s, (int, float))
        self.time = None if const else _Draws(ag.tool_time_s, rng, base_dir, real=True)
        self.const_time = float(ag.tool_time_s) if const else 0.0
        self.piece = 0
        self.made = 0  # steps generated so far, all episodes
        self.refs = 0  # segments their prompts list

    def _id(self) -> int:
        self.piece += 1
        return AGENT_STEP_ID_BASE + self.piece - 1

    def _think(self) -> float:
        return self.const_time if self.time is None else self.time.next()

    def _count(self, segments: int) -> None:
        self.made += 1
        self.refs += segments
        if self.made > MAX_REQUESTS:
            check_requests(self.made, "workload.agentic.steps", MAX_REQUESTS)
        if self.refs > MAX_SEGMENTS:
            check_segments(self.refs, "workload.agentic.steps")

    def episode(self, head: list[tuple[int, int]], n_steps: int) -> list[tuple]:
        ag = self.ag
        steps: list[tuple] = []
        branches = deque([(head, sum(n for _, n in head), 0, -1, 0.0)])
        n_branches = 1
        while branches:
            hist, tokens, k, parent, think = branches.popleft()
            while k < n_steps and tokens <= ag.max_context:
                o = self.out.next()
                call = (self._id(), o)
                idx = len(steps)
                steps.append((tuple(hist), tokens, o, call[0], parent, think))
                self._count(len(hist))
                if k == n_steps - 1:
                    break
                tool = (self._id(), self.tool.next())
                if n_branches < ag.max_branches and self.fork.next() < ag.fork_prob:
                    other = (self._id(), self.tool.next())
                    branches.append(([*hist, call, other], tokens + o + other[1], k + 1, idx, self._think()))
                    n_branches += 1
                hist, tokens, k, parent, think = [*hist, call, tool], tokens + o + tool[1], k + 1, idx, \
                    self._think()
        return steps


def agentic_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                     duration_s: float | None, base_dir: str | Path | None = None) -> list[Request]:
    """The agentic request stream (see the module docstring)."""
    ag = cfg.agentic
    closed = cfg.arrival.process == "closed_loop"
    starts = session_starts(cfg.arrival, rng, max_requests, duration_s)
    n_ep = len(starts)
    scaffold_len = sample_lengths(ag.scaffold_len, rng, ag.scaffolds, base_dir).tolist()
    scaffold = rng.choice(ag.scaffolds, size=n_ep, p=zipf_weights(ag.scaffolds, ag.zipf_s)).tolist()
    task_len = sample_lengths(ag.task_len, rng, n_ep, base_dir).tolist()
    n_steps = sample_lengths(ag.steps, rng, n_ep, base_dir).tolist()
    maker = _Episodes(cfg, rng, base_dir)
    episodes: list[tuple[int, list[tuple]]] = []
    total = 0
    for e in range(n_ep):
        head = [(AGENT_SCAFFOLD_ID_BASE + scaffold[e], scaffold_len[scaffold[e]]),
                (AGENT_TASK_ID_BASE + e, task_len[e])]
        steps = maker.episode(head, n_steps[e])
        if not steps:
            continue
        if max_requests is not None and total + len(steps) > max_requests:
            steps = steps[: max_requests - total]
        episodes.append((e, steps))
        total += len(steps)
        if max_requests is not None and total >= max_requests:
            break
    if not episodes:
        raise KvsimError(f"workload.agentic.max_context: no episode's first prompt fits in "
                         f"{ag.max_context} tokens")
    if closed:
        users = cfg.arrival.users
        episodes.sort(key=lambda ep: ep[0] % users)  # stable: each user's episodes in order
    return _build(cfg, episodes, starts, closed)


def _build(cfg: WorkloadConfig, episodes: list[tuple[int, list[tuple]]], starts: np.ndarray,
           closed: bool) -> list[Request]:
    out: list[Request] = []
    users = cfg.arrival.users
    prev_user, prev_last = -1, -1
    for number, (e, steps) in enumerate(episodes):
        base = len(out)
        start = 0.0 if closed else float(starts[e])
        user = e % users if closed else -1
        for segs, prompt, o, out_id, parent, think in steps:
            after, wait = base + parent, think
            if parent < 0:
                follows = closed and user == prev_user
                after, wait = (prev_last, cfg.arrival.think_time_s) if follows else (-1, 0.0)
            out.append(Request(rid=len(out), arrival_s=start, prompt_len=prompt, output_len=o, n=cfg.n,
                               segments=segs, session=number, after=after, think_s=wait, source="agentic",
                               output_id=out_id))
        prev_user, prev_last = user, len(out) - 1
    return out
