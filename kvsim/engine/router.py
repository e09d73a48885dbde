"""Routers choose the replica for each new (open-loop) request; follow-ups stay on their parent's."""

from __future__ import annotations

from kvsim.workload.request import Request


class RoundRobinRouter:
    """Replica i, i+1, ... in arrival order."""

    name = "round_robin"

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self._next = 0

    def route(self, r: Request) -> int:
        i = self._next
        self._next = (i + 1) % self.replicas
        return i
