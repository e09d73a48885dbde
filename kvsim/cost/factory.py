"""Build the cost model a scenario names."""

from __future__ import annotations

from kvsim.cost.base import CostModel
from kvsim.cost.calibrated import CalibratedCost
from kvsim.cost.kernels import KERNEL_DEFAULTS, KernelCost
from kvsim.cost.roofline import RooflineCost
from kvsim.errors import KvsimError
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.kernel_tables import has_kernel_tables, kernels_dir, load_kernel_tables
from kvsim.specs.model import ModelSpec


def build_cost_model(scenario, model: ModelSpec, hw: HardwareSpec, bytes_per_block: float) -> CostModel:
    c = scenario.cost
    tp = scenario.parallelism.tensor_parallel_size
    roofline = RooflineCost(
        model, hw, tp, scenario.kv.dtype, bytes_per_block,
        iteration_overhead_s=c.iteration_overhead_s, gemm_efficiency_max=c.gemm_efficiency_max,
        gemm_efficiency_m_half=c.gemm_efficiency_m_half, bandwidth_efficiency=c.bandwidth_efficiency,
        attention_efficiency=c.attention_efficiency, layer_overhead_s=c.layer_overhead_s,
        eager_layer_overhead_s=c.eager_layer_overhead_s, seq_overhead_s=c.seq_overhead_s)
    if c.model == "roofline":
        return roofline
    if c.model == "calibrated":
        return CalibratedCost(model, hw, tp, scenario.kv.dtype, bytes_per_block, roofline)
    if c.model == "kernels":
        if not has_kernel_tables(hw.name):
            raise KvsimError(f"cost.model: kernels: hardware profile '{hw.name}' has no kernel tables "
                             f"({kernels_dir(hw.name)}); use roofline or calibrated")
        # the overhead terms the scenario leaves unset are this model's own fit (KERNEL_DEFAULTS)
        own = {k: v for k, v in KERNEL_DEFAULTS.items() if k not in c.model_fields_set}
        tunables = roofline.tunables() | own
        return KernelCost(model, hw, tp, scenario.kv.dtype, bytes_per_block, load_kernel_tables(hw.name),
                          **tunables)
    raise KvsimError(f"cost.model: unknown model '{c.model}'; known: roofline, calibrated, kernels")
