"""Roofline cost model: each iteration term is bounded by memory bandwidth or compute throughput."""

from __future__ import annotations

import math
from typing import Any

from kvsim.cost.attention import AttentionWork
from kvsim.cost.batch import Batch
from kvsim.errors import KvsimError
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.model import ModelSpec, expected_distinct_experts

_COMPILED = not __file__.endswith(".py")
"""Compiled by Cython (roofline.pxd): step_time reads the batch's fields by C indexing."""

ALLREDUCE_LATENCY_S = 8e-6
"""Fixed latency of one small all-reduce across GPUs of one node (NCCL, NVLink), per call."""
CUDA_GRAPH_MAX_SEQS = 512
"""Largest decode-only batch vLLM replays as a CUDA graph (its largest default capture size); a bigger
one, or any batch with prefill tokens, pays the eager per-layer overhead."""

ITERATION_OVERHEAD_S = 4.4e-4
"""Fixed CPU time per iteration (scheduler, input preparation, output processing), whatever the batch:
fitted with LAYER_OVERHEAD_S to vLLM's CI latency tests (kvsim/cost/published_runs.yaml,
docs/cost_model.md)."""
LAYER_OVERHEAD_S = 7.2e-5
"""Seconds per layer per iteration on each GPU for a decode-only batch under CUDA graphs: the fixed time
of a layer's small kernels (norms, rotary, KV-cache write, attention, activation, the GEMMs' tails),
which do not stream at HBM bandwidth; fitted (see ITERATION_OVERHEAD_S)."""
EAGER_LAYER_OVERHEAD_S = 1.0e-4
"""Seconds per layer per iteration for batches run eagerly (prefill or mixed): LAYER_OVERHEAD_S plus the
CPU launch of ~14 kernels per layer at ~2 us each (an estimate, not fitted: prefill is 1 of the 128
steps of the latency tests)."""
SEQ_OVERHEAD_S = 1.0e-5
"""Seconds per sequence in the batch per iteration (sampling, scheduling, detokenizing one sequence): an
estimate; the published batch-8 tests cannot tell it from the fixed term (docs/cost_model.md)."""
GEMM_EFFICIENCY_MAX, GEMM_EFFICIENCY_M_HALF = 0.75, 64.0
"""GEMMs reach e_max * T / (T + m_half) of peak FLOP/s at T tokens (`cost.gemm_efficiency_*`)."""
BANDWIDTH_EFFICIENCY, ATTENTION_EFFICIENCY = 0.85, 0.5
"""Shares of peak HBM bandwidth and of peak FLOP/s (attention) reached (`cost.bandwidth_efficiency`,
`cost.attention_efficiency`)."""
REQUEST_OVERHEAD_S = 0.0
"""Seconds from a request's arrival until the engine can schedule it (the serving front end: HTTP,
tokenization, the hand-off to the engine core), once per request; every request's TTFT and E2E latency
include it, no iteration does. The roofline's fit is on offline runs (LLM.generate, no server): 0."""


class RooflineCost:
    """Iteration time = overhead + linear + prefill attention + decode attention + all-reduce + copies
    + the part of a layer-ahead prefetch the forward pass does not hide.

    - linear layers: max(W / (B * e_bw), 2 * P_active * T / (F * e_gemm(T))), with W the weight bytes one
      step streams per GPU (ModelSpec.weight_stream_bytes: all weights but an untied input-embedding table,
      which is only looked up), B the HBM bandwidth, T the tokens in the batch, F the peak FLOP/s at the
      weight dtype and e_gemm(T) = e_max * T / (T + m_half) (small GEMMs reach a small share of peak).
    - mixture-of-experts models whose spec routes experts (ModelSpec.routes_experts): a step of T tokens
      reads the weights of D(T) = E (1 - (1 - k / E)^T) distinct experts per MoE layer of the E routed
      ones (top-k, uniform and independent routing: expected_distinct_experts), so
      W(T) = W - R (1 - D(T) / E) with R the routed experts' bytes per GPU (ModelSpec.routed_expert_bytes);
      the FLOPs stay 2 * P_active * T, split into the non-expert part at e_gemm(T) and the experts' part
      2 * P_expert_active * T at e_gemm(T k / D(T)), the tokens each read expert's GEMM gets (1 at T = 1,
      T k / E for large T): linear = max(W(T) / (B e_bw), dense FLOPs / (F e_gemm(T)) + expert FLOPs /
      (F e_gemm(T k / D(T)))). A dense model's terms are unchanged.
    - prefill attention: attention FLOPs / (F * e_attn), and decode attention: KV bytes read / (B * e_bw),
      each summed over the model's layer groups (kvsim/cost/attention.py: sliding layers attend only their
      window, state layers read their state); for a model of full attention alone, FLOPs per (query, key)
      pair x pairs and context tokens x KV bytes per token per GPU.
    - tensor-parallel all-reduce (tp > 1): 2 per layer over T x hidden x 2 bytes, ring algorithm:
      2 (tp - 1) / tp x bytes / interconnect bandwidth + a fixed latency per call.
    - swap traffic over the host link, copy-on-write copies (read + write) at HBM bandwidth.
    - token-level sparsity (kv.sparsity): offload writes and re-read recalls over the host link and
      compaction copies (read + write) at HBM bandwidth, all added serially (the iteration waits).
    - InfiniGen's per-step prefetch (Batch.prefetch_bytes) is overlapped with the forward pass, layer by
      layer: with C the forward time it overlaps (forward_time: the per-layer overhead, linear layers,
      all-reduce, prefill and decode attention; not the fixed and per-sequence overhead, nor swap,
      copy-on-write, recall, offload or compaction traffic, which stay serial), F = prefetch bytes /
      host link bandwidth and L layers, layer i + 1's fetch runs during layer i's compute, the first
      layer's fetch before any: the forward pass takes max(C + F / L, F + C / L) instead of C, so the
      iteration grows by exposed = max(F / L, F - C (L - 1) / L) (prefetch_exposed); it is
      transfer-bound (a stall) when F > C (prefetch_overlap).
    - overhead: iteration_overhead_s (fixed CPU time) + layers x layer_overhead_s (decode-only batches of
      at most CUDA_GRAPH_MAX_SEQS sequences, replayed as CUDA graphs) or eager_layer_overhead_s (any
      batch with prefill tokens, or a larger one: eager launches) + sequences x seq_overhead_s, the
      defaults fitted to vLLM's published latency tests (docs/cost_model.md). An empty batch (nothing
      scheduled) costs the fixed term only.
    - tensor-parallel all-reduce bandwidth: the profile's interconnect_bandwidth_by_tp[tp] where it has
      one (a mesh such as MI300X's Infinity Fabric, where tp GPUs use only the links among them), else
      interconnect_bandwidth (a switch: NVSwitch); a TP group larger than the profile's nvlink_domain
      spans domains and runs at network_bandwidth (the host link where the profile gives none).

    The tunables must be finite: overheads >= 0, the efficiencies in (0, 1], m_half > 0 (KvsimError
    naming the `cost.` key otherwise).
    """

    name = "roofline"
    expert_parallel = None
    """With parallelism.enable_expert_parallel, the ExpertParallel (kvsim/cost/expert_parallel.py) that
    times the routed experts in place of this model's expert term (set by build_cost_model)."""
    selected = None
    """With `cost.model: auto`, which model it chose and why, a str (summary.json's cost_model.selected)."""

    def __init__(self, model: ModelSpec, hw: HardwareSpec, tp: int, kv_dtype: str, bytes_per_block: float,
                 iteration_overhead_s: float = ITERATION_OVERHEAD_S,
                 gemm_efficiency_max: float = GEMM_EFFICIENCY_MAX,
                 gemm_efficiency_m_half: float = GEMM_EFFICIENCY_M_HALF,
                 bandwidth_efficiency: float = BANDWIDTH_EFFICIENCY,
                 attention_efficiency: float = ATTENTION_EFFICIENCY,
                 layer_overhead_s: float = LAYER_OVERHEAD_S,
                 eager_layer_overhead_s: float = EAGER_LAYER_OVERHEAD_S,
                 seq_overhead_s: float = SEQ_OVERHEAD_S,
                 request_overhead_s: float = REQUEST_OVERHEAD_S) -> None:
        _check_tunables(iteration_overhead_s=iteration_overhead_s, gemm_efficiency_max=gemm_efficiency_max,
                        gemm_efficiency_m_half=gemm_efficiency_m_half,
                        bandwidth_efficiency=bandwidth_efficiency, attention_efficiency=attention_efficiency,
                        layer_overhead_s=layer_overhead_s, eager_layer_overhead_s=eager_layer_overhead_s,
                        seq_overhead_s=seq_overhead_s, request_overhead_s=request_overhead_s)
        self.tp = tp
        self.request_overhead = request_overhead_s
        self.layers = model.num_layers
        self.overhead = iteration_overhead_s
        self.graph_layers_s = model.num_layers * layer_overhead_s
        self.eager_layers_s = model.num_layers * eager_layer_overhead_s
        self.seq_overhead = seq_overhead_s
        self.weight_bytes = model.weight_stream_bytes(tp)  # the input-embedding table is only looked up
        self.linear_flops_per_token = model.linear_flops_per_token() / tp
        self.moe = model.routes_experts and model.is_moe
        if self.moe:
            self.experts, self.topk = model.num_experts, model.experts_per_token
            self.expert_bytes = model.routed_expert_bytes(tp)
            self.expert_flops_per_token = min(self.linear_flops_per_token, 2.0 * model.moe_layer_count
                                              * model.experts_per_token * model.expert_params / tp)
            self.dense_flops_per_token = self.linear_flops_per_token - self.expert_flops_per_token
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
        by_tp = hw.interconnect_bandwidth_by_tp or {}
        self.beyond_domain = bool(hw.nvlink_domain) and tp > hw.nvlink_domain
        if self.beyond_domain:  # the group spans scale-up domains: the ring runs at the slowest hop
            self.ic_bw = hw.network_bandwidth or hw.host_link_bandwidth
        else:
            self.ic_bw = by_tp.get(tp) or hw.interconnect_bandwidth or hw.host_link_bandwidth
        self._params = {
            "model": self.name, "iteration_overhead_s": iteration_overhead_s,
            "layer_overhead_s": layer_overhead_s, "eager_layer_overhead_s": eager_layer_overhead_s,
            "seq_overhead_s": seq_overhead_s, "request_overhead_s": request_overhead_s,
            "gemm_efficiency_max": gemm_efficiency_max, "gemm_efficiency_m_half": gemm_efficiency_m_half,
            "bandwidth_efficiency": bandwidth_efficiency, "attention_efficiency": attention_efficiency,
            "effective_hbm_bandwidth": self.bw, "peak_flops": self.flops,
            "allreduce_bandwidth": self.ic_bw if tp > 1 else None,
            **({"allreduce_link": f"network (tensor_parallel_size {tp} > nvlink_domain "
                                  f"{hw.nvlink_domain})"} if self.beyond_domain else {}),
        }

    def tunables(self) -> dict[str, float]:
        """The constructor's keyword arguments this model was built with (for a model built on it)."""
        keys = ("iteration_overhead_s", "gemm_efficiency_max", "gemm_efficiency_m_half",
                "bandwidth_efficiency", "attention_efficiency", "layer_overhead_s", "eager_layer_overhead_s",
                "seq_overhead_s", "request_overhead_s")
        return {k: self._params[k] for k in keys}

    def linear_time(self, tokens: int) -> float:
        if tokens <= 0:
            return 0.0
        if self.moe:
            if self.expert_parallel is not None:
                return self.dense_linear_time(tokens) + self.expert_parallel.time(tokens)
            mem_d, comp_d, mem_e, comp_e = self._moe_terms(tokens)
            mem, comp = mem_d + mem_e, comp_d + comp_e
            return mem if mem > comp else comp
        mem = self.weight_bytes / self.bw
        eff = self.e_max * tokens / (tokens + self.m_half)
        comp = self.linear_flops_per_token * tokens / (self.flops * eff)
        return mem if mem > comp else comp

    def _moe_terms(self, tokens: int) -> tuple[float, float, float, float]:
        """(memory, compute) seconds of the non-expert linear layers, then of the routed experts, for a
        step of `tokens` tokens (class docstring)."""
        read = expected_distinct_experts(self.experts, self.topk, tokens)
        expert_mem = self.expert_bytes * read / self.experts / self.bw
        dense_mem = (self.weight_bytes - self.expert_bytes) / self.bw
        per_expert = tokens * self.topk / read
        dense_comp = self.dense_flops_per_token * tokens / (
            self.flops * self.e_max * tokens / (tokens + self.m_half))
        expert_comp = self.expert_flops_per_token * tokens / (
            self.flops * self.e_max * per_expert / (per_expert + self.m_half))
        return dense_mem, dense_comp, expert_mem, expert_comp

    def dense_linear_time(self, tokens: int) -> float:
        """The linear layers but the routed experts (linear_time for a dense model): max(memory,
        compute) of that part alone."""
        if not self.moe:
            return self.linear_time(tokens)
        if tokens <= 0:
            return 0.0
        mem, comp, _, _ = self._moe_terms(tokens)
        return mem if mem > comp else comp

    def expert_linear_time(self, tokens: int) -> float:
        """The routed experts alone (0 for a dense model): max(memory, compute) of D(T) experts' weights
        and the experts' FLOPs at e_gemm(T k / D(T))."""
        if not self.moe or tokens <= 0:
            return 0.0
        _, _, mem, comp = self._moe_terms(tokens)
        return mem if mem > comp else comp

    def overhead_time(self, batch: Batch) -> float:
        """The fixed term, plus, when the batch computes anything, the per-layer term (CUDA graph for a
        decode-only batch of at most CUDA_GRAPH_MAX_SEQS sequences, eager otherwise) and the per-sequence
        term."""
        if not (batch.prefill_tokens or batch.decode_seqs):
            return self.overhead
        return self.overhead + self.layer_overhead_time(batch) + (
            batch.prefill_seqs + batch.decode_seqs) * self.seq_overhead

    def layer_overhead_time(self, batch: Batch) -> float:
        """The per-layer part of the overhead (0 for a batch that computes nothing)."""
        if not (batch.prefill_tokens or batch.decode_seqs):
            return 0.0
        graph = not batch.prefill_tokens and batch.decode_seqs <= CUDA_GRAPH_MAX_SEQS
        return self.graph_layers_s if graph else self.eager_layers_s

    def allreduce_time(self, tokens: int) -> float:
        if self.tp == 1 or tokens <= 0:
            return 0.0
        ring = 2 * (self.tp - 1) / self.tp * self.ar_bytes_per_token * tokens / self.ic_bw
        return ring + self.ar_calls * ALLREDUCE_LATENCY_S

    def step_time(self, batch: Batch) -> float:
        # (once per iteration, the fields by position: Batch's, pinned by tests/cost/test_batch.py. Compiled,
        # read from the tuple by C indexing, no slice made (roofline.pxd's _batch_tuple); as Python, the first
        # 17 unpacked at once from a slice -- a tuple, whose unpacking reads its items directly, cheaper than
        # unpacking all 21 through an iterator or reading each by name)
        if _COMPILED:
            fields = _batch_tuple(batch)  # noqa: F821
            prefill_seqs, decode_seqs, prefetch = fields[1], fields[4], fields[16]
            swap_in, swap_out, copy_blocks, recall, offload, kv_copy = \
                fields[7], fields[8], fields[9], fields[10], fields[11], fields[12]
        else:
            (_, prefill_seqs, _, _, decode_seqs, _, _, swap_in, swap_out, copy_blocks, recall, offload,
             kv_copy, _, _, _, prefetch) = batch[:17]
        t = self.forward_time(batch) + self.overhead + (prefill_seqs + decode_seqs) * self.seq_overhead
        if swap_in or swap_out:
            t += (swap_in + swap_out) / self.host_bw
        if copy_blocks:
            t += 2 * copy_blocks * self.bytes_per_block / self.bw
        if recall or offload:
            t += (recall + offload) / self.host_bw
        if kv_copy:
            t += 2 * kv_copy / self.bw
        if prefetch:
            t += self.prefetch_overlap(batch)[2]
        return t

    def forward_time(self, batch: Batch) -> float:
        """The forward pass a prefetch overlaps: per-layer overhead + linear + all-reduce + prefill and
        decode attention (the terms that run layer by layer on the GPU)."""
        tokens = batch.prefill_tokens + batch.decode_seqs + batch.spec_tokens
        t = self.layer_overhead_time(batch) + self.linear_time(tokens) + self.allreduce_time(tokens)
        flops = self.attn.prefill_flops(batch)
        if flops:
            t += flops / (self.flops * self.e_attn)
        if batch.decode_seqs:
            t += self.attn.decode_bytes(batch) / self.bw
        return t

    def prefetch_overlap(self, batch: Batch) -> tuple[float, float, float]:
        """(C, F, exposed) of the batch's prefetch: the forward time it overlaps, its transfer time over
        the host link, and what compute does not hide (prefetch_exposed); F > C is a transfer-bound
        iteration."""
        compute = self.forward_time(batch)
        transfer = batch.prefetch_bytes / self.host_bw
        return compute, transfer, prefetch_exposed(compute, transfer, self.layers)

    def describe(self) -> dict[str, Any]:
        out = dict(self._params)
        if self.selected:
            out["selected"] = self.selected
        if self.expert_parallel is not None:
            out["expert_parallel"] = self.expert_parallel.describe()
        return out



def prefetch_exposed(compute_s: float, transfer_s: float, layers: int) -> float:
    """Time a layer-ahead prefetch adds to a forward pass: L layers of compute c = C / L each, fetch
    f = F / L each, layer i + 1's fetch during layer i's compute and the first layer's before any; the
    pass takes f + (L - 1) max(c, f) + c = max(C + F / L, F + C / L), i.e. C plus
    max(F / L, F - C (L - 1) / L)."""
    if transfer_s <= 0:
        return 0.0
    n = max(1, layers)
    return max(transfer_s / n, transfer_s - compute_s * (n - 1) / n)


def _check_tunables(**values: float) -> None:
    """Each roofline tunable within its range: overheads (`*_overhead_s`) >= 0, m_half > 0 (both
    finite), efficiencies in (0, 1]."""
    for key, value in values.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if key.endswith("overhead_s"):
            ok, rule = number and value >= 0, "a finite number >= 0"
        elif key == "gemm_efficiency_m_half":
            ok, rule = number and value > 0, "a finite number > 0"
        else:
            ok, rule = number and 0 < value <= 1, "a number in (0, 1]"
        if not ok:
            raise KvsimError(f"cost.{key} must be {rule}, got {value!r}")
