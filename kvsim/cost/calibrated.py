"""Calibrated cost model: each iteration term timed by the kernel fit stored in the hardware profile's
`calibration` (kvsim calibrate), falling back to the roofline's formula, term by term, where the profile
has no fit for it."""

from __future__ import annotations

from typing import Any

from kvsim.cost.batch import Batch
from kvsim.cost.roofline import RooflineCost
from kvsim.errors import KvsimError
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.model import ModelSpec

TERMS = ("linear", "decode_attention", "prefill_attention", "cow_copy", "swap_out", "swap_in")
"""Terms a calibration can time; the all-reduce and the per-iteration overhead always come from the
roofline / the scenario."""

SAME_WIDTH = {"bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"), "fp8": ("fp8", "int8"),
              "int8": ("int8", "fp8")}


def pick_fit(calibration: dict[str, Any], term: str, dtype: str) -> tuple[str, str, dict[str, Any]] | None:
    """(kernel, dtype measured, fit) timing `term` for data of `dtype`: the same dtype, else one of the
    same width, else the first one measured; None if the term has no kernel."""
    kernel = (calibration.get("terms") or {}).get(term)
    by_dtype = (calibration.get("kernels") or {}).get(kernel) if kernel else None
    if not by_dtype:
        return None
    for cand in (*SAME_WIDTH.get(dtype, (dtype,)), *sorted(by_dtype)):
        if cand in by_dtype:
            return kernel, cand, by_dtype[cand]
    return None


class CalibratedCost:
    """Iteration time = overhead + linear + decode attention + prefill attention + all-reduce + copies.

    With P the fitted coefficients of a term (kvsim.calibrate.features), L layers, T tokens, and
    kv / q heads per GPU:
    - linear: (4 L + 1) GEMM calls: (4 L + 1) P.fixed + W P.per_weight_byte + 2 P_active/tp T P.per_flop.
    - decode: L (P.fixed + P.per_seq_head seqs kv + P.per_block_head blocks kv) + P.per_kv_byte x context
      tokens x KV bytes per token + P.per_flop x context tokens x attention FLOPs per pair.
    - prefill: L (P.fixed + P.per_seq seqs + P.per_token_head tokens q) + P.per_flop x pairs x attention
      FLOPs per pair.
    - copy-on-write, swap out, swap in: one call each: P.fixed + P.per_byte bytes. Token-level sparsity
      traffic is timed the same way: offload writes as swap out, recalls as swap in, compaction copies
      as copy-on-write (each one more call).
    """

    name = "calibrated"

    def __init__(self, model: ModelSpec, hw: HardwareSpec, tp: int, kv_dtype: str, bytes_per_block: float,
                 roofline: RooflineCost) -> None:
        cal = hw.calibration
        if not cal:
            raise KvsimError(f"cost.model: 'calibrated' needs a calibration in hardware profile '{hw.name}' "
                             "(run `kvsim calibrate`, see docs/calibration.md)")
        self.rl = roofline
        self.layers = model.num_layers
        self.kv_heads = model.kv_heads_per_gpu(tp)
        self.q_heads = model.num_attention_heads / tp
        self.gemm_calls = 4 * model.num_layers + 1
        self.weight_bytes = model.weight_bytes(tp)
        self.kv_bytes_per_token = model.kv_bytes_per_token(kv_dtype, tp)
        self.bytes_per_block = bytes_per_block
        self.p: dict[str, dict[str, float]] = {}
        self.used: dict[str, str] = {}
        for term in TERMS:
            dtype = model.weight_dtype if term == "linear" else kv_dtype
            got = pick_fit(cal, term, dtype)
            if got is None:
                self.used[term] = "roofline"
                continue
            kernel, measured, fit = got
            self.p[term] = {k: float(v) for k, v in fit["params"].items()}
            self.used[term] = f"{kernel}/{measured} (held-out MAPE {fit['heldout_mape']:.3f})"
        self._describe = {
            "model": self.name, "hardware": hw.name,
            "calibration": {k: cal[k] for k in ("source", "sha256", "provenance") if k in cal},
            "terms": dict(self.used, allreduce="roofline",
                          overhead=f"iteration_overhead_s {roofline.overhead:g}"),
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
        if p is None:
            return b.decode_context_tokens * self.kv_bytes_per_token / self.rl.bw
        per_layer = (p["fixed_s"] + p["per_seq_head_s"] * b.decode_seqs * self.kv_heads
                     + p["per_block_head_s"] * b.decode_blocks * self.kv_heads)
        ctx = b.decode_context_tokens
        return (self.layers * per_layer + p["per_kv_byte_s"] * ctx * self.kv_bytes_per_token
                + p["per_flop_s"] * ctx * self.rl.attn_flops_per_pair)

    def prefill_time(self, b: Batch) -> float:
        if not b.prefill_tokens:
            return 0.0
        p = self.p.get("prefill_attention")
        flops = self.rl.attn_flops_per_pair * b.prefill_attn_pairs
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
        tokens = batch.prefill_tokens + batch.decode_seqs
        t = self.rl.overhead + self.linear_time(tokens) + self.rl.allreduce_time(tokens)
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
        return t

    def describe(self) -> dict[str, Any]:
        return dict(self._describe)
