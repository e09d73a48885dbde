"""Kernel cost model (`cost.model: kernels`): the forward pass timed from a device's measured kernel
tables (kvsim/specs/kernel_tables.py, read off grids by kvsim/cost/kernel_grid.py), the roofline per op
where no table reaches.

Per iteration, on each GPU (an MoE model's routed experts and its other GEMMs: kvsim/cost/kernel_moe.py,
op `moe`; attention per layer kind: kvsim/cost/kernel_attention.py):

- linear layers (a GEMM wider than the measured grid is timed as the fewest equal GEMMs of its columns that
  fit, e.g. a 128k-vocabulary lm_head as two): per layer the GEMMs qkv (n = (q + 2 kv heads) x head_dim /
  tp, k = hidden), o (n = hidden, k = q heads x head_dim / tp), gate_up (n = 2 x intermediate / tp, k =
  hidden) and down (n = hidden, k = intermediate / tp) at m = the batch's tokens, times the layers, plus
  lm_head (n = vocab / tp, k = hidden) at m = the batch's sequences (logits of their last tokens only), at
  the weights' dtype (bf16 -> bfloat16, fp8 -> fp8; fp8_block -> the per-tensor fp8 GEMM times the measured
  ratio of the block-scaled kernel vLLM runs at that m, since the tables time fp8_block GEMMs eagerly, host
  launch included: kvsim/cost/kernel_fp8_block.py). The sum is taken at each measured m and interpolated in
  log-log between (one lookup per iteration).
- decode and prefill attention, per layer kind (full, sliding, MLA, Gated-DeltaNet state; compressed on
  the roofline): kvsim/cost/kernel_attention.py, summed over the model's layer groups.
- all-reduce (tp > 1): 2 per layer of tokens x hidden bf16 values, vLLM's custom all-reduce (its CUDA
  graph variant for decode-only batches the roofline replays as graphs, eager otherwise).

An op outside its table (a size beyond the measured grid, a shape class not measured, a layer kind or
dtype the tables lack) takes the roofline's term for it; `describe()` (summary.json's `cost_model`)
says which ops are on the tables, why the others are not, and for how many iterations each op fell back.
The overhead terms (fixed, per layer, per sequence) and everything else (swap, copies, sparsity traffic,
prefetch overlap) are the roofline's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kvsim.cost.batch import DECODE_SEQS, PREFILL_SEQS, PREFILL_TOKENS, SPEC_TOKENS, Batch
from kvsim.cost.kernel_attention import DECODE, PREFILL, KernelAttention
from kvsim.cost.kernel_fp8_block import REFERENCE_DTYPE, fp8_block_rows
from kvsim.cost.kernel_grid import KernelGrid, _right, fastest_grid
from kvsim.cost.kernel_moe import MoeKernels, nonexpert_gemms
from kvsim.cost.roofline import CUDA_GRAPH_MAX_SEQS, RooflineCost
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.kernel_tables import KernelTables
from kvsim.specs.model import ModelSpec

_COMPILED = not __file__.endswith(".py")
"""Compiled by Cython (kernels.pxd): forward_time reads the batch's fields by C indexing (roofline.pxd's
_batch_tuple; the positions C integers)."""

KERNEL_ITERATION_OVERHEAD_S = 4.12e-7
KERNEL_LAYER_OVERHEAD_S = 5.46e-5
"""The overhead terms of this model where the scenario sets none (`cost.iteration_overhead_s`,
`cost.layer_overhead_s`): fitted (kvsim/cost/overhead_fit.py: least squares on relative error, both terms
>= 0, the eager term 2.8e-5 s above the graph one, the per-sequence term held at the roofline's 1e-5 s) to
all six vLLM CI latency runs on A100, H100 and H200 (kvsim/cost/published_runs.yaml), each also predicted
by a fit on the other five (leave-one-out: docs/cost_model.md). The tables' kernels carry their own launch
time, so less is left per layer than the roofline's 7.2e-5 s, and nearly nothing per iteration."""
KERNEL_EAGER_LAYER_OVERHEAD_S = KERNEL_LAYER_OVERHEAD_S + 2.8e-5
"""Eager batches: the graph term plus the roofline's estimate of the CPU launches (1.0e-4 - 7.2e-5 s)."""
KERNEL_DEFAULTS = {"iteration_overhead_s": KERNEL_ITERATION_OVERHEAD_S,
                   "layer_overhead_s": KERNEL_LAYER_OVERHEAD_S,
                   "eager_layer_overhead_s": KERNEL_EAGER_LAYER_OVERHEAD_S}
GEMM_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8_block",
               "nvfp4": "nvfp4"}
"""Weight dtypes (ModelSpec.weight_dtype) -> the gemm table's dtype (fp16 runs as bf16 would; mxfp4 has
no GEMM table: the roofline)."""
NONEXPERT_GEMM_DTYPES = {**GEMM_DTYPES, "mxfp4": "bfloat16"}
"""The same for an MoE model's non-expert GEMMs: an mxfp4 model's are bf16 (vLLM's mxfp4 method quantizes
only the experts: kvsim/cost/kernel_moe.py)."""
OPS = ("linear", "decode_attention", "prefill_attention", "allreduce")


class _Curve:
    """A sum of kernels read at each measured size m, interpolated in log-log between (None outside).

    The interpolation is numpy.interp's on plain floats (its formula and its exact-knot and last-knot
    cases: the same bits), without a numpy call per lookup."""

    __slots__ = ("lo", "hi", "log_m", "log_t")

    def __init__(self, m: np.ndarray, seconds: np.ndarray) -> None:
        self.lo, self.hi = float(m[0]), float(m[-1])
        self.log_m: list[float] = np.log(m).tolist()
        self.log_t: list[float] = np.log(seconds).tolist()

    def __call__(self, x: float) -> float | None:
        return self.at(x)

    def at(self, x: float) -> float | None:
        """__call__ (compiled, a C call: math.log / math.exp are C's log / exp, which Python's call for a
        positive finite argument, and _right is bisect_right on the list's floats)."""
        if x < self.lo or x > self.hi:
            return None
        lx = math.log(x)
        xs, ys = self.log_m, self.log_t
        j = _right(xs, lx) - 1
        if j < 0:  # (log(lo) rounded above log(x) for x == lo: numpy.interp's left value)
            return math.exp(ys[0])
        if j >= len(xs) - 1 or xs[j] == lx:
            return math.exp(ys[j] if j < len(xs) else ys[-1])
        slope = (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])
        return math.exp(slope * (lx - xs[j]) + ys[j])


class KernelCost(RooflineCost):
    """Iteration time from the device's kernel tables (module docstring), the roofline's elsewhere."""

    name = "kernels"

    def __init__(self, model: ModelSpec, hw: HardwareSpec, tp: int, kv_dtype: str, bytes_per_block: float,
                 tables: KernelTables, **roofline: float) -> None:
        super().__init__(model, hw, tp, kv_dtype, bytes_per_block, **roofline)
        self.tables = tables
        self.why: dict[str, str] = {}
        """Op -> why it is on the roofline (ops on the tables are absent)."""
        self.fallback_iterations = dict.fromkeys(OPS, 0)
        self._fallbacks = 0  # (their sum: _dense compares it before and after, no copy of the dict)
        self.kernels: dict[str, str] = {}
        self._moe = self._moe_kernels(model, tp) if model.is_moe else None
        self._linear, self._lm_head = self._linear_curves(model, tp)
        # attention per layer kind (kvsim/cost/kernel_attention.py: its ops' names, reasons and kernels)
        self.attention = KernelAttention(model, tp, kv_dtype, tables, self.attn, self.bw,
                                         self.flops * self.e_attn)
        self.why.update(self.attention.why)
        self.kernels.update(self.attention.kernels)
        self._ar = self._allreduce_grids(tp)
        self._decode = self.attention.decode
        self._prefill = self.attention.prefill
        ops = self.attention.decode_ops, self.attention.prefill_ops
        self._decode_op = ops[0][0] if len(ops[0]) == 1 else None
        self._prefill_op = ops[1][0] if len(ops[1]) == 1 else None
        """The one decode (prefill) attention op when there is one (_decode is its `time`): called as a C
        method when compiled, not through the bound method."""
        self._hidden = model.hidden_size
        self._linear_memo: dict[tuple[int, int], float] = {}
        self._dense_memo: dict[tuple[int, int, bool], float] = {}
        """(tokens, sequences, CUDA graph) -> forward_time's terms before attention (see _dense)."""
        self._last_tokens = self._last_seqs = self._last_dense = None
        self._last_graph = False
        """The key forward_time last read from _dense_memo, and its value (forward_time)."""

    # ----------------------------------------------------------------- building the grids
    def _linear_curves(self, model: ModelSpec, tp: int) -> tuple[_Curve | None, _Curve | None]:
        gemms = nonexpert_gemms(model, tp) if model.is_moe else None  # kvsim/cost/kernel_moe.py
        if isinstance(gemms, str):
            self.why["linear"] = gemms
            return None, None
        dtype = (GEMM_DTYPES if gemms is None else NONEXPERT_GEMM_DTYPES).get(model.weight_dtype)
        if dtype is None or "gemm" not in self.tables:
            self.why["linear"] = f"no gemm table for weight dtype {model.weight_dtype}"
            return None, None
        df = self.tables["gemm"]
        block = fp8_block_rows(df) if dtype == "fp8_block" else None  # kvsim/cost/kernel_fp8_block.py
        df = df[df["dtype"] == (REFERENCE_DTYPE if block is not None else dtype)]
        if not len(df):
            self.why["linear"] = f"the gemm table has no {dtype} rows"
            return None, None
        self.kernels["linear"] = ", ".join(sorted(df["kernel"].unique()))
        if block is not None:
            self.kernels["linear"] = block.describe(self.kernels["linear"])
            df = block.rows
        grid = fastest_grid(df, ("m", "n", "k"))
        q, kv, hd, h, inter = (model.num_attention_heads, model.num_kv_heads, model.head_dim,
                               model.hidden_size, model.intermediate_size)
        n_max = float(grid.axes[1][-1])

        def split(n: int, k: int) -> tuple[int, int, int]:
            """(n, k, count): a GEMM wider than the grid as `count` equal GEMMs of its columns."""
            pieces = max(1, math.ceil(n / n_max))
            return -(-n // pieces), k, pieces

        layer_ops = [split(n, k) for n, k in ((((q + 2 * kv) * hd) // tp, h), (h, q * hd // tp),
                                              (2 * inter // tp, h), (h, inter // tp))]
        ms = grid.axes[0]

        def curve(ops: list[tuple[int, int, int]], times: int) -> _Curve | None:
            keep_m, keep_t = [], []
            for m in ms:
                parts = [grid(m, n, k) for n, k, _ in ops]
                if all(p is not None for p in parts):
                    keep_m.append(m)
                    keep_t.append(times * sum(p * c for p, (_, _, c) in zip(parts, ops, strict=True)))
            return _Curve(np.array(keep_m), np.array(keep_t)) if len(keep_m) >= 2 else None

        if gemms is None:
            layers = curve(layer_ops, model.num_layers)
        else:  # MoE: each GEMM with its own count of calls
            layers = curve([(n2, k2, c * calls) for n, k, calls in gemms for n2, k2, c in (split(n, k),)], 1)
        head = curve([split(model.vocab_size // tp, h)], 1)
        if layers is None or head is None:
            self.why["linear"] = "the model's GEMM shapes (n, k) lie outside the measured gemm grid"
            return None, None
        return layers, head

    def _allreduce_grids(self, tp: int) -> dict[str, KernelGrid] | None:
        if tp == 1:
            return None
        if "allreduce" not in self.tables:
            self.why["allreduce"] = "no allreduce table"
            return None
        df = self.tables["allreduce"]
        df = df[(df["gpus"] == tp) & (df["dtype"] == "bfloat16")]
        grids = {b: KernelGrid.from_rows(df[df["backend"] == b], ("elements",))
                 for b in sorted(set(df["backend"].tolist()))}
        if not {"vllm_graph", "vllm_eager"} <= set(grids):
            self.why["allreduce"] = f"no custom all-reduce measured over {tp} GPUs"
            return None
        self.kernels["allreduce"] = "vLLM custom all-reduce (graph / eager)"
        return grids

    def _moe_kernels(self, model: ModelSpec, tp: int) -> MoeKernels:
        moe = MoeKernels(model, tp, self.tables)
        self.fallback_iterations["moe"] = 0
        if moe.why:
            self.why["moe"] = moe.why
        else:
            self.kernels["moe"] = moe.kernel
        return moe

    # ----------------------------------------------------------------- timing
    def _fell_back(self, op: str) -> None:
        self.fallback_iterations[op] += 1
        self._fallbacks += 1

    def linear_kernel_time(self, tokens: int, seqs: int) -> float:
        if tokens <= 0:
            return 0.0
        key = (tokens, seqs)
        t = self._linear_memo.get(key)
        if t is None:
            t = self._linear_memo[key] = self._linear_uncached(tokens, seqs)
        if t < 0:
            self._fell_back("linear")
            return -t
        return t

    def _linear_uncached(self, tokens: int, seqs: int) -> float:
        """The linear layers' time, negated when it is the roofline's (the table did not reach)."""
        if self._linear is not None:
            body, head = self._linear.at(tokens), self._lm_head.at(max(1, seqs))
            if body is not None and head is not None:
                return body + head
        return -self.dense_linear_time(tokens)

    def moe_kernel_time(self, tokens: int) -> float:
        """The routed experts of an MoE model (kvsim/cost/kernel_moe.py); the roofline's term outside the
        moe table (0 where the roofline's linear term already holds them: a spec without its experts)."""
        if tokens <= 0 or not self.moe:
            return 0.0
        ep = self.expert_parallel
        if ep is not None:  # kvsim/cost/expert_parallel.py: dispatch, combine, experts
            t = ep.time(tokens)
            if not ep.last_on_table:
                self._fell_back("moe")
            return t

        t = self._moe.time(tokens)

        if t is None:
            self._fell_back("moe")
            return self.expert_linear_time(tokens)
        return t

    def allreduce_kernel_time(self, tokens: int, graph: bool) -> float:
        if self.tp == 1 or tokens <= 0:
            return 0.0
        if self._ar is not None:
            t = self._ar["vllm_graph" if graph else "vllm_eager"](tokens * self._hidden)
            if t is not None:
                return 2 * self.layers * t
        self._fell_back("allreduce")
        return self.allreduce_time(tokens)

    def decode_kernel_time(self, batch: Batch) -> float:
        return self.attention.decode(batch)

    def prefill_kernel_time(self, batch: Batch) -> float:
        return self.attention.prefill(batch)

    def forward_time(self, batch: Batch) -> float:
        # once per iteration: the terms that depend on (tokens, sequences, graph) alone -- the per-layer
        # overhead, linear and all-reduce -- come from a memo when every one was on its table (a fallback
        # is counted per iteration: those keys are never kept); attention is read each time. The last key
        # read from the memo and its value are kept too (`_last_*`): consecutive iterations mostly repeat
        # it, and its value is the memo's (a key is kept only with the bits working it out gives). (The
        # batch's fields by position: see RooflineCost.step_time)
        fields = _batch_tuple(batch) if _COMPILED else batch  # noqa: F821 (compiled: read by C indexing)
        prefill_seqs, prefill, b, spec = fields[PREFILL_SEQS], fields[PREFILL_TOKENS], fields[DECODE_SEQS], \
            fields[SPEC_TOKENS]
        tokens = prefill + b + spec
        if not tokens:
            return 0.0
        seqs = prefill_seqs + b + spec  # (a verify step's LM head: every position)
        graph = not prefill and b <= CUDA_GRAPH_MAX_SEQS
        if tokens == self._last_tokens and seqs == self._last_seqs and graph == self._last_graph:
            t = self._last_dense
        else:
            key = (tokens, seqs, graph)
            t = self._dense_memo.get(key)
            if t is None:
                t = self._dense(tokens, seqs, graph, key)
            else:
                self._last_tokens, self._last_seqs, self._last_graph = tokens, seqs, graph
                self._last_dense = t
        if prefill:
            op = self._prefill_op
            t += op.time(batch) if op is not None else self._prefill(batch)
        if b:
            op = self._decode_op
            t += op.time(batch) if op is not None else self._decode(batch)
        return t

    def _dense(self, tokens: int, seqs: int, graph: bool, key: tuple[int, int, bool]) -> float:
        """forward_time's terms before attention (kept in the memo when no op fell back)."""
        fallbacks = self._fallbacks
        t = (self.graph_layers_s if graph else self.eager_layers_s) + self.linear_kernel_time(tokens, seqs)
        if self._moe is not None:
            t += self.moe_kernel_time(tokens)
        if self.tp > 1:
            t += self.allreduce_kernel_time(tokens, graph)
        if fallbacks == self._fallbacks and self._moe is None:
            self._dense_memo[key] = t
        return t

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        prov = self.tables.provenance
        ops = (*(op for op in self.fallback_iterations if op not in (DECODE, PREFILL)), *self.attention.names)
        out.update({
            "model": self.name,
            "kernel_tables": {"profile": self.tables.profile, "project": prov.get("project"),
                              "commit": prov.get("commit")},
            "ops_on_tables": sorted(op for op in ops if op not in self.why
                                    and not (op == "allreduce" and self.tp == 1)),
            "ops_on_roofline": dict(sorted(self.why.items())),
            "kernels": dict(sorted(self.kernels.items())),
            "roofline_fallback_iterations": self.attention.fallback_iterations(self.fallback_iterations),
            "fitted_outside_grid_iterations": self.attention.fitted_iterations(),
        })
        return out
