"""Attention of the kernel cost model (kvsim/cost/kernels.py), per layer kind: one decode op and one
prefill op per layer group of the model, each read off its kernel table (kvsim/specs/kernel_tables.py,
grids of kvsim/cost/kernel_grid.py) or, where none reaches, the roofline's terms of that group alone.
An iteration's attention is the sum over the groups of (the group's layers x one layer's op time).

Op names: the full-attention layers' ops keep the names `decode_attention` / `prefill_attention` (so a
model of full attention alone reports as before); every other kind's are `decode_attention.<kind>` /
`prefill_attention.<kind>` (sliding, mla, state, compressed).

What each kind reads (b = decode sequences, s = prefill sequences; the Batch keeps sums only, so a
ragged batch is costed as b or s equal sequences of each sum's mean):

- full: the decode / prefill attention tables' class of (q heads / tp, KV heads / tp, head_dim, KV
  dtype, window 0) at (b, decode_context_tokens / b) and (s, L) with L (L + 1) / 2 = prefill_attn_pairs
  / s (a chunk after a cached prefix has the pairs of a longer whole prompt). A model with more KV heads
  than any measured class of its query heads takes the class with the most KV heads below and scales
  the decode time by the ratio (decode reads every head's KV).
- sliding (window W, cap W - 1): the tables' rows measured with window W when that class exists, else
  the same class's full-attention rows (window 0); decode at the mean capped context
  decode_window_tokens[cap] / b (each sequence reads min(context, W - 1) earlier tokens: below the
  window a windowed kernel is a full one), prefill at the whole-prompt length L whose pairs inside a
  window of W keys are prefill_window_pairs[cap] / s (window rows), or whose causal pairs are (full
  rows: the same FLOPs).
- mla: the MLA attention *module* tables (mla_decode, mla_prefill: DeepSeek-V3's DeepseekV2MLAAttention
  forward, one layer, its projections included, CUDA graphs) at heads = q heads / tp, the KV dtype,
  vLLM's default bf16 query compute, read as the full kind reads its tables. The module's three
  projection GEMMs at m = the module's tokens -- fused_qkv_a_proj (n = q_lora_rank + kv_lora_rank +
  qk_rope_head_dim, k = hidden), q_b_proj (n = heads (qk_nope + qk_rope), k = q_lora_rank) and o_proj
  (n = hidden, k = heads v_head_dim), DeepSeek-V3's shapes (MLA_TABLE_MODELS) -- are subtracted, read
  off the bf16 gemm table from the module's bf16-GEMM rows: they are linear layers, timed by the linear
  op with the model's own shapes and weight dtype, so none is counted twice. What stays (the "core"):
  the latent norms and rotary, the KV-cache write, kv_b_proj (prefill) or the absorbed W_UK / W_UV
  batched GEMMs (decode), and the attention kernel: the same for any DeepSeek MLA model of the same
  per-head shapes (kv_lora_rank 512, qk_rope_head_dim 64, head_dim 128), whatever its hidden size or
  q_lora_rank. A core below MIN_CORE_SHARE of the module's time (the separately timed GEMMs measured
  slower than the module's own: B200 prefill at 1 to 4 heads per GPU, a few L40S rows) is raised to
  it. (The mla tables' context counts the step's own token, the attention tables' only the cached
  ones; kvsim's context sum is read on both as it is, one token apart.)
- state (Gated DeltaNet, ssm_kind gdn): the gdn table's rows of the per-GPU shape (key heads
  ssm_groups / tp of ssm_state_size, value heads ssm_num_heads / tp of ssm_head_dim, conv kernel),
  whichever model they were measured for (the kernels' work depends on these alone): decode = the
  generation phase's causal_conv1d_update + fused recurrent update at batch b, prefill = the context
  phase's causal_conv1d_fn + chunked delta rule at (s, prefill_tokens / s) (a chunk after earlier ones
  starts from a state: timed as a fresh prompt of its length). The in / out projections are linear
  layers. Mamba-2 state layers have no table: the roofline.
- compressed (DeepSeek-V4): the roofline (the DeepSeek-V4 attention module tables of the source are not
  imported).

A point outside a full-attention decode or prefill grid (above it, or in a hole at the largest batch x
context products) takes the per-op roofline fitted on the table (`_fit_beyond`: seconds per unit of work
of the grid's top decile), counted in `fitted`; any other point outside an op's grid takes that op's
datasheet roofline term and counts one fallback iteration for it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kvsim.cost.attention import AttentionWork
from kvsim.cost.batch import DECODE_CONTEXT_TOKENS, DECODE_SEQS, Batch
from kvsim.cost.kernel_grid import KernelGrid, attention_class, fastest_grid, pick_kernel
from kvsim.specs.kernel_tables import KernelTables
from kvsim.specs.layers import LayerGroup, window_caps
from kvsim.specs.model import ModelSpec

_COMPILED = not __file__.endswith(".py")
"""Compiled by Cython (kernel_attention.pxd): MeanContextOp.time reads the batch's fields by C indexing
(roofline.pxd's _batch_tuple; the positions C integers)."""

DECODE, PREFILL = "decode_attention", "prefill_attention"
MIN_CORE_SHARE = 0.05
"""Floor of an MLA module's core (its time less its projection GEMMs), as a share of the module's time."""


@dataclass(frozen=True, slots=True)
class MlaShape:
    """The MLA shapes of a model the mla tables were measured for (its Hugging Face config.json)."""

    hidden: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int


MLA_TABLE_MODELS = {
    "deepseek-ai/DeepSeek-V3": MlaShape(7168, 1536, 512, 64, 128, 128),
}
"""The mla tables' `model` -> its shapes (huggingface.co/deepseek-ai/DeepSeek-V3 config.json: hidden_size,
q_lora_rank, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim)."""


def kv_table_dtype(model: ModelSpec, kv_dtype) -> str | None:
    """A scenario's KV dtype as the attention tables name it (bfloat16 / fp8), None if they have none:
    `auto` is the model's activation dtype (ModelSpec.kv_precision: bf16 for quantized weights, as vLLM's
    auto KV cache is the model dtype)."""
    name = model.kv_precision(kv_dtype).rest.name
    if name.startswith("fp8"):
        return "fp8"
    return "bfloat16" if name in ("bf16", "fp16") else None


def whole_prompt(pairs: float) -> float:
    """L with L (L + 1) / 2 = pairs: the whole-prompt length of a sequence's causal (query, key) pairs."""
    return (math.sqrt(8 * pairs + 1) - 1) / 2


def windowed_prompt(pairs: float, window: int) -> float:
    """L with sum_{i=1..L} min(i, window) = pairs: the whole-prompt length whose pairs inside a window of
    `window` keys are `pairs` (the inverse of kvsim.specs.compute.window_pairs(0, L, window))."""
    full = window * (window + 1) / 2
    return whole_prompt(pairs) if pairs <= full else window + (pairs - full) / window


class KindRoofline:
    """The roofline's attention terms of one layer group (AttentionWork restricted to it): decode = its
    KV bytes read / bandwidth + its state FLOPs of the decode tokens; prefill = its FLOPs of the prefill
    chunks / attention FLOP rate."""

    __slots__ = ("work", "bw", "rate")

    def __init__(self, model: ModelSpec, group: LayerGroup, caps: tuple[int, ...], tp: int, bw: float,
                 rate: float, kv_dtype="auto") -> None:
        self.work = AttentionWork(model, kv_dtype, tp, group, caps)
        self.bw, self.rate = bw, rate

    def decode(self, b: Batch) -> float:
        w = self.work
        return w.decode_bytes(b) / self.bw + w.token_flops * b.decode_seqs / self.rate

    def prefill(self, b: Batch) -> float:
        return self.work.prefill_flops(b, b.prefill_tokens) / self.rate


class AttentionOp:
    """One kind's decode or prefill op: `factor` (its layers x the KV-head scale) x the table's time of
    one layer (`read`, None outside the grid); outside it, where the op has one, the per-op roofline
    fitted on the table (`beyond`: full-attention layers above the grid or in a hole, counted in
    `fitted`), else `roofline` (the group's datasheet roofline term, already over all its layers), counted
    in `fallbacks`."""

    __slots__ = ("name", "factor", "read", "roofline", "fallbacks", "beyond", "fitted")

    def __init__(self, name: str, factor: float, read: Callable[[Batch], float | None] | None,
                 roofline: Callable[[Batch], float], beyond: Callable[[Batch], float | None] | None = None
                 ) -> None:
        self.name, self.factor, self.read, self.roofline = name, factor, read, roofline
        self.beyond = beyond
        self.fallbacks = self.fitted = 0

    def time(self, batch: Batch) -> float:
        if self.read is not None:
            t = self.read(batch)
            if t is not None:
                return self.factor * t
        return self.outside(batch)

    def outside(self, batch: Batch) -> float:
        """The op's time where its grid does not reach."""
        if self.beyond is not None:
            t = self.beyond(batch)
            if t is not None:
                self.fitted += 1
                return self.factor * t
        self.fallbacks += 1
        return self.roofline(batch)


class MeanContextOp(AttentionOp):
    """A decode op read at (b, the mean context) (full and MLA layers: every iteration), unrolled: its
    grid's Plane read directly where it has one (`plane`), else the grid (`at`)."""

    __slots__ = ("at", "plane")

    def __init__(self, name: str, factor: float, grid: KernelGrid, roofline: Callable[[Batch], float],
                 beyond: Callable[[Batch], float | None] | None = None) -> None:
        super().__init__(name, factor, None, roofline, beyond)
        self.at, self.plane = grid, grid.plane

    def time(self, batch: Batch) -> float:
        fields = _batch_tuple(batch) if _COMPILED else batch  # noqa: F821 (compiled: read by C indexing)
        n, context = fields[DECODE_SEQS], fields[DECODE_CONTEXT_TOKENS]  # (by position: kvsim/cost/batch.py)
        plane = self.plane
        if plane is not None:
            if type(n) is int and type(context) is int and 0 < n <= 9007199254740992 and \
                    0 <= context <= 9007199254740992:
                # (compiled, C integers and doubles: both at most 2 ** 53, exact as doubles, so context / n
                # is the one correctly rounded division Python's int / int makes, and n the double at2
                # reads)
                n_c, context_c = n, context
                x = n_c
                t = plane.at2(x, context_c / x)
            else:
                t = plane.at2(n, context / n)
        else:
            t = self.at(n, context / n)
        if t is not None:
            return self.factor * t
        return self.outside(batch)


class WholePromptOp(MeanContextOp):
    """A prefill op read at (s, the whole-prompt length of the mean causal pairs) (full and MLA layers),
    unrolled as MeanContextOp (its grid's Plane, `plane`, else the grid, `at`)."""

    __slots__ = ()

    def time(self, batch: Batch) -> float:
        s = batch.prefill_seqs
        t = None
        if s:
            length = whole_prompt(batch.prefill_attn_pairs / s)
            if not length > 1.0:  # (max(1.0, length))
                length = 1.0
            plane = self.plane
            t = plane.at2(s, length) if plane is not None else self.at(s, length)
        if t is not None:
            return self.factor * t
        return self.outside(batch)

    def __deepcopy__(self, memo: dict) -> WholePromptOp:
        """A copy that reads the same grid (its Plane's last cell included), as the read function this op
        unrolls did (a function deep-copies as itself): SpeculativeCost's copy of its target shares it."""
        op = WholePromptOp(self.name, self.factor, self.at, copy.deepcopy(self.roofline, memo), self.beyond)
        op.fallbacks, op.fitted = self.fallbacks, self.fitted
        memo[id(self)] = op
        return op


class KernelAttention:
    """Decode and prefill attention of one model, KV dtype and TP size on a device's tables (module
    docstring): `decode(batch)` and `prefill(batch)` sum the ops of every layer group; `why` (op -> why
    it is on the roofline), `kernels` (op -> what it reads) and `fallback_iterations` for describe()."""

    def __init__(self, model: ModelSpec, tp: int, kv_dtype: str, tables: KernelTables, attn: AttentionWork,
                 bw: float, rate: float) -> None:
        self.why: dict[str, str] = {}
        self.kernels: dict[str, str] = {}
        self._gemm: dict[tuple, KernelGrid | None] = {}  # MLA's projection GEMMs -> their grid
        groups = model.layer_groups(kv_dtype, tp)
        caps = window_caps(groups)
        kvd = kv_table_dtype(model, kv_dtype)
        self._kv_name = kv_dtype
        self.decode_ops: list[AttentionOp] = []
        self.prefill_ops: list[AttentionOp] = []
        for g in groups:
            if not g.kind_spec.attends and g.kind != "state":
                continue
            if attn.grouped:
                roof = KindRoofline(model, g, caps, tp, bw, rate, kv_dtype)
                roof_d, roof_p = roof.decode, roof.prefill
            else:  # a lone full group: the roofline's own (classic) formulas, unchanged numbers
                roof_d = lambda b, a=attn: a.decode_bytes(b) / bw  # noqa: E731
                roof_p = lambda b, a=attn: a.prefill_flops(b) / rate  # noqa: E731
            suffix = "" if g.kind == "full" else f".{g.kind}"
            reads = self._reads(model, g, tp, kvd, caps, suffix, tables)
            for name, (read, scale), roof_fn, ops in ((DECODE + suffix, reads[0], roof_d, self.decode_ops),
                                                      (PREFILL + suffix, reads[1], roof_p, self.prefill_ops)):
                factor = g.num_layers * scale
                beyond = getattr(read, "beyond", None)
                if isinstance(read, _WholePrompt):
                    op = WholePromptOp(name, factor, read.grid, roof_fn, beyond)
                elif isinstance(read, _MeanContext):
                    op = MeanContextOp(name, factor, read.grid, roof_fn, beyond)
                else:
                    op = AttentionOp(name, factor, read, roof_fn, beyond)
                ops.append(op)
        self.names = tuple(op.name for op in self.decode_ops + self.prefill_ops)
        if len(self.decode_ops) == 1:
            self.decode = self.decode_ops[0].time
        if len(self.prefill_ops) == 1:
            self.prefill = self.prefill_ops[0].time

    def decode(self, batch: Batch) -> float:
        """Seconds of the batch's decode attention (batch.decode_seqs > 0)."""
        t = 0  # (sum()'s start and order, without a generator per iteration)
        for op in self.decode_ops:
            t += op.time(batch)
        return t

    def prefill(self, batch: Batch) -> float:
        """Seconds of the batch's prefill attention (batch.prefill_tokens > 0)."""
        t = 0
        for op in self.prefill_ops:
            t += op.time(batch)
        return t

    def fallback_iterations(self, others: dict[str, int]) -> dict[str, int]:
        """`others` (op -> fallback iterations, in the cost model's op order) with its decode_attention
        and prefill_attention entries replaced by this model's per-kind ops."""
        out: dict[str, int] = {}
        for name, n in others.items():
            ops = self.decode_ops if name == DECODE else self.prefill_ops if name == PREFILL else None
            if ops is None:
                out[name] = n
            else:
                out.update((op.name, op.fallbacks) for op in ops)
        return out

    def fitted_iterations(self) -> dict[str, int]:
        """Op -> iterations it was timed outside its grid by the per-op roofline fitted on its table
        (the ops that have one: full-attention decode and prefill)."""
        return {op.name: op.fitted for op in (*self.decode_ops, *self.prefill_ops) if op.beyond is not None}

    # ----------------------------------------------------------------- per kind
    def _reads(self, model, g, tp, kvd, caps, suffix, tables):
        """((decode read, its scale), (prefill read, its scale)) of group g's tables; a read is None (with
        its reason in `why`) where no table fits."""
        names = (DECODE + suffix, PREFILL + suffix)
        if g.kind in ("full", "sliding"):
            return self._attention_reads(model, g, tp, kvd, caps, names, tables)
        if g.kind == "mla":
            return self._mla_reads(model, tp, kvd, names, tables)
        if g.kind == "state":
            return self._gdn_reads(model, tp, names, tables)
        return self._off(names, f"no kernel table for {g.kind} layers (the source's DeepSeek-V4 attention "
                                "module tables are not imported)")

    def _off(self, names, reason: str):
        for name in names:
            self.why[name] = reason
        return NONE, NONE

    def _attention_reads(self, model, g, tp, kvd, caps, names, tables):
        window = g.window if g.kind == "sliding" else 0
        cap = max(window - 1, 0)
        i = caps.index(cap) if window else -1
        out = []
        for name, table, axes in ((names[0], DECODE, ("batch", "context")),
                                  (names[1], PREFILL, ("batch", "tokens"))):
            got = self._attention_grid(model, tp, kvd, table, axes, name, window, tables)
            if got is None:
                out.append(NONE)
                continue
            grid, scale, windowed = got
            if table == DECODE:
                read = _decode_read(grid, i, cap)
                if i < 0:
                    read.beyond = _mean_context_beyond(_fit_beyond(grid, lambda b, c: b * c))
            else:
                read = _prefill_read(grid, i, window if windowed else 0)
                if i < 0:
                    read.beyond = _whole_prompt_beyond(_fit_beyond(grid, lambda s, n: s * n * (n + 1) / 2))
            out.append((read, scale))
        return tuple(out)

    def _attention_grid(self, model, tp, kvd, table, axes, name, window, tables):
        """(grid, decode scale, windowed rows?) of the attention table's class for the model, or None."""
        if kvd is None or table not in tables:
            self.why[name] = f"no {table} table for KV dtype {self._kv_name}"
            return None
        df = tables[table]
        q, kv = model.num_attention_heads // tp, max(1, model.num_kv_heads // tp)
        cls, windowed = None, False
        if window:
            cls = attention_class(df, q, model.head_dim, kvd, window)
            windowed = bool(len(cls[cls["kv_heads"] <= kv]))
        if not windowed:
            cls = attention_class(df, q, model.head_dim, kvd)
        measured = sorted(int(k) for k in cls["kv_heads"].unique() if k <= kv)
        if not measured:
            self.why[name] = (f"no measured shape class of {q} query heads, {kv} KV heads, head_dim "
                              f"{model.head_dim}, {kvd} KV per GPU")
            return None
        kv_m = measured[-1]
        sel = cls[cls["kv_heads"] == kv_m]
        kernel = pick_kernel(sel)
        # decode reads every KV head's cache: time scales with the KV heads; prefill's FLOPs follow the
        # query heads, the same in both
        scale = kv / kv_m if table == DECODE else 1.0
        label = kernel if kv_m == kv else (
            f"{kernel} (measured at {kv_m} KV heads, x{scale:g} for {kv})" if scale != 1.0
            else f"{kernel} (measured at {kv_m} KV heads, for {kv})")
        if window:
            label += (f" (window {window} rows)" if windowed
                      else f" (full-attention rows at min(context, {window - 1}))")
        self.kernels[name] = label
        return KernelGrid.from_rows(sel[sel["kernel"] == kernel], axes), scale, windowed

    # ---- MLA
    def _mla_reads(self, model, tp, kvd, names, tables):
        heads = model.num_attention_heads // tp
        if model.kv_lora_rank != 512 or model.qk_rope_head_dim != 64 or model.head_dim != 128:
            return self._off(names, f"no MLA table of kv_lora_rank {model.kv_lora_rank}, qk_rope_head_dim "
                                    f"{model.qk_rope_head_dim}, head_dim {model.head_dim} (measured: 512, "
                                    "64, 128)")
        out = []
        for name, table, axes in ((names[0], "mla_decode", ("batch", "context")),
                                  (names[1], "mla_prefill", ("batch", "tokens"))):
            grid = self._mla_core(tables, table, axes, heads, kvd, name)
            if grid is None:
                out.append(NONE)
            elif table == "mla_decode":
                out.append((_decode_read(grid, -1, 0), 1.0))
            else:
                out.append((_prefill_read(grid, -1, 0), 1.0))
        return tuple(out)

    def _mla_core(self, tables, table, axes, heads, kvd, name) -> KernelGrid | None:
        if table not in tables or kvd is None:
            self.why[name] = f"no {table} table for KV dtype {self._kv_name}"
            return None
        df = tables[table]
        sel = df[(df["heads"] == heads) & (df["kv_dtype"] == kvd) & (df["gemm_dtype"] == "bfloat16")
                 & (df["dtype"] == "bfloat16")]
        if "prefix" in sel.columns:
            sel = sel[sel["prefix"] == 0]
        models = sorted(set(sel["model"]) & set(MLA_TABLE_MODELS))
        if not models:
            self.why[name] = f"no {table} rows of {heads} heads per GPU, {kvd} KV, bf16 GEMMs"
            return None
        sel = sel[sel["model"] == models[0]]
        shape = MLA_TABLE_MODELS[models[0]]
        gemms = ((shape.q_lora_rank + shape.kv_lora_rank + shape.qk_rope_head_dim, shape.hidden),
                 (heads * (shape.qk_nope_head_dim + shape.qk_rope_head_dim), shape.q_lora_rank),
                 (shape.hidden, heads * shape.v_head_dim))
        gemm = self._gemm_grid(tables, gemms)
        if gemm is None:
            self.why[name] = "no bf16 gemm table to take the MLA module's projections out"
            return None
        m = sel["batch"].to_numpy(np.int64) * (sel["tokens"].to_numpy(np.int64) if "tokens" in sel.columns
                                              else 1)
        proj = {int(x): _gemms_time(gemm, int(x), gemms) for x in np.unique(m)}
        lat = sel["latency_s"].to_numpy(np.float64)
        core = np.array([np.nan if proj[int(x)] is None else max(t - proj[int(x)], MIN_CORE_SHARE * t)
                         for x, t in zip(m, lat, strict=True)])
        rows = sel.assign(latency_s=core)[~np.isnan(core)]
        if not len(rows) or min(rows[a].nunique() for a in axes) < 2:
            self.why[name] = f"the {table} rows' projection GEMMs lie outside the gemm grid"
            return None
        kernels = "/".join(sorted(rows["kernel"].unique()))
        self.kernels[name] = (f"{kernels} module, {heads} heads, less its q_a/kv_a, q_b and o_proj GEMMs "
                              "(bf16 gemm table)")
        return KernelGrid.from_rows(rows, axes)

    def _gemm_grid(self, tables, gemms) -> KernelGrid | None:
        """The bf16 gemm grid (fastest kernel per shape) over the measured n and k values around `gemms`'."""
        if gemms not in self._gemm:
            grid = None
            if "gemm" in tables:
                df = tables["gemm"]
                df = df[df["dtype"] == "bfloat16"]
                df = df[df["n"].isin(_around(df["n"], [n for n, _ in gemms]))
                        & df["k"].isin(_around(df["k"], [k for _, k in gemms]))]
                grid = fastest_grid(df, ("m", "n", "k")) if len(df) else None
            self._gemm[gemms] = grid
        return self._gemm[gemms]

    # ---- state (Gated DeltaNet)
    def _gdn_reads(self, model, tp, names, tables):
        if model.ssm_kind != "gdn":
            return self._off(names, f"no kernel table for {model.ssm_kind or 'these'} state layers (the gdn "
                                    "table times Gated DeltaNet)")
        if "gdn" not in tables:
            return self._off(names, "no gdn table")
        df = tables["gdn"]
        shape = {"k_heads": model.ssm_groups // tp, "k_dim": model.ssm_state_size,
                 "v_heads": model.ssm_num_heads // tp, "v_dim": model.ssm_head_dim,
                 "d_conv": model.ssm_conv_kernel}
        sel = df
        for col, v in shape.items():
            sel = sel[sel[col] == v]
        out = []
        for name, phase, axes in ((names[0], "generation", ("batch",)), (names[1], "context",
                                                                           ("batch", "seq_len"))):
            rows = sel[sel["phase"] == phase]
            # per kernel the median over the models measured at this shape, then the kernels' sum
            per = rows.groupby(["kernel", *axes], as_index=False)["latency_s"].median()
            parts = per["kernel"].nunique()
            summed = per.groupby(list(axes), as_index=False).agg(latency_s=("latency_s", "sum"),
                                                                  n=("kernel", "size"))
            summed = summed[summed["n"] == parts]
            if parts < 2 or len(summed) < 2:
                self.why[name] = ("no gdn {} rows of {k_heads} key heads x {k_dim}, {v_heads} value heads x "
                                  "{v_dim}, conv {d_conv} per GPU").format(phase, **shape)
                out.append(NONE)
                continue
            self.kernels[name] = " + ".join(sorted(per["kernel"].unique()))
            grid = KernelGrid.from_rows(summed, axes)
            read = _gdn_decode_read(grid) if phase == "generation" else _prefill_tokens_read(_at(grid))
            out.append((read, 1.0))
        return tuple(out)


def _around(values, wanted) -> set[int]:
    """The measured values at or next to each wanted value (what interpolating at it reads)."""
    vals = np.unique(values.to_numpy())
    keep: set[int] = set()
    for w in wanted:
        i = int(np.searchsorted(vals, w))
        keep.update(int(v) for v in vals[max(0, i - 1): i + 1])
    return keep


def _gemms_time(grid: KernelGrid, m: int, gemms) -> float | None:
    """Seconds of GEMMs (n, k) at m rows each; an m beyond the grid as the fewest equal pieces that fit."""
    m_max = grid.axes_list[0][-1]
    pieces = max(1, int(math.ceil(m / m_max)))  # (int: C's ceil where compiled returns a float)
    total = 0.0
    for n, k in gemms:
        t = grid(m / pieces, n, k)
        if t is None:
            return None
        total += pieces * t
    return total


NONE = (None, 1.0)
"""A kind's op with no table read."""


def _at(grid: KernelGrid):
    """The grid's lookup: its unrolled two-axis form where both axes have two values or more."""
    return grid if grid.plane is None else grid.plane.at2


BEYOND_TOP = 0.9
"""The fitted per-op roofline outside a grid is fitted on its measured points of the most work (this
quantile and above), where a kernel runs at its sustained rate."""


def _fit_beyond(grid: KernelGrid, work: Callable[[float, float], float]):
    """(x, y) -> seconds outside the grid: tau x work(x, y), tau the median seconds per unit of work over
    the grid's points of the top work decile (decode: batch x context tokens read; prefill: batch x causal
    pairs); None below the grid's first values (small work, where launch time dominates: the roofline)."""
    xs, ys = np.meshgrid(grid.axes[0], grid.axes[1], indexing="ij")
    seconds = np.exp(grid.log_latency)
    measured = ~np.isnan(seconds)
    w = work(xs, ys)[measured]
    t = seconds[measured]
    top = w >= np.quantile(w, BEYOND_TOP)
    tau = float(np.median(t[top] / w[top]))
    x0, y0 = float(grid.axes[0][0]), float(grid.axes[1][0])

    def beyond(x: float, y: float) -> float | None:
        return tau * work(x, y) if x >= x0 and y >= y0 else None
    beyond.tau = tau
    return beyond


def _mean_context_beyond(fit):
    def read(b: Batch) -> float | None:
        n = b.decode_seqs
        return fit(n, b.decode_context_tokens / n)
    read.tau = fit.tau
    return read


def _whole_prompt_beyond(fit):
    def read(b: Batch) -> float | None:
        s = b.prefill_seqs
        return fit(s, max(1.0, whole_prompt(b.prefill_attn_pairs / s))) if s else None
    read.tau = fit.tau
    return read


class _MeanContext:
    """The decode read at (b, decode_context_tokens / b) of a grid, built into a MeanContextOp."""

    __slots__ = ("grid", "beyond")

    def __init__(self, grid: KernelGrid) -> None:
        self.grid = grid
        self.beyond = None


class _WholePrompt(_MeanContext):
    """The prefill read at (s, the whole-prompt length of prefill_attn_pairs / s), built into a
    WholePromptOp."""

    __slots__ = ()


def _decode_read(grid: KernelGrid, i: int, cap: int):
    """One layer's decode time at (b, the mean context; for window cap index i >= 0 the mean of
    min(context, cap))."""
    if i < 0:
        return _MeanContext(grid)
    at = _at(grid)

    def capped(b):
        n = b.decode_seqs
        w = b.decode_window_tokens
        return at(n, w[i] / n if i < len(w) else min(b.decode_context_tokens / n, cap))
    return capped


def _prefill_read(grid: KernelGrid, i: int, window: int):
    """One layer's prefill time at (s, the whole-prompt length of the mean pairs): causal pairs, or for
    window cap index i >= 0 the pairs inside the window (window > 0: the table's rows are windowed)."""
    if i < 0:
        return _WholePrompt(grid)
    at = _at(grid)

    def sliding(b):
        s = b.prefill_seqs
        if not s:
            return None
        w = b.prefill_window_pairs
        if i >= len(w):
            length = whole_prompt(b.prefill_attn_pairs / s)
        elif window:
            length = windowed_prompt(w[i] / s, window)
        else:
            length = whole_prompt(w[i] / s)
        return at(s, max(1.0, length))
    return sliding


def _gdn_decode_read(grid: KernelGrid):
    return lambda b: grid(b.decode_seqs)


def _prefill_tokens_read(at):
    """(s, prefill_tokens / s): the state layers' work follows the tokens, not the pairs."""
    def read(b):
        s = b.prefill_seqs
        return at(s, max(1.0, b.prefill_tokens / s)) if s else None
    return read
