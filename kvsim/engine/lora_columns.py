"""Multi-LoRA in the engine (docs/lora.md): one pool's adapter sizes, its replicas' `AdapterSlots`, the
cost model with the LoRA terms, the request and timeline column groups and the meta key `lora`."""

from __future__ import annotations

from typing import Any

from kvsim.cost.roofline import CUDA_GRAPH_MAX_SEQS
from kvsim.lora.adapters import AdapterTable, adapter_table
from kvsim.lora.config import KERNEL_OVERHEAD_S, LoraConfig
from kvsim.lora.cost import LoraCost
from kvsim.lora.sizing import (
    activation_bytes,
    adapter_file_bytes,
    check_model,
    kernels_per_step,
    slot_bytes,
    slot_params,
)
from kvsim.lora.slots import AdapterSlots
from kvsim.metrics.recorder import ColumnGroup, Recorder
from kvsim.specs.model import ModelSpec

REQUEST_COLUMNS = {"adapter": "q", "lora_found": "q", "lora_loads": "q", "lora_load_bytes": "d",
                   "lora_load_wait_s": "d", "lora_skips": "q"}
"""adapter: its index in the lora adapters (-1 the base model); lora_found: where its first admission
found the adapter (0 a GPU slot, 1 host memory, 2 neither: read from disk; -1 no adapter or never
admitted); lora_loads / lora_load_bytes / lora_load_wait_s: adapter loads into a GPU slot its admissions
caused, the bytes they moved per GPU and the seconds they added to the iterations; lora_skips:
scheduling passes that skipped it for the distinct-adapter limit."""
TIMELINE_COLUMNS = {"lora_tokens": "q", "lora_adapters": "q", "lora_load_s": "d"}
"""Per iteration: tokens of requests with an adapter, distinct adapters of the running requests, seconds
of adapter loads the iteration waited for."""


class LoraSizing:
    """The adapters of a `lora` section on one pool's model and tensor parallelism: one slot's bytes and
    parameters per GPU at max_lora_rank, all slots' bytes (taken from the KV memory), each adapter's load
    (per GPU, at its own rank) and disk bytes (whole)."""

    def __init__(self, cfg: LoraConfig, model: ModelSpec, tp: int) -> None:
        check_model(model)
        self.cfg = cfg
        self.table: AdapterTable = adapter_table(cfg)
        self.slot_bytes = slot_bytes(model, cfg.max_lora_rank, tp)
        self.slot_params = slot_params(model, cfg.max_lora_rank, tp)
        self.slots_bytes = cfg.max_loras * self.slot_bytes
        self.model = model
        self.activation_bytes = activation_bytes(model, cfg.max_lora_rank, tp)
        unit = slot_bytes(model, 1, tp)
        self.gpu_bytes = (self.table.ranks * unit).tolist()
        self.disk_bytes = (self.table.ranks * adapter_file_bytes(model, 1)).tolist()
        self.blocks_lost = 0
        """KV blocks the slots cost (set by the Deployment: the pool's blocks without them, minus with)."""

    def cost_model(self, inner, scenario, hw):
        """`inner` with the LoRA terms: the punica era is v0 under scheduler.policy vllm_v0 (vLLM 0.6's
        per-slice sgmv / bgmv launches), else v1; lora.kernel_overhead_s defaults to the era's value."""
        c = scenario.cost
        era = "v0" if scenario.scheduler.policy == "vllm_v0" else "v1"
        k_s = self.cfg.kernel_overhead_s
        return LoraCost(inner, self.slot_bytes, self.slot_params, kernels_per_step(self.model, era),
                        KERNEL_OVERHEAD_S[era] if k_s is None else k_s,
                        hw.hbm_bandwidth * c.bandwidth_efficiency, hw.flops("bf16"), c.gemm_efficiency_max,
                        c.gemm_efficiency_m_half, self.activation_bytes, era,
                        self.cfg.graph_kernel_overhead_s, CUDA_GRAPH_MAX_SEQS)

    def disk_bandwidth(self, hw) -> float:
        gbps = self.cfg.disk_bandwidth_gbps
        return gbps * 1e9 if gbps is not None else hw.ssd_bandwidth

    def slots(self, hw) -> AdapterSlots:
        """A fresh replica's adapter slots (empty: every adapter starts on disk)."""
        return AdapterSlots(self.cfg.max_loras, self.cfg.cpu_loras, self.gpu_bytes, self.disk_bytes,
                            hw.host_link_bandwidth, self.disk_bandwidth(hw))


def register_columns(recorder: Recorder) -> None:
    recorder.add_request_columns(ColumnGroup(REQUEST_COLUMNS, default=0))
    recorder.add_timeline_columns(ColumnGroup(TIMELINE_COLUMNS, default=0))


def timeline_values(slots: AdapterSlots) -> tuple:
    return slots.last


def run_totals(deployments: list, replicas: list, block_size: int) -> dict[str, Any]:
    """The meta key `lora`: the first pool's settings and sizes, and each replica's counters."""
    first = next(d for d in deployments if d.lora is not None)
    lo = first.lora
    cfg = lo.cfg
    return {
        "max_loras": cfg.max_loras, "max_lora_rank": cfg.max_lora_rank, "max_cpu_loras": cfg.cpu_loras,
        "adapters": len(lo.table), "base_fraction": cfg.base_fraction,
        "slot_bytes_per_gpu": lo.slot_bytes, "slots_bytes_per_gpu": lo.slots_bytes,
        "kv_blocks_lost": lo.blocks_lost, "kv_tokens_lost": lo.blocks_lost * block_size,
        "per_replica": [{"index": r.index, **r.sched.lora.totals()} for r in replicas],
    }
