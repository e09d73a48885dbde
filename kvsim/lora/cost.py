"""The LoRA terms of an iteration's time, added to any cost model's (roofline, calibrated, kernels).

lora = max(A x S / (B e_bw), 2 x P x T_a / (F e_gemm(T_a))) + K x k_s, when the batch runs T_a > 0
adapter tokens, plus the adapter loads (Batch.lora_load_s: the model runner copies a missing adapter
into its GPU slot before the forward pass), with A the distinct adapters of the running requests, S and
P one slot's bytes and parameters per GPU at max_lora_rank (kvsim/lora/sizing.py: the punica kernels
run over the zero-padded slot), B the HBM bandwidth, F the peak FLOP/s at bf16, e_bw and e_gemm the
roofline's efficiencies (cost.bandwidth_efficiency, cost.gemm_efficiency_*), K the punica kernels of one
step (2 per wrapped module and layer) and k_s `lora.kernel_overhead_s`. Added serially: vLLM runs the
shrink and expand kernels after the base GEMM of each layer, on the same stream.
"""

from __future__ import annotations

from typing import Any


class LoraCost:
    """A cost model with the LoRA terms (module docstring) added to `inner`'s step time; every other
    attribute is `inner`'s."""

    def __init__(self, inner, slot_bytes: float, slot_params: float, kernels: int, kernel_overhead_s: float,
                 hbm_bandwidth: float, peak_flops: float, e_max: float, m_half: float) -> None:
        self.inner = inner
        self.slot_bytes = slot_bytes
        self.flops_per_token = 2.0 * slot_params
        self.kernel_s = kernels * kernel_overhead_s
        self.bw = hbm_bandwidth
        self.flops = peak_flops
        self.e_max = e_max
        self.m_half = m_half
        self._describe = {"slot_bytes_per_gpu": slot_bytes, "flops_per_adapter_token": self.flops_per_token,
                          "kernels_per_step": kernels, "kernel_overhead_s": kernel_overhead_s,
                          "effective_hbm_bandwidth": hbm_bandwidth, "peak_flops": peak_flops}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def lora_time(self, tokens: int, adapters: int) -> float:
        """Seconds of the LoRA kernels of a batch of `tokens` adapter tokens over `adapters` adapters."""
        if tokens <= 0:
            return 0.0
        mem = adapters * self.slot_bytes / self.bw
        comp = self.flops_per_token * tokens / (self.flops * self.e_max * tokens / (tokens + self.m_half))
        return (mem if mem > comp else comp) + self.kernel_s

    def step_time(self, batch) -> float:
        t = self.inner.step_time(batch)
        if batch.lora_tokens:
            t += self.lora_time(batch.lora_tokens, batch.lora_adapters)
        return t + batch.lora_load_s

    def describe(self) -> dict[str, Any]:
        out = dict(self.inner.describe())
        out["lora"] = dict(self._describe)
        return out
