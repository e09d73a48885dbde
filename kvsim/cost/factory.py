"""Build the cost model a scenario names."""

from __future__ import annotations

from kvsim.cost.base import CostModel
from kvsim.cost.calibrated import CalibratedCost
from kvsim.cost.expert_parallel import ExpertParallel
from kvsim.cost.kernels import KERNEL_DEFAULTS, KernelCost
from kvsim.cost.roofline import RooflineCost
from kvsim.errors import KvsimError
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.kernel_tables import has_kernel_tables, kernels_dir, load_kernel_tables
from kvsim.specs.model import ModelSpec

OVERHEAD_KEYS = ("iteration_overhead_s", "layer_overhead_s", "eager_layer_overhead_s", "seq_overhead_s",
                 "request_overhead_s")
"""The `cost.` keys whose None means "the cost model's own default"."""


def build_cost_model(scenario, model: ModelSpec, hw: HardwareSpec, bytes_per_block: float) -> CostModel:
    cost = _build(scenario, model, hw, bytes_per_block)
    par = scenario.parallelism
    if getattr(par, "enable_expert_parallel", False):
        _expert_parallel(cost, par, model, hw)
    return cost


def _expert_parallel(cost, par, model: ModelSpec, hw: HardwareSpec) -> None:
    """Attach the expert-parallel MoE timing (kvsim/cost/expert_parallel.py) to a roofline or kernel
    model; the calibrated model has no expert term to replace."""
    if not isinstance(cost, RooflineCost) or isinstance(cost, CalibratedCost):
        raise KvsimError("parallelism.enable_expert_parallel: not modelled with cost.model: calibrated; use "
                         "auto, kernels or roofline")
    tables = cost.tables if isinstance(cost, KernelCost) else None
    ep = ExpertParallel(model, hw, par.tensor_parallel_size, par.replicas, par.all2all_backend,
                        par.expert_load_factor, tables, cost)
    cost.expert_parallel = ep
    if isinstance(cost, KernelCost):  # the moe op is the EP rank's table (or the roofline's), not ep 1's
        cost.why.pop("moe", None)
        cost.kernels.pop("moe", None)
        if ep.moe is not None and ep.moe.why:
            cost.why["moe"] = f"expert parallel: {ep.moe.why}"
        elif ep.moe is not None:
            cost.kernels["moe"] = f"{ep.moe.kernel}, ep {ep.ep}"


def _build(scenario, model: ModelSpec, hw: HardwareSpec, bytes_per_block: float) -> CostModel:
    c = scenario.cost
    tp = scenario.parallelism.tensor_parallel_size
    overheads = {k: getattr(c, k) for k in OVERHEAD_KEYS if getattr(c, k) is not None}
    roofline = RooflineCost(
        model, hw, tp, scenario.kv.dtype, bytes_per_block, gemm_efficiency_max=c.gemm_efficiency_max,
        gemm_efficiency_m_half=c.gemm_efficiency_m_half, bandwidth_efficiency=c.bandwidth_efficiency,
        attention_efficiency=c.attention_efficiency, **overheads)
    if c.model == "auto":
        if has_kernel_tables(hw.name):
            cost = _kernels(c, model, hw, tp, scenario.kv.dtype, bytes_per_block, roofline)
            cost.selected = f"cost.model auto: kernels (hardware profile '{hw.name}' has kernel tables)"
        else:
            cost = roofline
            cost.selected = (f"cost.model auto: roofline (hardware profile '{hw.name}' has no kernel tables: "
                             f"calibration/{hw.name}/kernels)")
        return cost
    if c.model == "roofline":
        return roofline
    if c.model == "calibrated":
        return CalibratedCost(model, hw, tp, scenario.kv.dtype, bytes_per_block, roofline)
    if c.model == "kernels":
        if not has_kernel_tables(hw.name):
            raise KvsimError(f"cost.model: kernels: hardware profile '{hw.name}' has no kernel tables "
                             f"({kernels_dir(hw.name)}); use roofline or calibrated")
        return _kernels(c, model, hw, tp, scenario.kv.dtype, bytes_per_block, roofline)
    raise KvsimError(f"cost.model: unknown model '{c.model}'; known: auto, roofline, calibrated, kernels")


def _kernels(c, model: ModelSpec, hw: HardwareSpec, tp: int, kv_dtype: str, bytes_per_block: float,
             roofline: RooflineCost) -> KernelCost:
    # the overhead terms the scenario leaves unset (None) are this model's own fit (KERNEL_DEFAULTS)
    own = {k: v for k, v in KERNEL_DEFAULTS.items() if getattr(c, k) is None}
    # the tables as numpy columns (kvsim/specs/table_columns.py): building the model imports no pandas
    tables = load_kernel_tables(hw.name, lazy=True, columns=True)
    return KernelCost(model, hw, tp, kv_dtype, bytes_per_block, tables, **(roofline.tunables() | own))
