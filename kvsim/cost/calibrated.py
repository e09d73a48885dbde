"""Calibrated cost model: each iteration term timed by the kernel fit stored in the hardware profile's
`calibration` (kvsim calibrate), falling back to the roofline's formula, term by term, where the
profile's `terms` does not list it (summary.json's cost_model.terms then says `roofline`).

What the model reads is checked when it is built, each failure a one-line KvsimError naming the profile
and the key: `terms` (term -> kernel) and `kernels` (kernel -> dtype -> fit) are mappings; `terms` lists
only known terms and at least one; each listed kernel has a fit; the fit used has every coefficient its
term reads, each a finite number in [0, MAX_COEFFICIENT], and a finite held-out MAPE >= 0; a fit that
says its `model` (family) is the family its term needs."""

from __future__ import annotations

import math
from typing import Any

from kvsim.cost.batch import Batch
from kvsim.cost.roofline import RooflineCost, prefetch_exposed
from kvsim.errors import KvsimError, excerpt
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.model import ModelSpec

TERMS = ("linear", "decode_attention", "prefill_attention", "cow_copy", "swap_out", "swap_in")
"""Terms a calibration can time; the all-reduce and the overhead (fixed, per layer, per sequence) always
come from the roofline / the scenario."""

OVERHEAD_KEYS = ("iteration_overhead_s", "layer_overhead_s", "eager_layer_overhead_s", "seq_overhead_s")
"""The roofline's overhead tunables, as summary.json's cost_model.terms.overhead lists them."""

SAME_WIDTH = {"bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"), "fp8": ("fp8", "int8"),
              "int8": ("int8", "fp8")}

_COPY = ("copy", ("fixed_s", "per_byte_s"))
TERM_FITS: dict[str, tuple[str, tuple[str, ...]]] = {
    "linear": ("gemm", ("fixed_s", "per_weight_byte_s", "per_flop_s")),
    "decode_attention": ("decode", ("fixed_s", "per_seq_head_s", "per_block_head_s", "per_kv_byte_s",
                                    "per_flop_s")),
    "prefill_attention": ("prefill", ("fixed_s", "per_seq_s", "per_token_head_s", "per_flop_s")),
    "cow_copy": _COPY, "swap_out": _COPY, "swap_in": _COPY,
}
"""term -> (kernel family, the coefficients the term's formula reads); as kvsim.calibrate.features."""
MAX_COEFFICIENT = 1e3
"""Largest coefficient accepted (seconds per call, byte or FLOP; fitted ones are below 1e-2)."""


def pick_fit(calibration: dict[str, Any], term: str, dtype: str) -> tuple[str, str, dict[str, Any]] | None:
    """(kernel, dtype measured, fit) timing `term` for data of `dtype`: the same dtype, else one of the
    same width, else the first one measured; None if the term has no kernel or the kernel no fit."""
    terms = calibration.get("terms")
    kernel = terms.get(term) if isinstance(terms, dict) else None
    kernels = calibration.get("kernels")
    by_dtype = kernels.get(kernel) if isinstance(kernels, dict) and isinstance(kernel, str) else None
    if not isinstance(by_dtype, dict) or not by_dtype:
        return None
    for cand in (*SAME_WIDTH.get(dtype, (dtype,)), *sorted(by_dtype, key=str)):
        if cand in by_dtype:
            return kernel, cand, by_dtype[cand]
    return None


def usable_fits(calibration: Any, profile: str, weight_dtype: str,
                kv_dtype: str) -> dict[str, tuple[str, str, dict[str, float], float]]:
    """term -> (kernel, dtype measured, coefficients, held-out MAPE) for every term the calibration
    lists, checked as the module docstring says; KvsimError naming the profile and key otherwise."""
    where = f"hardware profile '{profile}': calibration"
    if not isinstance(calibration, dict):
        raise KvsimError(f"{where} must be a mapping")
    terms, kernels = calibration.get("terms"), calibration.get("kernels")
    if not isinstance(terms, dict) or not isinstance(kernels, dict):
        missing = "terms" if not isinstance(terms, dict) else "kernels"
        raise KvsimError(f"{where}: no '{missing}' mapping (run `kvsim calibrate`, see docs/calibration.md)")
    unknown = [t for t in terms if t not in TERM_FITS]
    if unknown:
        raise KvsimError(f"{where}.terms: unknown term {excerpt(unknown[0])}; known: {', '.join(TERMS)}")
    if not terms:
        raise KvsimError(f"{where}: no usable kernel fit (terms is empty: the run fitted nothing;"
                         " rerun `kvsim calibrate` with a full grid)")
    fits = {}
    for term in TERMS:
        if term in terms:
            dtype = weight_dtype if term == "linear" else kv_dtype
            fits[term] = _term_fit(calibration, term, dtype, where)
    return fits


def _term_fit(calibration: dict[str, Any], term: str, dtype: str,
              where: str) -> tuple[str, str, dict[str, float], float]:
    kernel = calibration["terms"][term]
    if not isinstance(kernel, str):
        raise KvsimError(f"{where}.terms.{term} must name a kernel, got {excerpt(kernel)}")
    got = pick_fit(calibration, term, dtype)
    if got is None:
        raise KvsimError(f"{where}.terms.{term} names kernel {excerpt(kernel)}, which has no fit under"
                         " calibration.kernels")
    _, measured, fit = got
    at = f"{where}.kernels.{kernel}.{measured}"
    if not isinstance(fit, dict) or not isinstance(fit.get("params"), dict):
        raise KvsimError(f"{at}: a fit needs a 'params' mapping")
    family, names = TERM_FITS[term]
    if fit.get("model", family) != family:
        raise KvsimError(f"{at}: a {excerpt(fit['model'])} fit cannot time {term} (needs a {family} fit)")
    params = {name: _number(fit["params"].get(name), f"{at}.params.{name}", MAX_COEFFICIENT)
              for name in names}
    return kernel, measured, params, _number(fit.get("heldout_mape"), f"{at}.heldout_mape", math.inf)


def _json_safe(value: Any, depth: int = 0) -> Any:
    """value as summary.json can hold it: mappings and lists of strings, finite numbers, bools and
    nulls; anything else (a YAML date, a non-finite float) as its str()."""
    if isinstance(value, dict) and depth < 8:
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list) and depth < 8:
        return [_json_safe(v, depth + 1) for v in value]
    if value is None or isinstance(value, (str, bool, int)) or (
            isinstance(value, float) and math.isfinite(value)):
        return value
    return str(value)


def _number(value: Any, key: str, maximum: float) -> float:
    """value as a float if it is a finite number in [0, maximum]; else a one-line error naming key."""
    if value is None:
        raise KvsimError(f"{key} is missing")
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not 0 <= value <= maximum:
        rule = f"in [0, {maximum:g}]" if math.isfinite(maximum) else ">= 0"
        raise KvsimError(f"{key} must be a finite number {rule}, got {excerpt(value)}")
    return float(value)


class CalibratedCost:
    """Iteration time = overhead + linear + decode attention + prefill attention + all-reduce + copies
    + the exposed part of a layer-ahead prefetch, the overhead and the all-reduce as the roofline's
    (RooflineCost.overhead_time, allreduce_time).

    With P the fitted coefficients of a term (kvsim.calibrate.features), L layers, T tokens, and
    kv / q heads per GPU:
    - linear: (4 L + 1) GEMM calls: (4 L + 1) P.fixed + W P.per_weight_byte + 2 P_active/tp T P.per_flop.
    - decode: L (P.fixed + P.per_seq_head seqs kv + P.per_block_head blocks kv) + P.per_kv_byte x context
      tokens x KV bytes per token + P.per_flop x context tokens x attention FLOPs per pair.
    - prefill: L (P.fixed + P.per_seq seqs + P.per_token_head tokens q) + P.per_flop x pairs x attention
      FLOPs per pair.
    - copy-on-write, swap out, swap in: one call each: P.fixed + P.per_byte bytes. Token-level sparsity
      traffic is timed the same way: offload writes as swap out, re-read recalls as swap in, compaction
      copies as copy-on-write (each one more call), all serial.
    - InfiniGen's prefetch (Batch.prefetch_bytes) overlaps the forward pass as in the roofline
      (RooflineCost.prefetch_exposed): C = forward_time (the roofline's per-layer overhead + linear +
      all-reduce + decode and prefill attention, each as timed here), F = one swap-in call per layer,
      L P.fixed + P.per_byte bytes (bytes / host link bandwidth without a swap_in fit); the iteration
      grows by max(F / L, F - C (L - 1) / L), transfer-bound when F > C. The fixed and per-sequence
      overhead and every copy above stay serial.
    """

    name = "calibrated"

    def __init__(self, model: ModelSpec, hw: HardwareSpec, tp: int, kv_dtype: str, bytes_per_block: float,
                 roofline: RooflineCost) -> None:
        cal = hw.calibration
        if not cal:
            raise KvsimError(f"cost.model: 'calibrated' needs a calibration in hardware profile '{hw.name}' "
                             "(run `kvsim calibrate`, see docs/calibration.md)")
        self.rl = roofline
        self.request_overhead = roofline.request_overhead
        self.layers = model.num_layers
        self.kv_heads = model.kv_heads_per_gpu(tp)
        self.q_heads = model.num_attention_heads / tp
        self.gemm_calls = 4 * model.num_layers + 1
        self.weight_bytes = model.weight_stream_bytes(tp)
        self.kv_bytes_per_token = model.kv_bytes_per_token(kv_dtype, tp)
        self.bytes_per_block = bytes_per_block
        fits = usable_fits(cal, hw.name, model.weight_dtype, model.kv_precision(kv_dtype).kernel_dtype)
        self.p: dict[str, dict[str, float]] = {t: params for t, (_, _, params, _) in fits.items()}
        self.used: dict[str, str] = {t: "roofline" for t in TERMS}
        for term, (kernel, measured, _, mape) in fits.items():
            self.used[term] = f"{kernel}/{measured} (held-out MAPE {mape:.3f})"
        self._describe = {
            "model": self.name, "hardware": hw.name,
            "calibration": {k: _json_safe(cal[k]) for k in ("source", "sha256", "provenance") if k in cal},
            "terms": dict(self.used, allreduce="roofline",
                          overhead=", ".join(f"{k} {roofline.describe()[k]:g}" for k in OVERHEAD_KEYS)),
            "params": {t: dict(p) for t, p in self.p.items()},
        }

    def linear_time(self, tokens: int) -> float:
        p = self.p.get("linear")
        if p is None or tokens <= 0:
            return self.rl.linear_time(tokens)
        return (self.gemm_calls * p["fixed_s"] + self.weight_bytes * p["per_weight_byte_s"]
                + self.rl.linear_flops_per_token * tokens * p["per_flop_s"])

    def decode_time(self, b: Batch) -> float:
        if not b.decode_seqs:
            return 0.0
        p = self.p.get("decode_attention")
        attn = self.rl.attn
        if p is None:
            return attn.decode_bytes(b) / self.rl.bw
        per_layer = (p["fixed_s"] + p["per_seq_head_s"] * b.decode_seqs * self.kv_heads
                     + p["per_block_head_s"] * b.decode_blocks * self.kv_heads)
        if not attn.grouped:
            ctx = b.decode_context_tokens
            return (self.layers * per_layer + p["per_kv_byte_s"] * ctx * self.kv_bytes_per_token
                    + p["per_flop_s"] * ctx * self.rl.attn_flops_per_pair)
        # layer groups: the per-call terms for the layers that attend, bytes and FLOPs as they read
        read = attn.decode_bytes(b)
        return (attn.attention_layers * per_layer + p["per_kv_byte_s"] * read
                + p["per_flop_s"] * read / self.kv_bytes_per_token * self.rl.attn_flops_per_pair)

    def prefill_time(self, b: Batch) -> float:
        if not b.prefill_tokens:
            return 0.0
        p = self.p.get("prefill_attention")
        flops = self.rl.attn.prefill_flops(b)
        if p is None:
            return flops / (self.rl.flops * self.rl.e_attn)
        per_layer = (p["fixed_s"] + p["per_seq_s"] * b.prefill_seqs
                     + p["per_token_head_s"] * b.prefill_tokens * self.q_heads)
        return self.layers * per_layer + p["per_flop_s"] * flops

    def copy_time(self, term: str, nbytes: float) -> float:
        if nbytes <= 0:
            return 0.0
        p = self.p.get(term)
        if p is None:
            return 2 * nbytes / self.rl.bw if term == "cow_copy" else nbytes / self.rl.host_bw
        return p["fixed_s"] + p["per_byte_s"] * nbytes

    def step_time(self, batch: Batch) -> float:
        tokens = batch.prefill_tokens + batch.decode_seqs + batch.spec_tokens
        t = self.rl.overhead_time(batch) + self.linear_time(tokens) + self.rl.allreduce_time(tokens)
        t += self.decode_time(batch) + self.prefill_time(batch)
        if batch.copy_blocks:
            t += self.copy_time("cow_copy", batch.copy_blocks * self.bytes_per_block)
        if batch.swap_out_bytes:
            t += self.copy_time("swap_out", batch.swap_out_bytes)
        if batch.swap_in_bytes:
            t += self.copy_time("swap_in", batch.swap_in_bytes)
        if batch.offload_bytes:
            t += self.copy_time("swap_out", batch.offload_bytes)
        if batch.recall_bytes:
            t += self.copy_time("swap_in", batch.recall_bytes)
        if batch.kv_copy_bytes:
            t += self.copy_time("cow_copy", batch.kv_copy_bytes)
        if batch.prefetch_bytes:
            t += self.prefetch_overlap(batch)[2]
        return t

    def forward_time(self, batch: Batch) -> float:
        """The forward pass a prefetch overlaps (RooflineCost.forward_time, each term as timed here)."""
        tokens = batch.prefill_tokens + batch.decode_seqs + batch.spec_tokens
        return (self.rl.layer_overhead_time(batch) + self.linear_time(tokens) + self.rl.allreduce_time(tokens)
                + self.decode_time(batch) + self.prefill_time(batch))

    def prefetch_time(self, nbytes: float) -> float:
        """A prefetch of `nbytes`, one host -> GPU call per layer: L P.fixed + P.per_byte bytes (swap_in
        fit), else bytes / host link bandwidth."""
        if nbytes <= 0:
            return 0.0
        p = self.p.get("swap_in")
        if p is None:
            return nbytes / self.rl.host_bw
        return self.layers * p["fixed_s"] + p["per_byte_s"] * nbytes

    def prefetch_overlap(self, batch: Batch) -> tuple[float, float, float]:
        """(C, F, exposed) as RooflineCost.prefetch_overlap, with this model's terms."""
        compute = self.forward_time(batch)
        transfer = self.prefetch_time(batch.prefetch_bytes)
        return compute, transfer, prefetch_exposed(compute, transfer, self.layers)

    def describe(self) -> dict[str, Any]:
        return dict(self._describe)
