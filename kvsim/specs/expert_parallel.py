"""Expert parallelism (vLLM's `--enable-expert-parallel`) in the specs: which all-to-all backends kvsim
knows, which models and sizes it models, and the weight bytes one GPU holds (docs/moe.md).

vLLM (vllm/config/parallel.py, vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig):
with enable_expert_parallel the MoE layers of the TP x DP GPUs of a data-parallel deployment form one
expert-parallel group of EP = TP x DP ranks, each holding num_experts / EP whole experts (the MoE layer's
own tensor parallelism is 1); attention, the dense MLPs, the shared experts, the router and the
embeddings stay split by TP inside each DP rank, replicated across DP ranks. So one GPU holds

    weights = (all weights - routed experts) / TP + routed experts / EP

(ep_weight_bytes). vLLM itself gives the first num_experts mod EP ranks one expert more when EP does not
divide num_experts; kvsim does not model that uneven split (expert_parallel_problem refuses it).
"""

from __future__ import annotations

from kvsim.specs.dtypes import DTYPE_BYTES
from kvsim.specs.model import ModelSpec

ALL2ALL_BACKENDS: dict[str, str] = {
    "allgather_reducescatter": "gather",
    "naive": "gather",
    "deepep_high_throughput": "alltoall",
    "deepep_low_latency": "alltoall",
    "pplx": "alltoall",
}
"""vLLM's `--all2all-backend` names kvsim models -> how the dispatch and combine move data (docs/moe.md):
`gather`: every DP rank's tokens all-gathered over the DP group, the experts' partial outputs
reduce-scattered back (vLLM's default, allgather_reducescatter; naive moves the same bytes by broadcasts);
`alltoall`: each token's hidden state sent to the EP ranks of its top-k experts and the outputs sent back
(DeepEP, pplx)."""
DEFAULT_ALL2ALL_BACKEND = "allgather_reducescatter"
FP8_DISPATCH = ("fp8", "fp8_block")
"""Weight dtypes whose DeepEP dispatch sends fp8 activations (1 byte a value); every other dispatch and
every combine moves bf16 (2 bytes)."""


def routed_expert_total_bytes(model: ModelSpec) -> float:
    """Bytes of every routed expert of every MoE layer, the whole model (ModelSpec.routed_expert_bytes at
    tp 1)."""
    return model.routed_expert_bytes(1)


def ep_weight_bytes(model: ModelSpec, tp: int, ep: int) -> float:
    """Weight bytes one GPU holds under expert parallelism: (num_params x bytes - routed experts) / tp +
    routed experts / ep (module docstring)."""
    routed = routed_expert_total_bytes(model)
    total = model.num_params * DTYPE_BYTES[model.weight_dtype]
    return (total - routed) / tp + routed / ep


def experts_per_gpu(model: ModelSpec, ep: int) -> int:
    """Routed experts one EP rank holds per MoE layer: num_experts / ep."""
    return model.num_experts // ep


def expert_parallel_problem(model: ModelSpec, tp: int, dp: int) -> str | None:
    """Why `model` cannot run with expert parallelism over tp x dp GPUs (a one-line message naming the
    key), or None."""
    ep = tp * dp
    if not model.routes_experts:
        return (f"parallelism.enable_expert_parallel: model {model.name} has no routed experts "
                "(num_experts, experts_per_token); expert parallelism needs a mixture-of-experts model")
    if model.num_experts % ep:
        return (f"parallelism.enable_expert_parallel: the {model.num_experts} routed experts of {model.name}"
                f" do not split evenly over EP = tensor_parallel_size x data_parallel_size = {tp} x {dp}"
                f" = {ep} GPUs (an uneven split is not modelled)")
    return None


def dispatch_bytes_per_value(model: ModelSpec, backend: str) -> int:
    """Bytes of one dispatched activation value: 1 for DeepEP with fp8 experts (it quantizes before the
    dispatch), else 2 (bf16)."""
    return 1 if backend.startswith("deepep") and model.weight_dtype in FP8_DISPATCH else 2
