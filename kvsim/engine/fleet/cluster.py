"""The fleet: replica pools behind routers, and the prefill -> decode hand-off (P/D).

A request goes to a replica of a `front` role (mixed, prefill: kvsim/engine/fleet/roles.py) chosen by
the router (kvsim/engine/fleet/router.py) from ReplicaViews. A replica whose role hands its finished prefills
off (prefill) keeps their KV (its scheduler's HandOff) and the request goes to a decode replica chosen by
the decode router; the transfer is timed in kvsim/engine/fleet/handoff.py (KVTransfer).
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from kvsim.engine.fleet.deployment import Deployment
from kvsim.engine.fleet.handoff import KVTransfer
from kvsim.engine.fleet.replica_view import ReplicaView
from kvsim.engine.fleet.roles import role_report
from kvsim.engine.fleet.router import build_router
from kvsim.engine.group import Group
from kvsim.engine.replica import Replica
from kvsim.kvcache.links import TierLinks
from kvsim.kvcache.tiers import Tier
from kvsim.metrics.recorder import Recorder
from kvsim.scenario import DEFAULT_ROUTER
from kvsim.workload.request import Request

_BLIND_ROUTERS = frozenset(("round_robin", "random", "least_loaded", "power_of_two", "session_affinity"))
"""Routers whose choice among one replica changes nothing anyone reads (their own counters and draws)."""


class Cluster:
    """Every replica of every pool, the routers, and the P/D transfer (module docstring).

    `on_done(g)` is called once per request, when it has finished where its output is produced (a mixed
    or decode replica). `extra_columns(sched)` gives a replica's timeline column values."""

    def __init__(self, env: simpy.Environment, deployments: list[Deployment], scenario, recorder: Recorder,
                 on_done: Callable[[Group], None],
                 extra_columns: Callable[[object], Callable[[], tuple] | None]) -> None:
        self.env = env
        self.deployments = deployments
        self.on_done = on_done
        self.replicas: list[Replica] = []
        self.deployment_of: list[Deployment] = []
        self.tier_links: list[TierLinks | None] = []
        self.shared_tiers: dict[str, Tier] = {}
        memos: dict | None = {} if sum(d.replicas for d in deployments) > 1 else None
        exact = scenario.simulation.exact_stepping
        self.deployment_of = [d for d in deployments for _ in range(d.replicas)]
        self.front = [i for i, d in enumerate(self.deployment_of) if d.role.front]
        self.decode = [i for i, d in enumerate(self.deployment_of) if not d.role.front]
        self.disaggregated = any(d.role.receives_kv for d in deployments)
        self.transfer = (KVTransfer(env, self.replicas, self.deployment_of, scenario.cluster.kv_transfer)
                         if self.disaggregated else None)
        # (a fleet that hands nothing off: a replica's finished request goes to on_done directly)
        finished = self._finished if any(d.role.sends_kv for d in deployments) else on_done
        for i, d in enumerate(self.deployment_of):
            receive = self.transfer.receiver(i) if d.role.receives_kv else None
            sched, links = d.new_scheduler(self.shared_tiers, memos, receive)
            self.replicas.append(Replica(i, env, sched, d.cost, recorder, finished,
                                         check=d.sc.kv.check_invariants, extra_columns=extra_columns(sched),
                                         role=d.role.name, exact=exact))
            self.tier_links.append(links)
        self.views = [ReplicaView(i, self.deployment_of[i].name, self.deployment_of[i].role.name, rep.sched)
                      for i, rep in enumerate(self.replicas)]
        # per stage, each pool with its replicas' indices and views (candidates are chosen per pool)
        self._front_pools = self._pools(lambda d: d.role.front)
        self._decode_pools = self._pools(lambda d: not d.role.front)
        rc = DEFAULT_ROUTER if scenario.router is None else scenario.router
        self.router_cfg = rc
        seed = scenario.simulation.seed
        kw = {"load_weight": rc.load_weight, "load_metric": rc.load_metric, "store_weight": rc.store_weight}
        self.router = build_router(rc.policy, seed=seed, **kw)
        self.decode_router = build_router(rc.decode_policy, seed=seed + 1, **kw) if self.decode else None
        self.routed = [0] * len(self.replicas)
        # one replica behind a router whose choice reads nothing: route() asks its pool only
        self._only = (self.deployments[0] if len(self.replicas) == 1 and self.front == [0]
                      and not self.disaggregated and rc.policy in _BLIND_ROUTERS else None)

    # ----------------------------------------------------------------- routing
    def _pools(self, keep: Callable[[Deployment], bool]) -> list[tuple[Deployment, list[int], list]]:
        out = []
        for d in self.deployments:
            if keep(d):
                idx = [i for i, x in enumerate(self.deployment_of) if x is d]
                out.append((d, idx, [self.views[i] for i in idx]))
        return out

    @staticmethod
    def _candidates(r: Request, pools: list[tuple[Deployment, list[int], list]]
                    ) -> tuple[list[int], list[ReplicaView], str | None]:
        """The replicas of `pools` whose pool accepts r (indices and views, fleet order) and the first
        refusal (None if none refused)."""
        accepted = []
        reason = None
        for pool in pools:
            why = pool[0].reject_reason(r)
            if why is None:
                accepted.append(pool)
            elif reason is None:
                reason = why
        if len(accepted) == 1:
            return accepted[0][1], accepted[0][2], reason
        return [i for p in accepted for i in p[1]], [v for p in accepted for v in p[2]], reason

    def route(self, r: Request) -> tuple[int, str | None]:
        """The replica r goes to and, if the fleet refuses it, why (then the index is where it is
        recorded)."""
        only = self._only
        if only is not None:
            reason = only.reject_reason(r)
            if reason is None:
                self.routed[0] += 1
            return 0, reason
        idx, views, reason = self._candidates(r, self._front_pools)
        if self.disaggregated:
            decode_idx, _, decode_reason = self._candidates(r, self._decode_pools)
            if not decode_idx:
                return self.front[0], decode_reason
        if not idx:
            return self.front[0], reason
        i = idx[self.router.route(r, views)]
        self.routed[i] += 1
        return i, None

    def submit(self, g: Group, replica: int) -> None:
        self.replicas[replica].submit(g)

    # ----------------------------------------------------------------- completion and hand-off
    def _finished(self, g: Group) -> None:
        # a prefill replica's request goes on to a decode replica, unless its one token is made there (or
        # it came back from one)
        if self.deployment_of[g.replica].role.sends_kv and g.output > 1 and g.prefill_replica < 0:
            self._hand_off(g)
        else:
            self.on_done(g)

    def _hand_off(self, g: Group) -> None:
        idx, views, _ = self._candidates(g.req, self._decode_pools)
        d = idx[self.decode_router.route(g.req, views)]
        self.routed[d] += 1
        self.transfer.hand_off(g, d, lambda: self.views[d].kv.hit_tokens(g.req, g.prompt))

    # ----------------------------------------------------------------- reporting
    def describe(self) -> dict:
        """meta['fleet']: routers, pools, replicas (with requests routed to each) and the P/D links."""
        rc = self.router_cfg
        out = {
            "router": rc.policy,
            "decode_router": rc.decode_policy if self.decode else None,
            "pools": [d.describe() for d in self.deployments],
            "replicas": [{"index": i, "pool": d.name, "role": d.role.name, "hardware": d.hw.name,
                          "tensor_parallel_size": d.tp, "capacity_blocks": d.num_blocks,
                          "routed": self.routed[i]} for i, d in enumerate(self.deployment_of)],
            "kv_transfer": self.transfer.describe() if self.transfer is not None else None,
            "roles": role_report(),
        }
        return out

