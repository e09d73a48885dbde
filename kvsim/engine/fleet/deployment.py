"""One replica configuration of a fleet (a pool): the model on its hardware and parallelism, its KV
capacity and page plan, its cost model, the checks only those reveal, and its replicas' schedulers."""

from __future__ import annotations

from kvsim.cost.factory import build_cost_model
from kvsim.engine.fleet.handoff import HandOff
from kvsim.engine.fleet.roles import ROLES, Role
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.scheduler_policy import effective_chunked_prefill, scheduler_rules
from kvsim.errors import KvsimError
from kvsim.kvcache.factory import build_kv_manager
from kvsim.kvcache.links import TierLinks
from kvsim.kvcache.tiers import Tier
from kvsim.scenario import Scenario, lora_config
from kvsim.specs.catalog import get_model, with_quantization
from kvsim.specs.expert_parallel import expert_parallel_problem
from kvsim.specs.footprint import kv_capacity
from kvsim.specs.hardware import load_hardware
from kvsim.specs.layers import window_caps
from kvsim.workload.request import Request

GIB = 1024**3


def expert_parallel_size(scenario: Scenario, model) -> int | None:
    """EP = tensor_parallel_size x data_parallel_size under parallelism.enable_expert_parallel (None
    without); a one-line KvsimError for a model it does not model (kvsim/specs/expert_parallel.py)."""
    par = scenario.parallelism
    if not par.enable_expert_parallel:
        return None
    problem = expert_parallel_problem(model, par.tensor_parallel_size, par.replicas)
    if problem:
        raise KvsimError(problem)
    return par.tensor_parallel_size * par.replicas



class Deployment:
    """The replicas of one pool share this: `sc` is the scenario one of them runs (a pool's hardware,
    tensor parallelism, kv and scheduler keys applied: kvsim.scenario.pool_scenarios)."""

    def __init__(self, scenario: Scenario, name: str = "default", role: str = "mixed",
                 replicas: int = 1) -> None:
        self.sc = scenario
        self.name = name
        self.role: Role = ROLES[role]
        """What its replicas do differently (kvsim/engine/fleet/roles.py)."""
        self.replicas = replicas
        self.model = with_quantization(get_model(scenario.model), scenario.quantization)
        self.hw = load_hardware(scenario.hardware)
        self.tp = scenario.parallelism.tensor_parallel_size
        self.ep = expert_parallel_size(scenario, self.model)  # None without enable_expert_parallel
        kvc = scenario.kv
        reserve = None if kvc.activation_reserve_gib is None else kvc.activation_reserve_gib * GIB
        self.lora = None if lora_config(scenario) is None else self._lora_sizing()
        """Multi-LoRA: the adapters' sizes on this pool (kvsim/engine/lora_columns.py LoraSizing), or None."""
        self.capacity = kv_capacity(self.model, self.hw, kvc.dtype, self.tp, kvc.gpu_memory_utilization,
                                    kvc.block_size, reserve, hybrid=not kvc.disable_hybrid_kv_cache_manager,
                                    expert_parallel=self.ep,
                                    lora_bytes=self.lora.slots_bytes if self.lora is not None else 0.0)
        self.spec = None
        """Speculative decoding (kvsim/engine/spec_deploy.py): the draft, capacity and cost; None without."""
        self.lookahead = 0
        """KV slots a decoding sequence holds beyond its context (speculative decoding's drafts)."""
        if scenario.speculative is not None and scenario.speculative.enabled:
            # imported only here: a run without `speculative` does not load its modules (start-up)
            from kvsim.engine.spec_deploy import SpecDeployment

            self.spec = SpecDeployment(scenario, self.model, self.capacity, self.tp)
            self.capacity = self.spec.capacity
            self.lookahead = self.spec.k + self.spec.lookahead
        self.num_blocks = kvc.num_gpu_blocks_override or self.capacity.num_blocks
        self.bytes_per_block = self.capacity.bytes_per_block
        self.plan = self.capacity.plan
        self._one_group = self.plan is None or self.plan.single
        """The classic paged layout: a sequence of t tokens holds ceil(t / block_size) pages."""
        self.block_pages = 1 if self._one_group else sum(1 for g in self.plan.groups if g.grows)
        """Pages a sequence's next block takes: one per token-paged cache group (the KV coordinator's
        block_pages; 1 for the classic layout)."""
        self.layer_groups = self.model.layer_groups(kvc.dtype, self.tp)
        self.windows = window_caps(self.layer_groups)  # the scheduler's windowed sums, for the cost model
        self.block_size = self.capacity.block_size
        """Tokens per block (page): kv.block_size, raised by the page plan for state or compressed layers."""
        self.max_model_len = scenario.scheduler.max_model_len or self.model.max_position_embeddings
        sched = scenario.scheduler
        self.chunked_prefill = effective_chunked_prefill(sched.policy, sched.chunked_prefill)
        """scheduler.chunked_prefill, or what scheduler.policy forces (sarathi: on, orca: off)."""
        self.rules = scheduler_rules(sched.policy, sched.chunked_prefill)
        self.sparse = kvc.sparsity.enabled
        self.tier_media = [t.medium for t in kvc.tiers]
        """The media of kv.tiers, top down (empty without tiers: the one test of whether the pool has
        tiers)."""
        self.check_settings()
        self.cost = build_cost_model(scenario, self.model, self.hw, self.bytes_per_block)
        if self.spec is not None:
            self.cost = self.spec.cost_model(self.cost, self.hw, self.bytes_per_block)
        if self.lora is not None:
            self.cost = self.lora.cost_model(self.cost, scenario, self.hw)
            self.lora.blocks_lost = kv_capacity(
                self.model, self.hw, kvc.dtype, self.tp, kvc.gpu_memory_utilization, kvc.block_size, reserve,
                hybrid=not kvc.disable_hybrid_kv_cache_manager, expert_parallel=self.ep,
            ).num_blocks - self.capacity.num_blocks
        self.first_kv = None  # the first replica's KV manager (refuse_reason), set by new_scheduler
        self._refusal_rule = (self.max_model_len, self.lookahead if self.role.holds_output_kv else None,
                              self._one_group, self.block_size, self.num_blocks,
                              scenario.scheduler.preemption_mode == "swap",
                              self.num_blocks - self.watermark_blocks())
        """reject_reason's per-pool constants, read at once (it runs for every request): max_model_len, the
        lookahead of a role that holds the output's KV (None: the prompt's only), _one_group, block_size,
        num_blocks, whether preemption swaps, and the blocks above the watermark."""

    def _lora_sizing(self):
        # imported only here: a run without a lora section does not load the LoRA modules (start-up)
        from kvsim.engine.lora_columns import LoraSizing

        return LoraSizing(lora_config(self.sc), self.model, self.tp)

    @property
    def replica_block_bytes(self) -> float:
        """Bytes of one block over the replica's GPUs (tensor parallel shards together)."""
        return self.bytes_per_block * self.tp

    def check_settings(self) -> None:
        """One-line errors for settings that only the model and the pool size reveal. `kvsim validate` and
        `run` both construct the Simulation, so both report them before simulating (the rules that need
        the scenario alone are scenario.cross_check)."""
        sc = self.sc
        if self.num_blocks < 1:
            raise KvsimError(f"kv.block_size: not one block of {sc.kv.block_size} tokens fits in the KV "
                             f"memory of {self.hw.name} ({self.capacity.usable_bytes / GIB:.2f} GiB usable); "
                             "lower kv.block_size or kv.dtype, or raise gpu_memory_utilization")
        self._check_layer_groups()
        self._check_tiers()
        if self.spec is not None and (self.windows or not all(g.kind in ("full", "mla")
                                                              for g in self.layer_groups)):
            kinds = "/".join(sorted({g.kind for g in self.layer_groups}))
            raise KvsimError(f"speculative: {self.model.name} keeps KV in {kinds} layer groups; speculative "
                             "decoding is modelled for models of full or MLA attention only")
        capacity = self.num_blocks * self.block_size
        if sc.kv.layout == "contiguous:max" and self.max_model_len > capacity:
            raise KvsimError(f"kv.layout: {sc.kv.layout} reserves max_model_len ({self.max_model_len}) slots "
                             f"per sequence, more than the KV capacity ({capacity} slots)")

    def _check_layer_groups(self) -> None:
        """What a model with several cache groups (or a sliding, state or compressed one) is not modelled
        with: one-line errors naming the key."""
        plan, sc = self.plan, self.sc
        model_kinds = sorted({g.kind for g in self.layer_groups})
        full_context = self.layer_groups and all(g.kind_spec.full_context for g in self.layer_groups)
        if sc.kv.sparsity.enabled and not full_context:
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
        if not self.tier_media:
            return
        if self.plan is not None and not self.plan.single:
            raise KvsimError(f"kv.tiers: {self.model.name} keeps KV in several layer groups; tiers are "
                             "modelled below one group's cache (remove kv.tiers)")
        tp = self.tp
        for i, t in enumerate(sc.kv.tiers):
            have = {"cpu": hw.host_dram_bytes, "ssd": hw.ssd_bytes}.get(t.medium)
            what = {"cpu": "host DRAM", "ssd": "local SSD"}.get(t.medium)
            if have is not None and t.capacity_gb * 1e9 > have * tp:
                raise KvsimError(f"kv.tiers.{i}.capacity_gb: {t.capacity_gb:g} GB exceeds the {what} of "
                                 f"{tp} x {hw.name} ({have * tp / 1e9:.1f} GB in its hardware profile)")
            if t.capacity_gb * 1e9 < self.bytes_per_block * tp:
                raise KvsimError(f"kv.tiers.{i}.capacity_gb: {t.capacity_gb:g} GB holds no KV block of "
                                 f"{self.bytes_per_block * tp / 1e6:.2f} MB")

    def tier_links(self) -> TierLinks | None:
        """A replica's own links to its tiers (None without tiers)."""
        sc, hw = self.sc, self.hw
        if not self.tier_media:
            return None
        tiers = []
        for t in sc.kv.tiers:
            bw = t.bandwidth_gbps * 1e9 if t.bandwidth_gbps else (
                hw.ssd_bandwidth if t.medium == "ssd" else hw.host_link_bandwidth)
            tiers.append((t.medium, bw, t.latency_s))
        # each of the replica's TP GPUs loads its shard over its own host link, in parallel; an SSD or
        # network link carries all of them
        return TierLinks(hw.host_link_bandwidth, tiers, self.capacity.kv_bytes_per_token, self.tp)

    def new_scheduler(self, shared_tiers: dict[str, Tier] | None = None, memos: dict | None = None,
                      receive=None) -> tuple[Scheduler, TierLinks | None]:
        """A fresh scheduler (and KV manager) for one replica of this pool, and its tier links.
        shared_tiers: the fleet's shared store tiers by medium (built on first use, then reused); memos:
        the fleet's block-key memos (kvsim/kvcache/factory.py); receive: a decode replica's
        `HandOff.receive` (the cluster's KV transfer, kvsim/engine/fleet/handoff.py)."""
        sc = self.sc
        swap_blocks = int(sc.kv.swap_space_gb * GIB // self.bytes_per_block) if self.bytes_per_block else 0
        kv = build_kv_manager(sc.kv, self.num_blocks, swap_blocks, self.max_model_len, self.plan,
                              self.replica_block_bytes, shared_tiers, memos)
        if self.first_kv is None:
            self.first_kv = kv
        limits = SchedulerLimits(
            max_num_seqs=sc.scheduler.max_num_seqs,
            # without chunked prefill a whole prompt (after a recompute: prompt + generated) must fit one
            # iteration, so the budget is at least max_model_len, as vLLM sets it
            max_num_batched_tokens=(sc.scheduler.max_num_batched_tokens if self.chunked_prefill
                                    else max(sc.scheduler.max_num_batched_tokens, self.max_model_len)),
            chunked_prefill=self.chunked_prefill,
            preemption_mode=sc.scheduler.preemption_mode,
            watermark_blocks=self.watermark_blocks(),
            bytes_per_block=self.bytes_per_block,
            beam_seed=sc.simulation.seed,
            windows=self.windows,
            tier_load=sc.kv.tier_load,
            rules=self.rules,
        )
        if self.sparse:  # token-level eviction / offload: decoding groups hold what the policy keeps
            # imported only here: a run without kv.sparsity does not load the sparsity modules (start-up)
            from kvsim.engine.sparse_sizing import SparseSizing

            m = self.model
            return Scheduler(limits, kv, SparseSizing(sc.kv.sparsity, kv.block_size,
                                                      self.capacity.kv_bytes_per_token,
                                                      self.hw.host_link_bandwidth,
                                                      kv_heads=m.kv_heads_per_gpu(self.tp),
                                                      host_pool_bytes=self.hw.host_dram_bytes,
                                                      num_layers=m.num_layers)), None
        links = self.tier_links()
        sizing = None if self.spec is None else self.spec.new_sizing(kv.block_size)
        return Scheduler(limits, kv, sizing, loader=None if links is None else links.load,
                         handoff=HandOff(self.role.sends_kv, receive),
                         lora=None if self.lora is None else self.lora.slots(self.hw)), links

    def reject_reason(self, r: Request) -> str | None:
        """Why a replica of this pool would refuse r outright (as vLLM refuses over-long prompts), or
        None."""
        return refusal(self, self._refusal_rule, self.first_kv, r, r.prompt_len, r.output_len, r.n,
                       r.beam_width)

    def _pages_for(self, total: int, prompt: int) -> int:
        """Most pages one sequence of the request holds at once: total tokens' worth (the page plan's count:
        sliding groups their window), or what its prefill holds, a chunk and the window before it in a
        sliding group (as vLLM allocates a chunk before trimming)."""
        if self.plan is None or self.plan.single:
            return -(-total // self.block_size)
        sched = self.sc.scheduler
        chunk = sched.max_num_batched_tokens if self.chunked_prefill else prompt
        return max(self.plan.pages(total), self.plan.pages_during_prefill(prompt, chunk))

    def watermark_blocks(self) -> int:
        return int(self.sc.kv.watermark * self.num_blocks)

    def nic_bandwidth(self, transfer) -> float:
        """Bytes/s a replica of this pool sends or receives KV at (P/D: cluster.kv_transfer): the per-GPU
        bandwidth (the key, else the profile's network or NVLink figure) x its GPUs."""
        if transfer.bandwidth_gbps is not None:
            per_gpu = transfer.bandwidth_gbps * 1e9
        else:
            per_gpu = (self.hw.interconnect_bandwidth if transfer.link == "nvlink"
                       else self.hw.network_bandwidth)
        if per_gpu <= 0:
            field = "interconnect_bandwidth" if transfer.link == "nvlink" else "network_bandwidth"
            raise KvsimError(f"cluster.kv_transfer.bandwidth_gbps: the hardware profile of pool "
                             f"'{self.name}' ({self.hw.name}) has no {field}; give the link's GB/s")
        return per_gpu * self.tp

    def describe(self) -> dict:
        """The pool's row in meta['fleet']['pools']."""
        return {"name": self.name, "role": self.role.name, "replicas": self.replicas,
                "hardware": self.hw.name, "tensor_parallel_size": self.tp, "capacity_blocks": self.num_blocks,
                "block_size": self.block_size}


def refusal(d: Deployment, rule: tuple, first_kv, r: Request, prompt: int, output: int, n: int,
            beams: int) -> str | None:
    """d.reject_reason(r), given d's `_refusal_rule` and `first_kv` and r's prompt_len, output_len, n and
    beam_width (the engine reads them once per run and per request: kvsim/engine/request_flow.py)."""
    limit, lookahead, one_group, block_size, num_blocks, swap, above_watermark = rule
    if prompt >= limit:
        return "prompt longer than max_model_len"
    if output > limit - prompt:
        output = limit - prompt
    # (Role.max_held_tokens and _pages_for's one-group case, inline: this runs for every request)
    total = prompt if lookahead is None else prompt + (output - 1 if output > 1 else 0) + lookahead
    seqs = n if n >= beams else beams
    blocks = seqs * (-(-total // block_size) if one_group else d._pages_for(total, prompt))
    # one sequence preempted by recompute prefills its prompt and generated tokens again (a group of
    # several restarts from its prompt): that prefill's pages must fit too (a sliding group's chunk)
    if (blocks if seqs > 1 or one_group else d._pages_for(total, total)) > num_blocks:
        return "request needs more KV blocks than the pool has"
    if (seqs > 1 or swap) and blocks + seqs * d.block_pages > above_watermark:
        # a swapped-out group returns only with the watermark's blocks (and a block per sequence for
        # its next token) to spare: it would wait forever
        return "request needs more KV blocks than the pool has above the watermark"
    return first_kv.refuse_reason(r, output) if first_kv is not None else None
