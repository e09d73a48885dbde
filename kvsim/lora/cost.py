"""The LoRA terms of an iteration's time, added to any cost model's (roofline, calibrated, kernels).

lora = max((A x S + T_a x X) / (B e_bw), 2 x P x T_a / (F e_gemm(T_a))) + K x k_s, when the batch runs
T_a > 0 adapter tokens, plus the adapter loads (Batch.lora_load_s: the model runner copies a missing
adapter into its GPU slot before the forward pass), with A the distinct adapters of the running requests,
S and P one slot's bytes and parameters per GPU at max_lora_rank (kvsim/lora/sizing.py: the punica
kernels run over the zero-padded slot), X the activation bytes the kernels move per adapter token
(sizing.activation_bytes: the layer input read once per slice, the float32 rank buffer zeroed, written
and read, the output read and written by the in-place expand), B the HBM bandwidth, F the peak FLOP/s at
bf16, e_bw and e_gemm the roofline's efficiencies (cost.bandwidth_efficiency, cost.gemm_efficiency_*), K
the punica kernels of one step (sizing.kernels_per_step for the engine's era: v0 21, v1 12 a layer) and
k_s the fixed seconds of one: `lora.kernel_overhead_s` for an eager step (prefill or mixed; lora/config.py
KERNEL_OVERHEAD_S per era), `lora.graph_kernel_overhead_s` for a decode-only step of at most
graph_max_seqs sequences, replayed as a CUDA graph (the roofline's rule). Added serially: vLLM runs the
shrink and expand kernels after the base GEMM of each layer, on the same stream.
"""

from __future__ import annotations

from typing import Any


class LoraCost:
    """A cost model with the LoRA terms (module docstring) added to `inner`'s step time; every other
    attribute is `inner`'s."""

    def __init__(self, inner, slot_bytes: float, slot_params: float, kernels: int, kernel_overhead_s: float,
                 hbm_bandwidth: float, peak_flops: float, e_max: float, m_half: float,
                 activation_bytes: float = 0.0, era: str = "v1", graph_kernel_overhead_s: float | None = None,
                 graph_max_seqs: int = 0) -> None:
        self.inner = inner
        self.slot_bytes = slot_bytes
        self.activation_bytes = activation_bytes
        self.flops_per_token = 2.0 * slot_params
        self.kernel_s = kernels * kernel_overhead_s
        g = kernel_overhead_s if graph_kernel_overhead_s is None else graph_kernel_overhead_s
        self.graph_kernel_s = kernels * g
        self.graph_max_seqs = graph_max_seqs
        self.bw = hbm_bandwidth
        self.flops = peak_flops
        self.e_max = e_max
        self.m_half = m_half
        self._describe = {"slot_bytes_per_gpu": slot_bytes, "activation_bytes_per_token": activation_bytes,
                          "flops_per_adapter_token": self.flops_per_token, "punica_era": era,
                          "kernels_per_step": kernels, "kernel_overhead_s": kernel_overhead_s,
                          "graph_kernel_overhead_s": g,
                          "effective_hbm_bandwidth": hbm_bandwidth, "peak_flops": peak_flops}

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("inner")
        if inner is None:  # (not built yet: copy / pickle look up __setstate__ and the like first)
            raise AttributeError(name)
        return getattr(inner, name)

    def lora_time(self, tokens: int, adapters: int, graph: bool = False) -> float:
        """Seconds of the LoRA kernels of a batch of `tokens` adapter tokens over `adapters` adapters, run
        eagerly or (`graph`) replayed in a CUDA graph."""
        if tokens <= 0:
            return 0.0
        mem = (adapters * self.slot_bytes + tokens * self.activation_bytes) / self.bw
        comp = self.flops_per_token * tokens / (self.flops * self.e_max * tokens / (tokens + self.m_half))
        return (mem if mem > comp else comp) + (self.graph_kernel_s if graph else self.kernel_s)

    def step_time(self, batch) -> float:
        t = self.inner.step_time(batch)
        if batch.lora_tokens:
            graph = not batch.prefill_tokens and batch.decode_seqs <= self.graph_max_seqs
            t += self.lora_time(batch.lora_tokens, batch.lora_adapters, graph)
        return t + batch.lora_load_s

    def describe(self) -> dict[str, Any]:
        out = dict(self.inner.describe())
        out["lora"] = dict(self._describe)
        return out
