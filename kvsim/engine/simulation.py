"""Wires a scenario into a simpy run: specs -> capacity -> workload -> replicas -> recorder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import simpy

from kvsim import __version__
from kvsim.cost.factory import build_cost_model
from kvsim.engine import sparse_columns, tier_columns
from kvsim.engine.group import Group
from kvsim.engine.replica import Replica
from kvsim.engine.router import RoundRobinRouter
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.sparse_sizing import SparseSizing
from kvsim.errors import KvsimError
from kvsim.kvcache.factory import build_kv_manager
from kvsim.kvcache.links import TierLinks
from kvsim.metrics.recorder import Recorder, RequestRow
from kvsim.scenario import MAX_GPU_BLOCKS, Scenario, cross_check, scenario_dict
from kvsim.specs.catalog import get_model
from kvsim.specs.footprint import kv_capacity
from kvsim.specs.hardware import load_hardware
from kvsim.specs.layers import window_caps
from kvsim.workload.factory import build_requests
from kvsim.workload.request import Request

GIB = 1024**3


@dataclass(slots=True)
class SimResult:
    """What one run produced: per-request rows, per-iteration rows and run metadata."""

    requests: pd.DataFrame
    timeline: pd.DataFrame
    meta: dict[str, Any]


class Simulation:
    """One simulated serving deployment for one scenario. `run()` executes it once."""

    def __init__(self, scenario: Scenario, progress: Callable[[int, int], None] | None = None) -> None:
        self.sc = scenario
        self.progress = progress
        self.model = get_model(scenario.model)
        self.hw = load_hardware(scenario.hardware)
        tp = scenario.parallelism.tensor_parallel_size
        kvc = scenario.kv
        reserve = None if kvc.activation_reserve_gib is None else kvc.activation_reserve_gib * GIB
        self.capacity = kv_capacity(self.model, self.hw, kvc.dtype, tp, kvc.gpu_memory_utilization,
                                    kvc.block_size, reserve, hybrid=not kvc.disable_hybrid_kv_cache_manager)
        self.num_blocks = kvc.num_gpu_blocks_override or self.capacity.num_blocks
        self.bytes_per_block = self.capacity.bytes_per_block
        self.plan = self.capacity.plan
        self.layer_groups = self.model.layer_groups(kvc.dtype, tp)
        self.windows = window_caps(self.layer_groups)  # the scheduler's windowed sums, for the cost model
        self.block_size = self.capacity.block_size
        """Tokens per block (page): kv.block_size, raised by the page plan for state or compressed layers."""
        self.max_model_len = scenario.scheduler.max_model_len or self.model.max_position_embeddings
        self._check_settings()
        self.cost = build_cost_model(scenario, self.model, self.hw, self.bytes_per_block)
        self.recorder = Recorder()
        self.replicas: list[Replica] = []  # built by run()
        self.tier_links: list[TierLinks | None] = []  # per replica, built by run()
        self.sparse = scenario.kv.sparsity.enabled
        if self.sparse:
            sparse_columns.register_columns(self.recorder)
        self.tier_media = [t.medium for t in scenario.kv.tiers]
        if self.tier_media:
            tier_columns.register_columns(self.recorder, self.tier_media)
        self._seq_no = 0
        self._completed = 0

    def _check_settings(self) -> None:
        """One-line errors for settings that only the model and the pool size reveal. `kvsim validate` and
        `run` both construct the Simulation, so both report them before simulating (the rules that need
        the scenario alone are scenario.cross_check)."""
        sc = self.sc
        problem = cross_check(sc)  # load_scenario checked it already; a Scenario built directly did not
        if problem is not None:
            raise KvsimError(problem)
        replicas = sc.parallelism.replicas
        if self.num_blocks < 1:
            raise KvsimError(f"kv.block_size: not one block of {sc.kv.block_size} tokens fits in the KV "
                             f"memory of {self.hw.name} ({self.capacity.usable_bytes / GIB:.2f} GiB usable); "
                             "lower kv.block_size or kv.dtype, or raise gpu_memory_utilization")
        if self.num_blocks * replicas > MAX_GPU_BLOCKS:
            raise KvsimError(f"kv: {replicas} replica(s) x {self.num_blocks:,} KV blocks exceed the "
                             f"simulator's bound of {MAX_GPU_BLOCKS:,} blocks in all (the ids it can address "
                             "here); raise kv.block_size, or lower kv.num_gpu_blocks_override or "
                             "parallelism.replicas")
        self._check_layer_groups()
        self._check_tiers()
        capacity = self.num_blocks * self.block_size
        if sc.kv.layout == "contiguous:max" and self.max_model_len > capacity:
            raise KvsimError(f"kv.layout: {sc.kv.layout} reserves max_model_len ({self.max_model_len}) slots "
                             f"per sequence, more than the KV capacity ({capacity} slots)")

    def _check_layer_groups(self) -> None:
        """What a model with several cache groups (or a sliding, state or compressed one) is not modelled
        with: one-line errors naming the key."""
        plan, sc = self.plan, self.sc
        model_kinds = sorted({g.kind for g in self.layer_groups})
        if sc.kv.sparsity.enabled and model_kinds not in (["full"], ["mla"]):
            raise KvsimError(f"kv.sparsity.policy: {self.model.name} has {'/'.join(model_kinds)} layer "
                             "groups; token-level policies are modelled for full or MLA attention only "
                             "(set kv.sparsity.policy: none)")
        if plan is None or plan.single:
            return
        kinds = sorted({g.kind for g in plan.groups})
        what = f"{self.model.name} keeps KV in {'/'.join(kinds)} layer groups"
        if sc.kv.layout != "paged":
            raise KvsimError(f"kv.layout: {what}; contiguous layouts model one group of full attention "
                             "(use kv.layout: paged)")
        if sc.kv.prefix_cache == "radix":
            raise KvsimError(f"kv.prefix_cache: {what}; the radix cache is not modelled across layer groups "
                             "(use kv.prefix_cache: hash, vLLM's hybrid prefix caching)")
        # a per-sequence state: Mamba / linear-attention layers, or DeepSeek-V4's state cache
        states = any(g.state_pages for g in plan.groups)
        if states and sc.kv.prefix_cache != "none":
            raise KvsimError(f"kv.prefix_cache: {what}; per-sequence states are not cached at block "
                             "checkpoints, so no prefix could hit (set kv.prefix_cache: none)")
        if states and (sc.workload.n > 1 or sc.workload.beam_width > 1):
            raise KvsimError(f"workload.n: {what}; parallel sampling and beam search fork per-sequence "
                             "states, which is not modelled (set workload.n and workload.beam_width to 1)")

    def _check_tiers(self) -> None:
        """KV tiers against the hardware (a cpu tier within the host DRAM per GPU, an ssd tier within the
        local NVMe) and the model (one cache group): one-line errors naming the key."""
        sc, hw = self.sc, self.hw
        if not sc.kv.tiers:
            return
        if self.plan is not None and not self.plan.single:
            raise KvsimError(f"kv.tiers: {self.model.name} keeps KV in several layer groups; tiers are "
                             "modelled below one group's cache (remove kv.tiers)")
        tp = sc.parallelism.tensor_parallel_size
        for i, t in enumerate(sc.kv.tiers):
            have = {"cpu": hw.host_dram_bytes, "ssd": hw.ssd_bytes}.get(t.medium)
            what = {"cpu": "host DRAM", "ssd": "local SSD"}.get(t.medium)
            if have is not None and t.capacity_gb * 1e9 > have * tp:
                raise KvsimError(f"kv.tiers.{i}.capacity_gb: {t.capacity_gb:g} GB exceeds the {what} of "
                                 f"{tp} x {hw.name} ({have * tp / 1e9:.1f} GB in its hardware profile)")
            if t.capacity_gb * 1e9 < self.bytes_per_block * tp:
                raise KvsimError(f"kv.tiers.{i}.capacity_gb: {t.capacity_gb:g} GB holds no KV block of "
                                 f"{self.bytes_per_block * tp / 1e6:.2f} MB")

    def _tier_links(self) -> TierLinks | None:
        sc, hw = self.sc, self.hw
        if not sc.kv.tiers:
            return None
        tiers = []
        for t in sc.kv.tiers:
            bw = t.bandwidth_gbps * 1e9 if t.bandwidth_gbps else (
                hw.ssd_bandwidth if t.medium == "ssd" else hw.host_link_bandwidth)
            tiers.append((t.medium, bw, t.latency_s))
        # each of the replica's TP GPUs loads its shard over its own host link, in parallel; an SSD or
        # network link carries all of them
        return TierLinks(hw.host_link_bandwidth, tiers, self.capacity.kv_bytes_per_token,
                         sc.parallelism.tensor_parallel_size)

    def _new_scheduler(self) -> Scheduler:
        sc = self.sc
        swap_blocks = int(sc.kv.swap_space_gb * GIB // self.bytes_per_block) if self.bytes_per_block else 0
        kv = build_kv_manager(sc.kv, self.num_blocks, swap_blocks, self.max_model_len, self.plan,
                              self.bytes_per_block * sc.parallelism.tensor_parallel_size)
        limits = SchedulerLimits(
            max_num_seqs=sc.scheduler.max_num_seqs,
            # without chunked prefill a whole prompt (after a recompute: prompt + generated) must fit one
            # iteration, so the budget is at least max_model_len, as vLLM sets it
            max_num_batched_tokens=(sc.scheduler.max_num_batched_tokens if sc.scheduler.chunked_prefill
                                    else max(sc.scheduler.max_num_batched_tokens, self.max_model_len)),
            chunked_prefill=sc.scheduler.chunked_prefill,
            preemption_mode=sc.scheduler.preemption_mode,
            watermark_blocks=self._watermark_blocks(),
            bytes_per_block=self.bytes_per_block,
            beam_seed=sc.simulation.seed,
            windows=self.windows,
            tier_load=sc.kv.tier_load,
        )
        if self.sparse:  # token-level eviction / offload: decoding groups hold what the policy keeps
            return Scheduler(limits, kv, SparseSizing(sc.kv.sparsity, kv.block_size,
                                                      self.capacity.kv_bytes_per_token,
                                                      self.hw.host_link_bandwidth))
        links = self._tier_links()
        self.tier_links.append(links)
        return Scheduler(limits, kv, loader=None if links is None else links.load)

    def reject_reason(self, r: Request) -> str | None:
        """Why the engine would refuse r outright (as vLLM refuses over-long prompts), or None."""
        if r.prompt_len >= self.max_model_len:
            return "prompt longer than max_model_len"
        output = min(r.output_len, self.max_model_len - r.prompt_len)
        # a sequence holds at most prompt + output - 1 slots: the last token's KV is never written
        total = r.prompt_len + max(output - 1, 0)
        seqs = max(r.n, r.beam_width)
        blocks = seqs * self._pages_for(total, r.prompt_len)
        if blocks > self.num_blocks:
            return "request needs more KV blocks than the pool has"
        if self._may_swap(seqs) and blocks + seqs > self.num_blocks - self._watermark_blocks():
            # a swapped-out group returns only with the watermark's blocks to spare: it would wait forever
            return "request needs more KV blocks than the pool has above the watermark"
        return self.replicas[0].sched.kv.refuse_reason(r, output) if self.replicas else None

    def _pages_for(self, total: int, prompt: int) -> int:
        """Most pages one sequence of the request holds at once: total tokens' worth (the page plan's count:
        sliding groups their window), or what its prefill holds, a chunk and the window before it in a
        sliding group (as vLLM allocates a chunk before trimming)."""
        if self.plan is None or self.plan.single:
            return -(-total // self.block_size)
        sched = self.sc.scheduler
        chunk = sched.max_num_batched_tokens if sched.chunked_prefill else prompt
        return max(self.plan.pages(total), self.plan.pages_during_prefill(prompt, chunk))

    def _may_swap(self, seqs: int) -> bool:
        """Whether a group of `seqs` sequences can be swapped out (multi-sequence groups always are)."""
        return self.sc.scheduler.preemption_mode == "swap" or seqs > 1

    def _watermark_blocks(self) -> int:
        return int(self.sc.kv.watermark * self.num_blocks)

    def _group(self, r: Request) -> Group:
        output = min(r.output_len, self.max_model_len - r.prompt_len)
        n = max(r.n, r.beam_width)  # beam search runs beam_width sequences
        seqs = list(range(self._seq_no, self._seq_no + n))
        self._seq_no += n
        return Group(req=r, order=r.rid, seqs=seqs, output=output, prompt=r.prompt_len, n=n)

    def build_requests(self) -> list[Request]:
        """The request stream of this scenario and seed (what run() replays)."""
        sc = self.sc
        rng = np.random.default_rng(sc.simulation.seed)
        return build_requests(sc.workload, rng, sc.simulation.requests, sc.simulation.duration_s,
                              base_dir=sc.base_dir)

    def run(self) -> SimResult:
        sc = self.sc
        requests = self.build_requests()
        self.total_requests = len(requests)
        env = simpy.Environment()
        self.env = env
        replicas = []
        for i in range(sc.parallelism.replicas):
            sched = self._new_scheduler()
            replicas.append(Replica(i, env, sched, self.cost, self.recorder, self._on_finish,
                                    check=sc.kv.check_invariants, extra_columns=self._timeline_extra(sched)))
        self.replicas = replicas
        self.router = RoundRobinRouter(len(replicas))
        self._followups: dict[int, list[Request]] = {}
        for r in requests:
            if r.after >= 0:
                self._followups.setdefault(r.after, []).append(r)
        self._replica_of: dict[int, int] = {}
        env.process(self._arrivals([r for r in requests if r.after < 0]))
        env.run()
        meta = self._meta()
        if self.sparse:
            meta["sparsity"] = sparse_columns.run_totals([r.sched.sizing for r in replicas])
        if self.tier_media:
            block_bytes = self.bytes_per_block * sc.parallelism.tensor_parallel_size
            meta["tiers"] = tier_columns.run_totals(sc.kv, [r.sched.kv.tiers for r in replicas],
                                                    [x for x in self.tier_links if x], block_bytes)
        return SimResult(self.recorder.requests_frame(), self.recorder.timeline_frame(), meta)

    def _arrivals(self, open_loop: list[Request]):
        env = self.env
        for r in open_loop:
            if r.arrival_s > env.now:
                yield env.timeout(r.arrival_s - env.now)
            self._dispatch(r, self.router.route(r))

    def _dispatch(self, r: Request, replica: int) -> None:
        self._replica_of[r.rid] = replica
        reason = self.reject_reason(r)
        if reason is not None:
            self._record(r, replica, None)
            # the user goes on: the next turn follows think_s after the refusal
            for child in self._followups.pop(r.rid, ()):
                self._release(child, replica, self.env.now + child.think_s)
            return
        self.replicas[replica].submit(self._group(r))

    def _release(self, r: Request, replica: int, t: float) -> None:
        dur = self.sc.simulation.duration_s
        if dur is not None and t > dur:
            return
        r.arrival_s = t

        def fire(_event: simpy.Event) -> None:
            self._dispatch(r, replica)

        if t > self.env.now:
            self.env.timeout(t - self.env.now).callbacks.append(fire)
        else:
            self._dispatch(r, replica)

    def _on_finish(self, g: Group) -> None:
        self._record(g.req, g.replica, g)
        for child in self._followups.pop(g.req.rid, ()):
            self._release(child, g.replica, g.finish_s + child.think_s)

    def _timeline_extra(self, sched: Scheduler) -> Callable[[], tuple] | None:
        """The values of the registered timeline column groups for one replica, in registration order."""
        parts: list[Callable[[], tuple]] = []
        if self.sparse:
            parts.append(sched.sizing.timeline_values)
        if self.tier_media:
            chain = sched.kv.tiers
            parts.append(lambda: tier_columns.timeline_values(chain))
        if not parts:
            return None
        if len(parts) == 1:
            only = parts[0]
            return lambda: (only(),)
        return lambda: tuple(p() for p in parts)

    def _record(self, r: Request, replica: int, g: Group | None) -> None:
        if g is None:
            row = RequestRow.refused(r.rid, replica, r.arrival_s, r.prompt_len, r.output_len, r.n)
        else:
            row = RequestRow(rid=r.rid, replica=replica, arrival_s=r.arrival_s, prompt_len=r.prompt_len,
                             output_len=g.output, n=r.n, first_scheduled_s=g.first_scheduled_s,
                             first_token_s=g.first_token_s, finish_s=g.finish_s, preemptions=g.preemptions,
                             cached_tokens=g.cached_tokens, rejected=0)
        extra = []
        if self.sparse:
            extra.append(self.replicas[replica].sched.sizing.request_values(r.rid))
        if self.tier_media:
            extra.append(None if g is None else tier_columns.request_values(g, self.tier_media))
        self.recorder.request(row, *extra)
        self._completed += 1
        if self.progress is not None:
            self.progress(self._completed, self.total_requests)

    def _meta(self) -> dict[str, Any]:
        cap = self.capacity
        return {
            "capacity_blocks": self.num_blocks,
            "block_size": self.block_size,
            "kv_bytes_per_token": cap.kv_bytes_per_token,
            "bytes_per_block": cap.bytes_per_block,
            "weight_bytes_per_gpu": cap.weight_bytes,
            "max_model_len": self.max_model_len,
            "replicas": self.sc.parallelism.replicas,
            "model": self.model.name,
            "hardware": self.hw.name,
            "cost_model": self.cost.describe(),
            "scenario": scenario_dict(self.sc),
            "kvsim_version": __version__,
            "prefix_cache": self.sc.kv.prefix_cache,
            "prefix_cache_evictions": sum(r.sched.kv.evictions for r in self.replicas),
        }


def simulate(scenario: Scenario, progress: Callable[[int, int], None] | None = None) -> SimResult:
    """Run one scenario and return its result."""
    return Simulation(scenario, progress).run()
