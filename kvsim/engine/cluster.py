"""The fleet: replica pools behind routers, and the KV hand-off from prefill to decode replicas (P/D).

A request goes to a mixed or prefill replica chosen by the router (kvsim/engine/router.py) from
ReplicaViews. On a prefill replica its prefill runs; its KV is then held there (Scheduler.held) and the
request is handed to a decode replica chosen by the decode router. The decode replica admits it when it has
blocks for the whole prompt; its KV comes over a timed link (kvsim/kvcache/links.py): the prefill replica's
NIC and the decode replica's, FCFS, at the slower one's bandwidth. after_prefill: the transfer starts when
the decode replica has admitted it (the pull of vLLM's NixlConnector); layerwise: it streams during the last
prefill iteration, layer by layer (Mooncake, DistServe), and the decode replica finds it in its receive
buffer. The decode replica computes the last prompt token for the first output token once the KV has
arrived, so TTFT = prefill + transfer + one decode-replica step, as vLLM's disaggregated serving reports
it. The prefill replica frees the KV when it has arrived.
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from kvsim.engine.deployment import Deployment
from kvsim.engine.group import PREFILL, WAITING, Group
from kvsim.engine.replica import Replica
from kvsim.engine.replica_view import ReplicaView
from kvsim.engine.router import build_router
from kvsim.kvcache.links import Link, TierLinks, transfer_on
from kvsim.kvcache.tiers import Tier
from kvsim.metrics.recorder import Recorder
from kvsim.scenario import DEFAULT_ROUTER
from kvsim.workload.request import Request


class Cluster:
    """Every replica of every pool, the routers, and the P/D links (module docstring).

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
        for d in deployments:
            check = d.sc.kv.check_invariants
            for _ in range(d.replicas):
                sched, links = d.new_scheduler(self.shared_tiers, memos)
                i = len(self.replicas)
                self.replicas.append(Replica(i, env, sched, d.cost, recorder, self._finished, check=check,
                                             extra_columns=extra_columns(sched), role=d.role, exact=exact))
                self.deployment_of.append(d)
                self.tier_links.append(links)
        self.views = [ReplicaView(i, self.deployment_of[i].name, self.deployment_of[i].role, rep.sched)
                      for i, rep in enumerate(self.replicas)]
        self.front = [i for i, d in enumerate(self.deployment_of) if d.role != "decode"]
        self.decode = [i for i, d in enumerate(self.deployment_of) if d.role == "decode"]
        self.disaggregated = bool(self.decode)
        # per stage, each pool with its replicas' indices and views (candidates are chosen per pool)
        self._front_pools = self._pools(lambda d: d.role != "decode")
        self._decode_pools = self._pools(lambda d: d.role == "decode")
        rc = DEFAULT_ROUTER if scenario.router is None else scenario.router
        self.router_cfg = rc
        seed = scenario.simulation.seed
        kw = {"load_weight": rc.load_weight, "load_metric": rc.load_metric, "store_weight": rc.store_weight}
        self.router = build_router(rc.policy, seed=seed, **kw)
        self.decode_router = build_router(rc.decode_policy, seed=seed + 1, **kw) if self.decode else None
        self.routed = [0] * len(self.replicas)
        self.transfer = scenario.cluster.kv_transfer if scenario.cluster is not None else None
        self.nic: dict[int, Link] = {}
        if self.disaggregated:
            self._build_links()
            for i in self.decode:
                self.replicas[i].sched.kv_transfer = (
                    _arrived if self.transfer.mode == "layerwise"
                    else lambda now, grp, tokens, d=i: self._pull(now, grp, tokens, d))

    # ----------------------------------------------------------------- P/D links
    def _build_links(self) -> None:
        """One NIC link per prefill and per decode replica: the per-GPU bandwidth x its GPUs."""
        t = self.transfer
        for i, d in enumerate(self.deployment_of):
            self.nic[i] = Link(f"{t.link}:{i}", d.nic_bandwidth(t), t.latency_s)

    def _kv_bytes(self, p: int, tokens: int) -> float:
        d = self.deployment_of[p]
        return tokens * d.capacity.kv_bytes_per_token * d.tp

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
        if self.replicas[g.replica].role == "prefill" and g.prefill_replica < 0 and g.output > 1:
            self._hand_off(g)
        else:
            self.on_done(g)

    def _hand_off(self, g: Group) -> None:
        p = g.replica
        idx, views, _ = self._candidates(g.req, self._decode_pools)
        d = idx[self.decode_router.route(g.req, views)]
        self.routed[d] += 1
        g.output = min(g.req.output_len, self.deployment_of[d].max_model_len - g.req.prompt_len)
        g.prefill_replica = p
        g.remote_tokens = g.prompt
        g.state = WAITING
        g.phase = PREFILL
        g.computed = 0
        g.chunk = 0
        g.generated = 0
        g.epoch += 1
        g.ready_s = 0.0
        if self.transfer.mode == "layerwise":
            self._stream(g, p, d)
        self.replicas[d].submit(g)

    def _stream(self, g: Group, p: int, d: int) -> None:
        """layerwise: the KV of all but the last prompt token, less what the decode replica's cache holds
        now, streams from the start of the prefill's last iteration; the last layer's share leaves when
        that iteration ends."""
        tokens = max(0, g.prompt - 1 - self.views[d].kv.hit_tokens(g.req, g.prompt))
        nbytes = self._kv_bytes(p, tokens)
        if nbytes == 0:
            self._arrive(g, p, 0.0, g.prefill_done_s, g.prefill_done_s)
            return
        links = (self.nic[p], self.nic[d])
        done = g.prefill_done_s
        _, end = transfer_on(links, done, nbytes, earliest=g.last_chunk_s)
        layers = max(1, self.deployment_of[p].model.num_layers)
        tail = done + max(x.latency for x in links) + nbytes / layers / min(x.bandwidth for x in links)
        if tail > end:
            for x in links:
                x.busy_until = max(x.busy_until, tail)
            end = tail
        self._arrive(g, p, nbytes, done, end)

    def _pull(self, now: float, g: Group, tokens: int, d: int) -> float:
        """after_prefill: decode replica d, having reserved blocks, pulls `tokens` tokens' KV."""
        p = g.prefill_replica
        nbytes = self._kv_bytes(p, tokens)
        if nbytes == 0:  # the decode replica's own cache had it all
            self._arrive(g, p, 0.0, now, now)
            return now
        _, end = transfer_on((self.nic[p], self.nic[d]), now, nbytes)
        self._arrive(g, p, nbytes, now, end)
        return end

    def _arrive(self, g: Group, p: int, nbytes: float, asked: float, end: float) -> None:
        g.kv_transfer_bytes = nbytes
        g.kv_arrival_s = end
        g.kv_transfer_s = end - max(asked, g.prefill_done_s)
        seq = g.seqs[0]
        env = self.env
        if end > env.now:
            env.timeout(end - env.now).callbacks.append(lambda _e: self._release(p, seq))
        else:
            self._release(p, seq)

    def _release(self, p: int, seq: int) -> None:
        rep = self.replicas[p]
        rep.sched.release(seq)
        rep.wake()

    # ----------------------------------------------------------------- reporting
    def describe(self) -> dict:
        """meta['fleet']: routers, pools, replicas (with requests routed to each) and the P/D links."""
        rc = self.router_cfg
        out = {
            "router": rc.policy,
            "decode_router": rc.decode_policy if self.decode else None,
            "pools": [d.describe() for d in self.deployments],
            "replicas": [{"index": i, "pool": d.name, "role": d.role, "hardware": d.hw.name,
                          "tensor_parallel_size": d.tp, "capacity_blocks": d.num_blocks,
                          "routed": self.routed[i]} for i, d in enumerate(self.deployment_of)],
            "kv_transfer": None,
        }
        if self.disaggregated:
            t = self.transfer
            nics = list(self.nic.values())
            out["kv_transfer"] = {
                "mode": t.mode, "link": t.link, "latency_s": t.latency_s,
                "bandwidth_bytes_per_s": {str(i): x.bandwidth for i, x in self.nic.items()},
                # every transfer occupies two NICs: count it once
                "transfers": sum(x.transfers for x in nics) // 2,
                "bytes": sum(x.bytes for x in nics) / 2,
                "busy_s": sum(x.busy_s for x in nics) / 2,
            }
        return out


def _arrived(now: float, g: Group, tokens: int) -> float:
    """layerwise: the KV was streamed at hand-off; it is there at kv_arrival_s."""
    return g.kv_arrival_s if g.kv_arrival_s > now else now
