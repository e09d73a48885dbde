"""The MoE layers of one step under expert parallelism (parallelism.enable_expert_parallel, docs/moe.md):
the dispatch and combine between the EP ranks and the routed experts' GEMMs on the busiest rank, for
every MoE layer, in place of the cost model's routed-expert term.

A step of T tokens on one DP rank (the batch the replica's scheduler formed). The DP ranks step through
the MoE layers together (vLLM runs dummy batches on idle ranks so that every rank enters each MoE layer's
collective); kvsim assumes the other DP - 1 ranks carry as many tokens as this one (balanced load), so
the EP group's MoE layer sees T_group = DP x T tokens. Per MoE layer:

- dispatch and combine (`all2all_backend`), each a collective timed by `collective_time`:
  `gather` backends (allgather_reducescatter, vLLM's default; naive): all-gather over the DP group of
  T_group x hidden bf16 values (every GPU gets every DP rank's tokens), then reduce-scatter of as many
  (the experts' partial outputs back to their rank); none when DP = 1 (the TP ranks already share the
  tokens; their partial outputs are summed by the tensor-parallel all-reduce the cost model charges).
  `alltoall` backends (deepep_*, pplx): each GPU sends its T / TP tokens' top-k copies, T / TP x k x
  hidden values at the dispatch dtype (kvsim/specs/expert_parallel.py dispatch_bytes_per_value), to the
  EP ranks holding the picked experts, and receives as many bf16 outputs back (combine).
- experts: the busiest EP rank runs its num_experts / EP experts over L x T_group x k / EP routed tokens
  (L = expert_load_factor, 1 balanced): the moe table's time at ep = EP, tp = 1 and L x T_group tokens
  (kvsim/cost/kernel_moe.py; its rows at ep = EP time one rank's share of that many tokens), else the
  roofline's expert term on that rank (expert_roofline).

The collectives: the device's nccl table (`op` alltoall, all_gather, reduce_scatter; `elements` half
values in each GPU's buffer) where it measured that GPU count and size (log-log between sizes:
kvsim/cost/kernel_grid.py), else the links: a GPU's bytes to its peers in its NVLink domain at
interconnect_bandwidth and to the others at network_bandwidth (the slower path sets the time; a ring
crossing domains runs at network_bandwidth), plus COLLECTIVE_LATENCY_S.
"""

from __future__ import annotations

import math
from typing import Any

from kvsim.cost.kernel_grid import KernelGrid
from kvsim.cost.kernel_moe import MoeKernels
from kvsim.specs.dtypes import DTYPE_BYTES
from kvsim.specs.expert_parallel import ALL2ALL_BACKENDS, dispatch_bytes_per_value, experts_per_gpu
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.kernel_tables import KernelTables
from kvsim.specs.model import ModelSpec

COLLECTIVE_LATENCY_S = 8e-6
"""Fixed latency of one collective over the links (the roofline's all-reduce latency: NCCL's small
messages over NVLink take 5-12 us in the h200 nccl table)."""
BF16 = 2
TABLE_OPS = {"alltoall": "alltoall", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter"}


class Links:
    """The links a collective over `gpus` GPUs uses: NVLink within the profile's nvlink_domain, the
    NIC beyond (module docstring)."""


    __slots__ = ("nvlink", "network", "domain")

    def __init__(self, hw: HardwareSpec) -> None:
        self.nvlink = hw.interconnect_bandwidth or hw.host_link_bandwidth
        self.network = hw.network_bandwidth or hw.host_link_bandwidth
        self.domain = hw.nvlink_domain or 0

    def seconds(self, op: str, nbytes: float, gpus: int) -> float:
        """One collective of `nbytes` per GPU buffer over `gpus` GPUs: alltoall sends nbytes / gpus to
        each peer, (local - 1) peers over NVLink and gpus - local over the NIC (local: the GPUs of one
        domain in the group); all_gather / reduce_scatter (ring) move nbytes (gpus - 1) / gpus over the
        slowest hop."""
        local = min(gpus, self.domain) if self.domain else gpus
        if op == "alltoall":
            nv = nbytes * (local - 1) / gpus / self.nvlink
            nic = nbytes * (gpus - local) / gpus / self.network
            return max(nv, nic) + COLLECTIVE_LATENCY_S
        bw = self.nvlink if local == gpus else self.network
        return nbytes * (gpus - 1) / gpus / bw + COLLECTIVE_LATENCY_S


class ExpertParallel:
    """Per-step MoE time under expert parallelism (module docstring): `time(tokens)` = MoE layers x
    (dispatch + combine) + the busiest rank's experts; it adds them to `alltoall_s` and `expert_s` and
    counts `steps`, read by `describe()` (summary.json's cost_model.expert_parallel)."""

    __slots__ = ("tp", "dp", "ep", "backend", "mode", "layers", "load", "hidden", "topk", "experts",
                 "local_experts", "dispatch_bytes", "links", "grids", "moe", "roofline", "why_experts",
                 "alltoall_s", "expert_s", "steps", "table_steps", "last_on_table", "_memo", "_sources")

    def __init__(self, model: ModelSpec, hw: HardwareSpec, tp: int, dp: int, backend: str,
                 load_factor: float, tables: KernelTables | None, roofline) -> None:
        self.tp, self.dp, self.ep = tp, dp, tp * dp
        self.backend, self.mode = backend, ALL2ALL_BACKENDS[backend]
        self.layers = model.moe_layer_count
        self.load = load_factor
        self.hidden, self.topk, self.experts = model.hidden_size, model.experts_per_token, model.num_experts
        self.local_experts = experts_per_gpu(model, self.ep)
        self.dispatch_bytes = dispatch_bytes_per_value(model, backend) if self.mode == "alltoall" else BF16
        self.links = Links(hw)
        self.roofline = ExpertRoofline(model, self.ep, roofline)
        self.grids: dict[tuple[str, int], KernelGrid] = {}
        self.moe: MoeKernels | None = None
        self.why_experts = "roofline cost model (no kernel tables)"
        if tables is not None:
            self._table_grids(tables)
            self.moe = MoeKernels(model, 1, tables, ep=self.ep)
            self.why_experts = self.moe.why or ""
        self.alltoall_s = self.expert_s = 0.0
        self.steps = self.table_steps = 0
        self.last_on_table = False
        """Whether the last step's experts came from the moe table (KernelCost counts the others)."""
        self._memo: dict[int, tuple[float, float, bool]] = {}
        self._sources: set[str] = set()

    def _table_grids(self, tables: KernelTables) -> None:
        if "nccl" not in tables:
            return
        df = tables["nccl"]
        df = df[df["dtype"] == "half"]
        for (op, gpus), rows in df.groupby(["op", "gpus"]):
            if op in TABLE_OPS and len(rows) >= 2:
                self.grids[(op, int(gpus))] = KernelGrid.from_rows(rows, ("elements",))

    # ------------------------------------------------------------------ the terms
    def collective_time(self, op: str, nbytes: float, gpus: int) -> float:
        """One collective (module docstring): the nccl table where it measured `gpus` and this size, else
        the links."""
        if gpus <= 1 or nbytes <= 0:
            return 0.0
        grid = self.grids.get((op, gpus))
        if grid is not None:
            t = grid(nbytes / BF16)
            if t is not None:
                self._sources.add(f"{op} over {gpus} GPUs: nccl table")
                return t
        self._sources.add(f"{op} over {gpus} GPUs: links")
        return self.links.seconds(op, nbytes, gpus)

    def layer_comm_time(self, tokens: int) -> float:
        """Dispatch + combine of one MoE layer for a DP rank's step of `tokens` tokens."""
        if self.mode == "gather":
            group = self.dp * tokens * self.hidden * BF16
            return (self.collective_time("all_gather", group, self.dp)
                    + self.collective_time("reduce_scatter", group, self.dp))
        per_gpu = tokens / self.tp * self.topk * self.hidden
        return (self.collective_time("alltoall", per_gpu * self.dispatch_bytes, self.ep)
                + self.collective_time("alltoall", per_gpu * BF16, self.ep))

    def expert_time(self, tokens: int) -> tuple[float, bool]:
        """(every MoE layer's experts on the busiest rank, whether from the moe table) for a DP rank's
        step of `tokens` tokens."""
        routed = max(1, round(self.load * self.dp * tokens))
        if self.moe is not None and self.moe.grid is not None:
            t = self.moe.time(routed)
            if t is not None:
                return t, True
        return self.roofline.time(routed), False

    def time(self, tokens: int) -> float:
        """MoE layers x (dispatch + combine) + experts for a step of `tokens` tokens (0 for none)."""
        if tokens <= 0:
            return 0.0
        terms = self._memo.get(tokens)
        if terms is None:
            comm = self.layers * self.layer_comm_time(tokens)
            terms = self._memo[tokens] = (comm, *self.expert_time(tokens))
        comm, experts, on_table = terms
        self.alltoall_s += comm
        self.expert_s += experts
        self.steps += 1
        self.table_steps += on_table
        self.last_on_table = on_table
        return comm + experts

    def describe(self) -> dict[str, Any]:
        """summary.json's cost_model.expert_parallel (docs/moe.md defines each figure)."""
        steps = self.steps
        return {
            "expert_parallel_size": self.ep, "data_parallel_size": self.dp, "tensor_parallel_size": self.tp,
            "experts_per_gpu": self.local_experts, "all2all_backend": self.backend,
            "dispatch_bytes_per_value": self.dispatch_bytes, "expert_load_factor": self.load,
            "tokens_entering_moe": "data_parallel_size x the DP rank's step tokens (DP ranks in lockstep,"
                                   " balanced)",
            "collectives": sorted(self._sources),
            "experts": (f"moe table, ep {self.ep}: {self.moe.kernel}" if self.moe is not None
                        and not self.moe.why else f"roofline ({self.why_experts})"),
            "expert_table_steps": self.table_steps,
            "steps": steps,
            "alltoall_s_total": self.alltoall_s, "expert_s_total": self.expert_s,
            "alltoall_s_per_step": self.alltoall_s / steps if steps else 0.0,
            "expert_s_per_step": self.expert_s / steps if steps else 0.0,
        }


class ExpertRoofline:
    """The roofline's routed-expert term on one EP rank: for R routed tokens entering the EP group's MoE
    layer, the rank reads D = (E / EP)(1 - (1 - k / E)^R) of its E / EP experts (uniform, independent
    routing) and runs P = R k / EP token-expert pairs: max(layers x D x expert bytes / (B e_bw),
    layers x 2 x expert_params x P / (F e_gemm(P / D)))."""

    __slots__ = ("layers", "local", "experts", "topk", "ep", "expert_bytes", "expert_params", "bw", "flops",
                 "e_max", "m_half")

    def __init__(self, model: ModelSpec, ep: int, roofline) -> None:
        self.layers, self.ep = model.moe_layer_count, ep
        self.experts, self.topk = model.num_experts, model.experts_per_token
        self.local = model.num_experts // ep
        self.expert_params = model.expert_params
        self.expert_bytes = model.expert_params * DTYPE_BYTES[model.weight_dtype]
        self.bw, self.flops = roofline.bw, roofline.flops
        self.e_max, self.m_half = roofline.e_max, roofline.m_half

    def time(self, routed: float) -> float:
        if routed <= 0:
            return 0.0
        read = self.local * -math.expm1(routed * math.log1p(-self.topk / self.experts)) \
            if self.topk < self.experts else float(self.local)
        pairs = routed * self.topk / self.ep
        per_expert = pairs / read
        mem = self.layers * read * self.expert_bytes / self.bw
        comp = self.layers * 2.0 * self.expert_params * pairs / (
            self.flops * self.e_max * per_expert / (per_expert + self.m_half))
        return mem if mem > comp else comp
