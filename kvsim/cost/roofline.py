"""Roofline cost model: each iteration term is bounded by memory bandwidth or compute throughput."""

from __future__ import annotations

import math
from typing import Any

from kvsim.cost.attention import AttentionWork
from kvsim.cost.batch import Batch
from kvsim.errors import KvsimError
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.model import ModelSpec

ALLREDUCE_LATENCY_S = 8e-6
"""Fixed latency of one small all-reduce across GPUs of one node (NCCL, NVLink), per call."""


class RooflineCost:
    """Iteration time = overhead + linear + prefill attention + decode attention + all-reduce + copies.

    - linear layers: max(W / (B * e_bw), 2 * P_active * T / (F * e_gemm(T))), with W the weight bytes one
      step streams per GPU (ModelSpec.weight_stream_bytes: all weights but an untied input-embedding table,
      which is only looked up), B the HBM bandwidth, T the tokens in the batch, F the peak FLOP/s at the
      weight dtype and e_gemm(T) = e_max * T / (T + m_half) (small GEMMs reach a small share of peak).
    - prefill attention: attention FLOPs / (F * e_attn), and decode attention: KV bytes read / (B * e_bw),
      each summed over the model's layer groups (kvsim/cost/attention.py: sliding layers attend only their
      window, state layers read their state); for a model of full attention alone, FLOPs per (query, key)
      pair x pairs and context tokens x KV bytes per token per GPU.
    - tensor-parallel all-reduce (tp > 1): 2 per layer over T x hidden x 2 bytes, ring algorithm:
      2 (tp - 1) / tp x bytes / interconnect bandwidth + a fixed latency per call.
    - swap traffic over the host link, copy-on-write copies (read + write) at HBM bandwidth.
    - token-level sparsity (kv.sparsity): offload writes and recalls over the host link, compaction
      copies (read + write) at HBM bandwidth.
    - a fixed per-iteration overhead (scheduling, sampling, kernel launches).

    The tunables must be finite: overhead >= 0, the efficiencies in (0, 1], m_half > 0 (KvsimError
    naming the `cost.` key otherwise).
    """

    name = "roofline"

    def __init__(self, model: ModelSpec, hw: HardwareSpec, tp: int, kv_dtype: str, bytes_per_block: float,
                 iteration_overhead_s: float = 0.003, gemm_efficiency_max: float = 0.75,
                 gemm_efficiency_m_half: float = 64.0, bandwidth_efficiency: float = 0.85,
                 attention_efficiency: float = 0.5) -> None:
        _check_tunables(iteration_overhead_s=iteration_overhead_s, gemm_efficiency_max=gemm_efficiency_max,
                        gemm_efficiency_m_half=gemm_efficiency_m_half,
                        bandwidth_efficiency=bandwidth_efficiency, attention_efficiency=attention_efficiency)
        self.tp = tp
        self.overhead = iteration_overhead_s
        self.weight_bytes = model.weight_stream_bytes(tp)  # the input-embedding table is only looked up
        self.linear_flops_per_token = model.linear_flops_per_token() / tp
        self.attn_flops_per_pair = model.attention_flops_per_pair(tp)
        self.kv_bytes_per_token = model.kv_bytes_per_token(kv_dtype, tp)
        self.attn = AttentionWork(model, kv_dtype, tp)
        self.bytes_per_block = bytes_per_block
        self.bw = hw.hbm_bandwidth * bandwidth_efficiency
        self.flops = hw.flops(model.weight_dtype)
        self.e_max = gemm_efficiency_max
        self.m_half = gemm_efficiency_m_half
        self.e_attn = attention_efficiency
        self.host_bw = hw.host_link_bandwidth
        self.ar_bytes_per_token = 2 * model.hidden_size * 2 * model.num_layers
        self.ar_calls = 2 * model.num_layers
        self.ic_bw = hw.interconnect_bandwidth or hw.host_link_bandwidth
        self._params = {
            "model": self.name, "iteration_overhead_s": iteration_overhead_s,
            "gemm_efficiency_max": gemm_efficiency_max, "gemm_efficiency_m_half": gemm_efficiency_m_half,
            "bandwidth_efficiency": bandwidth_efficiency, "attention_efficiency": attention_efficiency,
            "effective_hbm_bandwidth": self.bw, "peak_flops": self.flops,
        }

    def linear_time(self, tokens: int) -> float:
        if tokens <= 0:
            return 0.0
        mem = self.weight_bytes / self.bw
        eff = self.e_max * tokens / (tokens + self.m_half)
        comp = self.linear_flops_per_token * tokens / (self.flops * eff)
        return mem if mem > comp else comp

    def allreduce_time(self, tokens: int) -> float:
        if self.tp == 1 or tokens <= 0:
            return 0.0
        ring = 2 * (self.tp - 1) / self.tp * self.ar_bytes_per_token * tokens / self.ic_bw
        return ring + self.ar_calls * ALLREDUCE_LATENCY_S

    def step_time(self, batch: Batch) -> float:
        tokens = batch.prefill_tokens + batch.decode_seqs
        t = self.overhead + self.linear_time(tokens) + self.allreduce_time(tokens)
        flops = self.attn.prefill_flops(batch)
        if flops:
            t += flops / (self.flops * self.e_attn)
        if batch.decode_seqs:
            t += self.attn.decode_bytes(batch) / self.bw
        if batch.swap_in_bytes or batch.swap_out_bytes:
            t += (batch.swap_in_bytes + batch.swap_out_bytes) / self.host_bw
        if batch.copy_blocks:
            t += 2 * batch.copy_blocks * self.bytes_per_block / self.bw
        if batch.recall_bytes or batch.offload_bytes:
            t += (batch.recall_bytes + batch.offload_bytes) / self.host_bw
        if batch.kv_copy_bytes:
            t += 2 * batch.kv_copy_bytes / self.bw
        return t

    def describe(self) -> dict[str, Any]:
        return dict(self._params)



def _check_tunables(**values: float) -> None:
    """Each roofline tunable within its range: overhead >= 0, m_half > 0 (both finite), efficiencies
    in (0, 1]."""
    for key, value in values.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if key == "iteration_overhead_s":
            ok, rule = number and value >= 0, "a finite number >= 0"
        elif key == "gemm_efficiency_m_half":
            ok, rule = number and value > 0, "a finite number > 0"
        else:
            ok, rule = number and 0 < value <= 1, "a number in (0, 1]"
        if not ok:
            raise KvsimError(f"cost.{key} must be {rule}, got {value!r}")
