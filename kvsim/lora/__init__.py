"""Multi-LoRA serving (vLLM's `enable_lora`, `max_loras`, `max_lora_rank`, `max_cpu_loras`): the scenario
section, adapter slots in GPU memory, loads from host memory, and the LoRA GEMM cost. See docs/lora.md.
Kept import-light: kvsim.scenario imports the config module."""
