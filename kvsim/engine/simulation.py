"""Wires a scenario into a simpy run: pools (deployments) -> fleet (cluster) -> workload -> recorder."""

from __future__ import annotations

import difflib
import gc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvsim import __version__
from kvsim.engine import sparse_columns, tier_columns
from kvsim.engine.client_gate import CLIENT_COLUMNS, ClientGate
from kvsim.engine.clock import Clock
from kvsim.engine.fleet import pd_columns
from kvsim.engine.fleet.cluster import Cluster
from kvsim.engine.fleet.deployment import Deployment
from kvsim.engine.group import Group
from kvsim.engine.replica import Replica
from kvsim.engine.request_flow import RequestFlow
from kvsim.engine.scheduler import Scheduler
from kvsim.errors import KvsimError
from kvsim.metrics.recorder import Recorder
from kvsim.metrics.run_tables import TableFrames
from kvsim.scenario import (
    MAX_GPU_BLOCKS,
    Pricing,
    Scenario,
    cross_check,
    lora_config,
    pool_scenarios,
    scenario_dict,
)
from kvsim.specs.hardware import list_hardware
from kvsim.workload.factory import build_request_stream
from kvsim.workload.request import FollowUps, Request, RequestTable


@dataclass(slots=True)
class SimResult(TableFrames):
    """What one run produced: per-request rows, per-iteration rows and run metadata. `tables` holds the
    rows as the recorder left them (RunTables, kvsim/metrics/run_tables.py); `requests` and `timeline`
    are their pandas DataFrames, built on first use (`kvsim run` never builds them)."""

    tables: Any
    meta: dict[str, Any]


class Simulation:
    """One simulated serving deployment for one scenario. `run()` executes it once.

    A fleet of pools (kvsim.scenario.pool_scenarios, one Deployment each) behind routers
    (kvsim/engine/fleet/cluster.py). The attributes of one replica configuration (capacity, num_blocks, ...)
    are the first pool's."""

    def __init__(self, scenario: Scenario, progress: Callable[[int, int], None] | None = None) -> None:
        self.sc = scenario
        self.progress = progress
        problem = cross_check(scenario)  # load_scenario checked it already; a Scenario built directly did not
        if problem is not None:
            raise KvsimError(problem)
        self._new_deployments()
        self._runs = 0
        first = self.deployments[0]
        self.model = first.model
        self.hw = first.hw
        self.capacity = first.capacity
        self.num_blocks = first.num_blocks
        self.bytes_per_block = first.bytes_per_block
        self.plan = first.plan
        self.block_size = first.block_size
        """Tokens per block (page) of the first pool's replicas."""
        self.max_model_len = first.max_model_len
        self._check_fleet()
        self.recorder = Recorder()
        self.replicas: list[Replica] = []  # built by run()
        self.sparse = first.sparse
        if self.sparse:
            sparse_columns.register_columns(self.recorder)
        self.spec = first.spec is not None
        if self.spec:
            from kvsim.engine import spec_columns  # (only with `speculative`: start-up)

            spec_columns.register_columns(self.recorder)
        self.tier_media = first.tier_media
        self.refusals: dict[str, int] = {}
        """Why requests were refused outright (Deployment.reject_reason) -> how many."""
        if self.tier_media:
            tier_columns.register_columns(self.recorder, self.tier_media)
        self.disaggregated = any(d.role.receives_kv for d in self.deployments)
        if self.disaggregated:
            pd_columns.register_columns(self.recorder)
        self.fleet = scenario.cluster is not None or sum(d.replicas for d in self.deployments) > 1
        self.client_limit = scenario.workload.client_concurrency()
        """The benchmark client's --max-concurrency (kind bench_serve), or None: no client gate."""
        self._gate: ClientGate | None = None  # built by run()
        self._due = np.zeros(0)
        if self.client_limit is not None:
            self.recorder.add_request_columns(CLIENT_COLUMNS)
        self._flow: RequestFlow | None = None  # built by run()
        if self.lora is not None:
            from kvsim.engine import lora_columns  # (only with a lora section: start-up)

            lora_columns.register_columns(self.recorder)
        self._plain_rows = not (self.sparse or self.spec or self.tier_media or self.disaggregated
                                or self.client_limit is not None or self.lora is not None)
        """Request rows carry no registered columns' values (RequestFlow.record)."""

    def _new_deployments(self) -> None:
        """One Deployment per pool (`deployments`), and what the run reads of the first: its cost model
        (`cost`) and, with Multi-LoRA, its adapter sizes (`lora`, kvsim/engine/lora_columns.py; or None).
        Built by __init__ and again before every run after the first: a run leaves state in them that a
        later run would read. The kernel grid's Plane keeps its last cell (a read there uses that cell's
        coefficients, one elsewhere the four corners: the last bit differs), and speculative decoding's
        sizing numbers the replicas it seeds, so a second run drew other acceptances."""
        self.deployments = [self._deployment(i, *pool) for i, pool in enumerate(pool_scenarios(self.sc))]
        first = self.deployments[0]
        self.cost = first.cost
        self.lora = first.lora

    def _deployment(self, i: int, name: str, role: str, replicas: int, one: Scenario) -> Deployment:
        """Pool i's Deployment; in a fleet its errors name the pool (`cluster.pools.1.kv.tiers.0...`, or
        `cluster.pools.1 (name): ...` for what is not one of its keys)."""
        try:
            return Deployment(one, name, role, replicas)
        except KvsimError as exc:
            if self.sc.cluster is None:
                raise
            text = str(exc)
            key = text.split(":", 1)[0]
            if key.startswith(("kv.", "scheduler.")) and " " not in key:
                raise KvsimError(f"cluster.pools.{i}.{text} (pool '{name}')") from None
            raise KvsimError(f"cluster.pools.{i} ('{name}'): {text}") from None

    def _check_fleet(self) -> None:
        """Rules across pools: the simulator's block bound, one set of timeline columns (same tiers,
        sparsity on or off everywhere), what P/D hands over, one shared store."""
        deps = self.deployments
        prices = self.sc.pricing.usd_per_gpu_hour if self.sc.pricing is not None else None
        if isinstance(prices, dict):  # a price per profile: this run's, or another's (plan, sweeps)
            names = sorted({d.hw.name for d in deps})
            known = [*names, *list_hardware()]
            unknown = sorted(k for k in prices if k not in known)
            if unknown:
                close = difflib.get_close_matches(unknown[0], known, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                raise KvsimError(f"pricing.usd_per_gpu_hour.{unknown[0]}: no hardware profile and no GPU "
                                 f"of this run is named '{unknown[0]}' ({hint}this run's GPUs: "
                                 f"{', '.join(names)})")
        total = sum(d.num_blocks * d.replicas for d in deps)
        if total > MAX_GPU_BLOCKS:
            replicas = sum(d.replicas for d in deps)
            raise KvsimError(f"kv: {replicas} replica(s) with {total:,} KV blocks in all exceed the "
                             f"simulator's bound of {MAX_GPU_BLOCKS:,} blocks (the ids it can address "
                             "here); raise kv.block_size, or lower kv.num_gpu_blocks_override or "
                             "parallelism.replicas")
        first = deps[0]
        for i, d in enumerate(deps[1:], start=1):
            key = f"cluster.pools.{i}.kv"
            if d.tier_media != first.tier_media:
                raise KvsimError(f"{key}.tiers: every pool has the same tier media in this version "
                                 f"({'/'.join(first.tier_media) or 'none'} in pool '{first.name}')")
            if d.sparse != first.sparse:
                raise KvsimError(f"{key}.sparsity.policy: token-level policies on some pools only are not "
                                 "modelled (set it on every pool or none)")
        shared = [(d, t) for d in deps for t in d.sc.kv.tiers if t.shared]
        for d, t in shared[1:]:
            d0, t0 = shared[0]
            if (t.capacity_gb, t.eviction, d.block_size, d.replica_block_bytes) != (
                    t0.capacity_gb, t0.eviction, d0.block_size, d0.replica_block_bytes):
                raise KvsimError(f"cluster.pools: pool '{d.name}' shares the {t.medium} store of pool "
                                 f"'{d0.name}' with another capacity, eviction, block size or KV bytes per "
                                 "block; one store holds one kind of block")
        if self.sc.cluster is not None and any(d.role.sends_kv or d.role.receives_kv for d in deps):
            for i, d in enumerate(deps):
                if d.sc.kv.layout != "paged":
                    raise KvsimError(f"cluster.pools.{i}.kv.layout: disaggregated prefill / decode moves "
                                     "paged KV (use kv.layout: paged)")
                if d.sparse:
                    raise KvsimError(f"cluster.pools.{i}.kv.sparsity.policy: token-level policies are not "
                                     "modelled with disaggregated prefill / decode")
                if d.plan is not None and not d.plan.single:
                    raise KvsimError(f"cluster.pools.{i}: {d.model.name} keeps KV in several layer groups; "
                                     "disaggregated prefill / decode moves one group's KV in this version")
            if self.sc.workload.n > 1 or self.sc.workload.beam_width > 1 or any(
                    c.n > 1 or c.beam_width > 1 for c in self.sc.workload.mix):
                raise KvsimError("workload.n: parallel sampling and beam search are not modelled with "
                                 "disaggregated prefill / decode (set workload.n and beam_width to 1)")
            for d in deps:
                d.nic_bandwidth(self.sc.cluster.kv_transfer)  # a profile without the link's figure: now

    def reject_reason(self, r: Request) -> str | None:
        """Why the first pool would refuse r outright (as vLLM refuses over-long prompts), or None."""
        return self.deployments[0].reject_reason(r)

    def build_requests(self) -> Sequence[Request]:
        """The request stream of this scenario and seed (what run() replays): a list, or a RequestTable
        whose requests are built as they are read (kvsim/workload/factory.py build_request_stream)."""
        sc = self.sc
        rng = np.random.default_rng(sc.simulation.seed)
        stream = build_request_stream(sc.workload, rng, sc.simulation.requests, sc.simulation.duration_s,
                                      base_dir=sc.base_dir)
        if self.lora is None:
            return stream
        from kvsim.lora.adapters import tag_requests  # (only with a lora section: start-up)

        return tag_requests(stream, lora_config(sc), self.lora.table, sc.simulation.seed)

    def run(self) -> SimResult:
        """One run of the scenario. A second run of the same object starts where a fresh Simulation would
        (_new_deployments): the same outputs, byte for byte. What a caller changed on `deployments`, `cost`
        or `lora` between runs is not carried into the next one."""
        if self._runs:
            self._new_deployments()
        self._runs += 1
        self._flow = None
        # the objects built before the run (modules, the scenario, the cost tables) stay out of the
        # collector's full passes while it runs (they are unfrozen after it: none is freed before); the
        # garbage of earlier runs in this process (an API loop, a sweep worker) is collected first, so the
        # freeze does not pin it for the whole run
        frozen = gc.get_freeze_count() == 0
        if frozen:
            gc.collect()
            gc.freeze()
        try:
            # the request stream is read with the collector off (it makes an object or more per request and
            # no garbage; a collection pass would walk them all, again and again as they pile up), then
            # frozen with the rest: it lives as long as the run
            was = gc.isenabled()
            gc.disable()
            try:
                requests = self.build_requests()
            finally:
                if was:
                    gc.enable()
            if frozen:
                gc.freeze()
            return self._run(requests)
        finally:
            if frozen:
                gc.unfreeze()

    def _run(self, requests: Sequence[Request]) -> SimResult:
        sc = self.sc
        self.refusals = {}
        self.total_requests = len(requests)
        env = Clock()
        self.env = env
        flow = RequestFlow(self, env)
        self._flow = flow
        self.cluster = Cluster(env, self.deployments, sc, self.recorder, flow.on_finish, self._timeline_extra)
        self.replicas = self.cluster.replicas
        if self.client_limit is not None:
            self._gate = ClientGate(self.client_limit, flow.send)
            self._due = np.full(len(requests), np.nan)
        open_loop: Iterable[Request]
        if isinstance(requests, RequestTable) and not self._reads_content():
            requests.segments = None  # (this run's own table: its requests are built without segments)
        followups: dict[int, list[Request]] | FollowUps
        if isinstance(requests, RequestTable):  # each request built when it arrives or is released
            followups = requests.follow_ups()
            open_loop = requests.open_loop()
        else:
            followups = {}
            for r in requests:
                if r.after >= 0:
                    followups.setdefault(r.after, []).append(r)
            open_loop = [r for r in requests if r.after < 0]
        flow.start(self.cluster, followups, open_loop)
        del requests, open_loop, followups
        env.run()
        for rep in self.replicas:
            if rep.check:  # check mode: the state the run ends in, whatever the pacing skipped
                rep.full_check()
        flow.end()
        self._gate = None
        meta = self._meta()
        replicas = self.replicas
        if self.sparse:
            meta["sparsity"] = sparse_columns.run_totals([r.sched.sizing for r in replicas])
        if self.spec:
            from kvsim.engine import spec_columns

            first = self.deployments[0]
            meta["speculative"] = spec_columns.run_totals(first.spec, [r.sched.sizing for r in replicas],
                                                          sum(d.cost.draft_s for d in self.deployments),
                                                          sum(d.cost.plain_s for d in self.deployments))
        if self.tier_media:
            first = self.deployments[0]
            meta["tiers"] = tier_columns.run_totals(first.sc.kv, [r.sched.kv.tiers for r in replicas],
                                                    [x for x in self.cluster.tier_links if x],
                                                    first.replica_block_bytes)
        if self.fleet:
            meta["fleet"] = self.cluster.describe()
        if self.lora is not None:
            from kvsim.engine import lora_columns

            meta["lora"] = lora_columns.run_totals(self.deployments, replicas, self.block_size)
        # the recorder's columns move into the result (with meets_slo derived when asked)
        return SimResult(self.recorder.take_tables(sc.slo), meta)

    def _reads_content(self) -> bool:
        """Whether anything in this run reads a request's prompt segments: a prefix cache (and the tiers
        and prefix-aware routing behind it) or a token-level policy (re-reads); else the requests are
        built without them."""
        return self.sparse or any(d.sc.kv.prefix_cache != "none" for d in self.deployments)

    def _timeline_extra(self, sched: Scheduler) -> Callable[[], tuple] | None:
        """The values of the registered timeline column groups for one replica, in registration order."""
        parts: list[Callable[[], tuple]] = []
        if self.sparse:
            parts.append(sched.sizing.timeline_values)
        if self.tier_media:
            parts.append(sched.kv.tiers.occupancy)  # (tier_columns.timeline_values, one call less)
        if self.lora is not None:
            slots = sched.lora
            parts.append(lambda: slots.last)
        if not parts:
            return None
        if len(parts) == 1:
            only = parts[0]
            return lambda: (only(),)
        return lambda: tuple(p() for p in parts)

    def _request_extra(self, r: Request, replica: int, g: Group | None) -> list[tuple | None]:
        """The registered request columns' values of r's row, in registration order."""
        extra = []
        if self.sparse:
            extra.append(self.replicas[replica].sched.sizing.request_values(r.rid))
        if self.spec:
            extra.append(self.replicas[replica].sched.sizing.request_values(r.rid))
        if self.tier_media:
            extra.append(None if g is None else tier_columns.request_values(g, self.tier_media))
        if self.disaggregated:
            extra.append(None if g is None else pd_columns.request_values(g))
        if self.client_limit is not None:
            extra.append((r.arrival_s - self._due[r.rid],))
        if self.lora is not None:
            extra.append((r.adapter, -1, 0, 0.0, 0.0, 0) if g is None
                         else self.replicas[replica].sched.lora.request_values(r.rid, r.adapter))
        return extra

    def _meta(self) -> dict[str, Any]:
        cap = self.capacity
        return {
            "capacity_blocks": self.num_blocks,
            "block_size": self.block_size,
            "kv_bytes_per_token": cap.kv_bytes_per_token,
            "bytes_per_block": cap.bytes_per_block,
            "weight_bytes_per_gpu": cap.weight_bytes,
            "max_model_len": self.max_model_len,
            "refusals": dict(sorted(self.refusals.items())),
            "replicas": sum(d.replicas for d in self.deployments),
            "model": self.model.name,
            "hardware": self.hw.name,
            "cost_model": self.cost.describe(),
            "scenario": scenario_dict(self.sc),
            "kvsim_version": __version__,
            "prefix_cache": self.sc.kv.prefix_cache,
            "prefix_cache_evictions": sum(r.sched.kv.evictions for r in self.replicas),
            "pricing": self._pricing(),
        }

    def _pricing(self) -> list[dict[str, Any]]:
        """Per pool: its GPUs (replicas x tensor parallel), their hardware and USD per GPU-hour (None when
        unknown) and where the price comes from (summary `cost`)."""
        pricing = self.sc.pricing or Pricing()
        out = []
        for d in self.deployments:
            price, source = pricing.price(d.hw.name, d.hw.usd_per_gpu_hour)
            if source.startswith("hardware profile") and d.hw.sources and "usd_per_gpu_hour" in d.hw.sources:
                source += ": " + d.hw.sources["usd_per_gpu_hour"]
            out.append({"pool": d.name, "hardware": d.hw.name, "gpus": d.replicas * d.tp,
                        "usd_per_gpu_hour": price if price > 0 else None, "source": source})
        return out

    @property
    def _seq_no(self) -> int:
        """The sequence numbers the last (or current) run handed out."""
        return 0 if self._flow is None else self._flow.seq_no

    @property
    def _completed(self) -> int:
        """The requests the last (or current) run recorded (finished or refused)."""
        return 0 if self._flow is None else self._flow.completed


def simulate(scenario: Scenario, progress: Callable[[int, int], None] | None = None) -> SimResult:
    """Run one scenario and return its result."""
    return Simulation(scenario, progress).run()
