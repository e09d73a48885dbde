"""Routers: which replica of a fleet serves a request (the names and one-line rules: kvsim/registry.py
ROUTERS; the exact rules: docs/fleet.md).

A router sees the candidates, ReplicaViews (kvsim/engine/fleet/replica_view.py) of the replicas of the
role the request needs, and returns a position in that list. It only reads the views: a KV lookup is a
peek (KVView.hit), so routing changes no cache, queue or request. One router serves one routing stage (the
fleet builds one for mixed / prefill replicas and one for decode replicas, kvsim/engine/fleet/cluster.py):
its rotation and affinity state assumes the same candidates call after call.

Ties rotate: among tied positions a router takes the first one after the position it chose last,
cyclically (the first call starts at position 0), so an idle fleet is filled evenly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from kvsim.engine.fleet.replica_view import ReplicaView
from kvsim.scenario import DEFAULT_ROUTER
from kvsim.workload.request import Request

LOAD_METRICS = {
    "queue": "waiting + running requests (ReplicaView.load)",
    "kv": "share of the KV pool referenced by sequences (ReplicaView.kv_usage)",
}
SCORE_TIE = 1e-9
"""prefix_aware / store_aware: scores this close count as tied (float rounding of equal trades)."""


class Router(Protocol):
    """Chooses a replica for each request: `route` returns a position in `replicas` (the candidates)
    and changes nothing it is given."""

    name: str

    def route(self, r: Request, replicas: Sequence[ReplicaView]) -> int: ...


def _loads(replicas: Sequence[ReplicaView], metric: str) -> list[float]:
    if metric == "kv":
        return [v.kv_usage for v in replicas]
    return [v.load for v in replicas]


class _Rotation:
    """The tie rule (module docstring): remembers the last position chosen."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = -1

    def pick(self, tied: list[int]) -> int:
        """The first of `tied` (ascending positions) after the last choice, cyclically."""
        last = self.last
        p = tied[0]
        for q in tied:  # (a loop, not next() over a generator: once per request)
            if q > last:
                p = q
                break
        self.last = p
        return p

    def least_loaded(self, replicas: Sequence[ReplicaView], metric: str) -> int:
        loads = _loads(replicas, metric)
        low = min(loads)
        return self.pick([p for p, x in enumerate(loads) if x == low])


class RoundRobinRouter:
    """Positions 0, 1, 2, ... in arrival order (a call counter, modulo the candidates at each call)."""

    __slots__ = ("_calls",)
    name = "round_robin"
    OPTIONS: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._calls = 0

    def route(self, r: Request, replicas: Sequence[ReplicaView]) -> int:
        i = self._calls
        self._calls = i + 1
        return i % len(replicas)


class RandomRouter:
    """A uniformly random position (numpy Generator seeded by [seed, 0x5EED])."""

    __slots__ = ("_rng",)
    name = "random"
    OPTIONS = ("seed",)

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng([seed, 0x5EED])

    def route(self, r: Request, replicas: Sequence[ReplicaView]) -> int:
        return int(self._rng.integers(len(replicas)))


class LeastLoadedRouter:
    """The lowest load (queue: waiting + running requests; kv: KV usage); ties rotate."""

    __slots__ = ("metric", "_rot")
    name = "least_loaded"
    OPTIONS = ("load_metric",)

    def __init__(self, load_metric: str = "queue") -> None:
        self.metric = load_metric
        self._rot = _Rotation()

    def route(self, r: Request, replicas: Sequence[ReplicaView]) -> int:
        return self._rot.least_loaded(replicas, self.metric)


class PowerOfTwoRouter:
    """Two distinct random positions (seeded by [seed, 0x2C40]); the less loaded wins, a tie the first
    drawn. One candidate: position 0."""

    __slots__ = ("metric", "_rng")
    name = "power_of_two"
    OPTIONS = ("seed", "load_metric")

    def __init__(self, seed: int = 0, load_metric: str = "queue") -> None:
        self.metric = load_metric
        self._rng = np.random.default_rng([seed, 0x2C40])

    def route(self, r: Request, replicas: Sequence[ReplicaView]) -> int:
        n = len(replicas)
        if n == 1:
            return 0
        a = int(self._rng.integers(n))
        b = int(self._rng.integers(n - 1))
        b += b >= a  # uniform over the positions other than a
        la, lb = _loads((replicas[a], replicas[b]), self.metric)
        return b if lb < la else a


class SessionAffinityRouter:
    """Every request of a session (chat session, agent episode; a request without one is its own) to the
    replica its first went to, chosen as least_loaded does. Remembers replica indices, not positions; when
    the remembered replica is not among the candidates, chooses anew and remembers that one."""

    __slots__ = ("metric", "_home", "_rot")
    name = "session_affinity"
    OPTIONS = ("load_metric",)

    def __init__(self, load_metric: str = "queue") -> None:
        self.metric = load_metric
        self._home: dict[int, int] = {}  # session key -> replica index
        self._rot = _Rotation()

    def route(self, r: Request, replicas: Sequence[ReplicaView]) -> int:
        key = r.session if r.session >= 0 else r.rid
        home = self._home.get(key)
        if home is not None:
            for p, v in enumerate(replicas):
                if v.index == home:
                    return p
        p = self._rot.least_loaded(replicas, self.metric)
        self._home[key] = replicas[p].index
        return p


class PrefixAwareRouter:
    """The best trade of cached prefix against load: score = overlap - load_weight x load_frac, overlap =
    prompt share the replica's own tiers (gpu, cpu, ssd) would serve, load_frac = load / the candidates'
    highest load (queue) or KV usage (kv). Highest score wins; ties: lower load, then rotation."""

    __slots__ = ("metric", "load_weight", "remote_weight", "_rot")
    name = "prefix_aware"
    OPTIONS = ("load_metric", "load_weight")

    def __init__(self, load_metric: str = "queue", load_weight: float = 1.0) -> None:
        self.metric = load_metric
        self.load_weight = load_weight
        self.remote_weight = 0.0  # weight of the shared store's ("remote" tier) tokens in the overlap
        self._rot = _Rotation()

    def _overlap(self, r: Request, v: ReplicaView) -> float:
        if r.prompt_len <= 0:
            return 0.0
        local = v.kv.local_hit_tokens(r)
        remote = 0
        if local is not None:  # (all on the GPU: no Hit to build and read)
            return (local + self.remote_weight * remote) / r.prompt_len
        local = 0
        for tier, n in v.kv.hit(r).by_tier:
            if tier == "remote":
                remote += n
            else:
                local += n
        return (local + self.remote_weight * remote) / r.prompt_len

    def route(self, r: Request, replicas: Sequence[ReplicaView]) -> int:
        loads = _loads(replicas, self.metric)
        if self.metric == "kv":
            fracs = loads
        else:
            top = max(loads)
            fracs = [x / top for x in loads] if top > 0 else [0.0] * len(loads)
        w = self.load_weight
        # Peek the least loaded first; an overlap is at most `bound` (hit tokens < prompt tokens), so once
        # bound - w x load_frac falls below the tie band of the best score so far, no replica left (more
        # loaded) can reach it: their caches are not read. Same choice as scoring every replica.
        bound = max(1.0, self.remote_weight)
        n = len(replicas)
        order = sorted(range(n), key=fracs.__getitem__) if w > 0 else range(n)
        scores: list[float | None] = [None] * n
        best = -math.inf
        for p in order:
            wf = w * fracs[p]
            if bound - wf < best - SCORE_TIE:
                break
            s = self._overlap(r, replicas[p]) - wf
            scores[p] = s
            if s > best:
                best = s
        cut = best - SCORE_TIE
        tied = []
        low = math.inf
        for p in range(n):
            s = scores[p]
            if s is not None and s >= cut:
                tied.append(p)
                if loads[p] < low:
                    low = loads[p]
        return self._rot.pick([p for p in tied if loads[p] == low])


class StoreAwareRouter(PrefixAwareRouter):
    """prefix_aware whose overlap also counts the shared store's ("remote" tier) tokens, at store_weight:
    every replica can load them, at a cost."""

    __slots__ = ()
    name = "store_aware"
    OPTIONS = ("load_metric", "load_weight", "store_weight")

    def __init__(self, load_metric: str = "queue", load_weight: float = 1.0,
                 store_weight: float = 0.5) -> None:
        super().__init__(load_metric, load_weight)
        self.remote_weight = store_weight


class LoraAffinityRouter:
    """Multi-LoRA (docs/lora.md): a request with an adapter goes to a replica holding it in a GPU slot,
    else to one holding it in host memory, else to any (ReplicaView.lora_adapter); among those, the least
    loaded, ties rotating. A replica whose running requests already hold max_loras other adapters
    (ReplicaView.lora_admissible false: vLLM would skip the request there) ranks after every other one,
    whatever it holds. A base-model request: least_loaded."""

    __slots__ = ("metric", "_rot")
    name = "lora_affinity"
    OPTIONS = ("load_metric",)

    def __init__(self, load_metric: str = "queue") -> None:
        self.metric = load_metric
        self._rot = _Rotation()

    def route(self, r: Request, replicas: Sequence[ReplicaView]) -> int:
        if r.adapter < 0:
            return self._rot.least_loaded(replicas, self.metric)
        where = [v.lora_adapter(r.adapter) + (0 if v.lora_admissible(r.adapter) else 3) for v in replicas]
        best = min(where)
        loads = _loads(replicas, self.metric)
        low = min(loads[p] for p, w in enumerate(where) if w == best)
        return self._rot.pick([p for p, w in enumerate(where) if w == best and loads[p] == low])


ROUTER_CLASSES: dict[str, type] = {
    c.name: c
    for c in (RoundRobinRouter, RandomRouter, LeastLoadedRouter, PowerOfTwoRouter, SessionAffinityRouter,
              PrefixAwareRouter, StoreAwareRouter, LoraAffinityRouter)
}
"""The router of each kvsim/registry.py ROUTERS name."""


def build_router(policy: str, *, seed: int, load_weight: float = DEFAULT_ROUTER.load_weight,
                 load_metric: str = DEFAULT_ROUTER.load_metric,
                 store_weight: float = DEFAULT_ROUTER.store_weight) -> Router:
    """The router `policy` names (registry.ROUTERS), given the options it uses; deterministic given seed."""
    cls = ROUTER_CLASSES.get(policy)
    if cls is None:
        raise ValueError(f"unknown router {policy!r}; known: {', '.join(ROUTER_CLASSES)}")
    if load_metric not in LOAD_METRICS:
        raise ValueError(f"unknown router load metric {load_metric!r}; known: {', '.join(LOAD_METRICS)}")
    opts = {"seed": seed, "load_weight": load_weight, "load_metric": load_metric,
            "store_weight": store_weight}
    return cls(**{k: opts[k] for k in cls.OPTIONS})
