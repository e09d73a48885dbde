"""Mixture-of-experts layers for the kernel cost model (kvsim/cost/kernels.py): the routed experts of a step
read off the device's moe table, the rest of the model's linear layers as GEMMs.

The moe table (kvsim/specs/kernel_tables.py `moe`; AIConfigurator's collector/vllm/collect_moe.py at the
commit in PROVENANCE.json) times one call of vLLM's fused-experts kernel for one layer: `tokens` tokens
entering the layer, each routed to `topk` of `experts` experts of `hidden` x `inter` (inter: the expert's
whole intermediate size; the GPU holds inter / tp of it, and experts / ep experts), the routing given
(the router GEMM and the shared experts are not in it). Its `balanced` rows spread the tokens' picks evenly
over the experts; `power_law_*` rows skew them.

The model's shape class is (dtype, hidden_size, moe_intermediate_size, experts_per_token, num_experts,
tp = tensor_parallel_size, ep = 1: kvsim has no expert parallelism, so every GPU holds a 1/tp slice of
every expert), the table's dtype for the weights' (MOE_DTYPES: the first one measured), the `balanced`
distribution (else the power law with the smallest exponent, the nearest to even); where several kernels
were measured for the class (fp8_block on Hopper: FlashInfer CUTLASS and Triton), the fastest at each token
count, as for GEMMs. A step's MoE time = MoE layers x the class's time at the step's tokens T, interpolated
in log-log between the measured token counts (kvsim/cost/kernel_grid.py, isotonic in tokens), x the
routing factor below. Outside the measured tokens, or for a class the table lacks, the roofline's
routed-expert term (RooflineCost.expert_linear_time) times the op, and describe() says so.

Routing factor: balanced rows spread the T k picks evenly, so they read min(E, T k) experts, where the
roofline's uniform, independent routing reads D(T) = E (1 - (1 - k / E)^T) (expected_distinct_experts;
D(1) = k, D <= min(E, T k)). A fused-experts call at small and middle T is bound by the expert weights it
reads, so the balanced time is scaled by D(T) / min(E, T k): 1 at T = 1 and for large T, 0.64 for gpt-oss-
120b at T = 32 (82 of 128 experts read instead of all 128). The measured power-law rows, skewed routing,
are faster still at those T (365 us against the balanced 661 us and the scaled 423 us, gpt-oss-120b on
H200, T = 32). The power-law rows (A100's only rows) are not scaled: the experts they read are not known.

The other linear layers (nonexpert_gemms) are the gemm table's: qkv and o on every layer, the dense MLP on
the layers without experts, and on each MoE layer its router (n = experts, replicated, at the weights'
GEMM dtype: a small GEMM whose time is its launch) and its shared experts as one MLP of their summed width
(as vLLM runs DeepSeek's). An mxfp4 model's non-expert GEMMs are bf16: vLLM's mxfp4 method quantizes only
the experts (vllm/model_executor/layers/quantization/mxfp4.py, Mxfp4Config.get_quant_method; gpt-oss's
checkpoint keeps attention, router and head in bf16).
"""

from __future__ import annotations

import math

from kvsim.cost.kernel_grid import KernelGrid, fastest_grid
from kvsim.specs.kernel_tables import KernelTables
from kvsim.specs.model import ModelSpec, expected_distinct_experts

MOE_DTYPES: dict[str, tuple[str, ...]] = {
    "bf16": ("bfloat16",), "fp16": ("bfloat16",), "fp8": ("fp8", "fp8_block"), "fp8_block": ("fp8_block",),
    "nvfp4": ("nvfp4",), "mxfp4": ("w4a16_mxfp4",),
}
"""Weight dtype -> the moe table's dtypes, first measured first. fp8: per-tensor scales, else the block
(128 x 128) scales DeepSeek-V3's checkpoint has (kvsim's `fp8` names both unless `quantization:
fp8_block`); mxfp4: MXFP4 weights with bf16 activations (gpt-oss on Hopper and Blackwell)."""
DISTRIBUTION = "balanced"


def nonexpert_gemms(model: ModelSpec, tp: int) -> list[tuple[int, int, int]] | str:
    """(n, k, calls per forward pass) of an MoE model's GEMMs but the routed experts and lm_head, or why
    they cannot be listed (a string)."""
    if not model.routes_experts:
        return "the model spec does not give its experts (num_experts, experts_per_token)"
    if model.attention == "mla" or model.compress_ratios:
        return "MLA and compressed-attention projections are not listed in this version (roofline term)"
    q, kv, hd, h = model.num_attention_heads, model.num_kv_heads, model.head_dim, model.hidden_size
    moe = model.moe_layer_count
    dense = model.num_layers - moe
    ops = [(((q + 2 * kv) * hd) // tp, h, model.num_layers), (h, q * hd // tp, model.num_layers),
           (model.num_experts, h, moe)]
    if dense:
        inter = model.intermediate_size
        ops += [(2 * inter // tp, h, dense), (h, inter // tp, dense)]
    shared = model.shared_expert_intermediate_size
    if shared:
        ops += [(2 * shared // tp, h, moe), (h, shared // tp, moe)]
    return ops


def _distribution(names) -> str:
    """`balanced` if measured, else the power law of the smallest exponent."""
    names = sorted(set(names))
    if DISTRIBUTION in names:
        return DISTRIBUTION

    def alpha(name: str) -> float:
        try:
            return float(name.rsplit("_", 1)[1])
        except (IndexError, ValueError):
            return math.inf

    return min(names, key=lambda n: (alpha(n), n))


class MoeKernels:
    """The routed experts of one MoE model on one device from its moe table (module docstring): `why`
    (None when the table has the model's class) and `kernel` say which, `time(tokens)` gives MoE layers x
    the class's time at `tokens`, None outside the measured tokens."""

    __slots__ = ("why", "kernel", "grid", "layers", "shape", "balanced", "_memo", "ep")

    def __init__(self, model: ModelSpec, tp: int, tables: KernelTables, ep: int = 1) -> None:
        self.ep = ep  # expert parallelism (kvsim/cost/expert_parallel.py): the rows of moe_ep_size ep
        self.grid: KernelGrid | None = None
        self.kernel = ""
        self.layers = model.moe_layer_count
        self.balanced = False
        self._memo: dict[int, float | None] = {}
        self.shape = (model.hidden_size, model.moe_intermediate_size, model.experts_per_token,
                      model.num_experts, tp)
        self.why = self._build(model, tp, tables)

    def _build(self, model: ModelSpec, tp: int, tables: KernelTables) -> str | None:
        if not model.routes_experts:
            return "the model spec does not give its experts (num_experts, experts_per_token)"
        if "moe" not in tables:
            return "no moe table"
        dtypes = MOE_DTYPES.get(model.weight_dtype, ())
        if not dtypes:
            return f"no moe table dtype for weight dtype {model.weight_dtype}"
        df = tables["moe"]
        h, inter, k, e, _ = self.shape
        cls = df[(df["hidden"] == h) & (df["inter"] == inter) & (df["topk"] == k) & (df["experts"] == e)
                 & (df["tp"] == tp) & (df["ep"] == self.ep)]
        for dtype in dtypes:
            sel = cls[cls["dtype"] == dtype]
            if len(sel):
                break
        else:
            return (f"no moe class of hidden {h}, inter {inter}, top-{k} of {e} experts, tp {tp},"
                    f" ep {self.ep}, dtype {' or '.join(dtypes)}")
        dist = _distribution(sel["distribution"])
        sel = sel[sel["distribution"] == dist]
        if sel["tokens"].nunique() < 2:
            return f"the moe class of hidden {h}, inter {inter}, top-{k} of {e} has one token count"
        self.grid = fastest_grid(sel, ("tokens",))
        self.balanced = dist == DISTRIBUTION
        self.kernel = f"{', '.join(sorted(sel['kernel'].unique()))} ({dtype}, {dist})"
        return None

    def time(self, tokens: int) -> float | None:
        """MoE layers x one layer's fused-experts time at `tokens` tokens x the routing factor (module
        docstring), None outside the table."""
        if tokens in self._memo:
            return self._memo[tokens]
        t = self.grid(tokens) if self.grid is not None else None
        t = self._memo[tokens] = None if t is None else self.layers * t * self.routing_factor(tokens)
        return t

    def routing_factor(self, tokens: int) -> float:
        """D(T) / min(E, T k) for balanced rows, else 1 (module docstring)."""
        _, _, k, e, _ = self.shape
        return expected_distinct_experts(e, k, tokens) / min(e, tokens * k) if self.balanced else 1.0
