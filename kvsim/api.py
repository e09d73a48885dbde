"""The Python API for notebooks and scripts: `kvsim.run(...)` -> Result, and `kvsim.compare`, `kvsim.sweep`,
`kvsim.plan` (the commands' tables and answers, without writing files).

    import kvsim
    res = kvsim.run("workloads/chat.yaml", kv__block_size=32, simulation__requests=500)
    res.summary["latency"]["ttft_s"]["p99"], res.requests.head()
    res.timeline.plot(x="t_s", y="kv_used_blocks")

Overrides are keyword arguments, the scenario key with `__` for each dot (`kv__prefix_cache="hash"`), or
a dict of dotted keys (`overrides={"kv.prefix_cache": "hash"}`); values are Python values. Errors are
KvsimError with the one-line message the command line prints.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvsim.engine.simulation import Simulation
from kvsim.errors import MAX_JOBS, KvsimError, KvsimWarning, check_jobs, excerpt
from kvsim.metrics.nothing_completed import nothing_completed
from kvsim.metrics.run_tables import TableFrames
from kvsim.metrics.summary import build_summary
from kvsim.scenario import Scenario, load_yaml, scenario_at, scenario_dict, set_items, set_key

if TYPE_CHECKING:
    import pandas as pd


@dataclass(slots=True)
class Result(TableFrames):
    """One simulated run: summary.json's dict, the requests and timeline tables (as requests.parquet and
    timeline.parquet hold them: pandas DataFrames, built on first use) and the resolved scenario."""

    summary: dict[str, Any]
    tables: Any = field(repr=False)
    """The run's tables as the recorder left them (kvsim/metrics/run_tables.py RunTables)."""
    scenario: Scenario = field(repr=False)
    refusals: dict[str, int] = field(default_factory=dict)
    """Why requests were refused outright (prompt longer than max_model_len, more KV blocks than the pool
    has, ...) -> how many; summary["requests"]["rejected"] is their sum."""

    def __repr__(self) -> str:
        s = self.summary
        return (f"Result({s['requests']['completed']}/{s['requests']['total']} requests, "
                f"TTFT p99 {s['latency']['ttft_s']['p99']}, {s['throughput']['requests_per_s']} req/s)")


def load(scenario: str | Path | dict[str, Any] | Scenario | None = None,
         overrides: dict[str, Any] | None = None, **kw_overrides: Any) -> Scenario:
    """The validated scenario: a YAML path, a dict of sections, a Scenario, or None (the built-in
    default), with overrides applied (see the module docstring)."""
    if not (scenario is None or isinstance(scenario, (str, Path, dict, Scenario))):
        raise KvsimError(f"scenario: a YAML path, a dict of sections, a Scenario or None, got "
                         f"{type(scenario).__name__}")
    _check_overrides(overrides)
    try:
        return _load(scenario, overrides, kw_overrides)
    except RecursionError:
        raise KvsimError("scenario: nested too deeply (a mapping inside a mapping more than Python's "
                         "recursion limit allows)") from None


def _check_overrides(overrides: Any) -> None:
    if overrides is not None and not isinstance(overrides, dict):
        raise KvsimError(f"overrides: a dict of dotted keys to values, got {type(overrides).__name__}")
    for key in overrides or {}:
        if not isinstance(key, str):
            raise KvsimError(f"overrides: keys are dotted scenario keys (strings), got {type(key).__name__}")


def _check_path(scenario: Any) -> None:
    """compare's and plan's scenario: a YAML path or None (the built-in default)."""
    if not (scenario is None or isinstance(scenario, (str, Path))):
        raise KvsimError(f"scenario: a YAML path or None, got {type(scenario).__name__}")


def _load(scenario, overrides: dict[str, Any] | None, kw_overrides: dict[str, Any]) -> Scenario:
    if isinstance(scenario, Scenario):
        data = scenario_dict(scenario)
        data["simulation"]["exact_stepping"] = scenario.simulation.exact_stepping
        base, source = scenario.base_dir, "scenario"
    elif isinstance(scenario, dict):
        data, base, source = copy.deepcopy(scenario), None, "scenario dict"
    elif scenario is None:
        data, base, source = {}, None, "default scenario"
    else:
        path = Path(scenario)
        data, base, source = load_yaml(path), str(path.parent), str(path)
    items = {**(overrides or {}), **{k.replace("__", "."): v for k, v in kw_overrides.items()}}
    for key, value in items.items():
        set_key(data, key, value)
    return scenario_at(data, source, base)


def run(scenario: str | Path | dict[str, Any] | Scenario | None = None,
        overrides: dict[str, Any] | None = None, **kw_overrides: Any) -> Result:
    """Simulate one scenario (as `kvsim run`, without writing files) and return its Result. A run in which
    no request completed issues a KvsimWarning with the line `kvsim run` prints first (`0 of 5 requests
    completed: 5 refused (5 prompt longer than max_model_len); ...`); Result.refusals has the counts."""
    sc = load(scenario, overrides, **kw_overrides)
    res = Simulation(sc).run()
    summary = build_summary(res.tables, None, res.meta)
    none_done = nothing_completed(summary, res.meta, "figures of the summary")
    if none_done:
        warnings.warn(none_done.removeprefix("warning: "), KvsimWarning, stacklevel=2)
    return Result(summary, res.tables, sc, dict(res.meta.get("refusals") or {}))



def compare(scenario: str | Path | None, vary: dict[str, list[Any]], overrides: dict[str, Any] | None = None,
            seed: int | None = None, jobs: int = 1) -> pd.DataFrame:
    """`kvsim compare` without files: one row per variant of the grid `vary` (key -> values), the table's
    figures as columns (compare.csv's), the identical request stream for every variant."""
    from kvsim.sweep.compare import compare_frame, run_compare

    _check_path(scenario)
    if not isinstance(vary, dict) or not vary:
        raise KvsimError("vary: a non-empty dict of scenario key -> list of values, got "
                         f"{type(vary).__name__}")
    for key, values in vary.items():
        if not isinstance(key, str):
            raise KvsimError(f"vary: keys are dotted scenario keys (strings), got {type(key).__name__}")
        if not isinstance(values, (list, tuple)) or not values:
            shown = (excerpt(values) if isinstance(values, (str, int, float, type(None)))
                     else type(values).__name__)
            raise KvsimError(f"vary.{key}: a non-empty list of values, got {shown}")
        set_items((key, v) for v in values)  # each value must be one YAML can write (a KvsimError if not)
    _check_overrides(overrides)
    check_jobs(jobs, MAX_JOBS)
    axes = [(k, list(values)) for k, values in vary.items()]  # (values as given: "a,b" is one value)
    return compare_frame(run_compare(scenario, axes, set_items((overrides or {}).items()), seed, jobs))


def sweep(spec: str | Path | dict[str, Any], backend: str = "process", jobs: int = 1,
          address: str | None = None) -> pd.DataFrame:
    """`kvsim sweep` without files: a sweep file's path or its mapping (`scenario`, `set`, `grid`, `points`,
    `repeats`) -> the sweep.parquet table. A point that fails while running raises KvsimError with the
    command's line (`sweep point 1 (model=...): ...`), a kvsim bug in a worker kvsim.errors.WorkerError."""
    from kvsim.sweep.run import sweep_table

    return sweep_table(spec, backend, jobs, address)


def plan(scenario: str | Path | None, find: str, slo: dict[str, dict[str, float]],
         overrides: dict[str, Any] | None = None, repeats: int = 1, precision: float = 0.05, jobs: int = 1,
         hardware: list[str] | None = None, tps: list[int] | None = None, qps: float | None = None,
         max_extension: int = 32) -> dict[str, Any]:
    """`kvsim plan` without files: the search's plan.json as a dict (`answer`, `answer_requests_per_s`,
    `probes` with their steady-state verdicts, ...); `qps`: min_replicas / min_cost's load in requests/s."""
    from kvsim.sweep.plan import run_plan

    _check_path(scenario)
    _check_overrides(overrides)
    check_jobs(jobs, MAX_JOBS)
    items = set_items([*(overrides or {}).items(), ("slo", slo)])
    return run_plan(scenario, items, None, find, repeats, precision, jobs, None, hardware, tps, max_extension,
                    qps).doc()


__all__ = ["KvsimError", "Result", "compare", "load", "plan", "run", "sweep"]
