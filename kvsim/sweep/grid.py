"""`kvsim sweep GRID.yaml`: the points of a sweep file, one simulation per point and repeat, and the table
of results (one row per point and repeat, every summary figure a column).

A sweep file:

    scenario: chat.yaml                 # relative to this file; omitted: the built-in default
    set: {simulation.requests: 500}     # overrides of every point (optional)
    grid:                               # every combination (the first key varies slowest)
      kv.block_size: [16, 32]
      workload.arrival.rate: [2, 4, 8]
    points:                             # and/or a list of points, each crossed with the grid
      - {hardware: h100-sxm}
      - {hardware: a100-80gb, parallelism.tensor_parallel_size: 2}
    repeats: 2                          # seeds seed .. seed + 1 per point (default 1)

A row is keyed by `scenario_hash`, the SHA-256 of the resolved scenario (seed included): a rerun into the
same folder skips the rows it already has, so an interrupted or extended sweep resumes.
docs/metrics.md (kvsim sweep) defines the columns.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvsim import inputs
from kvsim.errors import KvsimError, excerpt
from kvsim.scenario import load_scenario, scenario_dict, set_items, yaml_text
from kvsim.sweep.repeats import MAX_REPEATS, summary_of

MAX_POINTS = 100_000
"""Runs (points x grid combinations x repeats) at most in one sweep, counted from the axes before any
point is built or validated."""
KEYS = ("scenario", "set", "grid", "points", "repeats")


@dataclass(slots=True, frozen=True)
class Task:
    """One simulation of a sweep: point `point` (its values), repeat `repeat` under `seed`."""

    point: int
    repeat: int
    seed: int
    values: tuple[tuple[str, Any], ...]
    overrides: tuple[str, ...]
    scenario_hash: str


@dataclass(slots=True)
class Sweep:
    """A parsed sweep file: the base scenario path, the shared overrides, the tasks."""

    source: str
    scenario: str | None
    tasks: list[Task]
    keys: list[str]
    """The varied keys, in column order."""


def _overrides(mapping: dict[str, Any], where: str) -> list[str]:
    if not isinstance(mapping, dict):
        raise KvsimError(f"{where}: must be a mapping of scenario keys to values")
    return set_items(mapping.items())


def load_sweep(path: str | Path, seed: int | None = None) -> Sweep:
    """Parse and check a sweep file: every point's scenario is validated (one-line error naming the point)
    before anything runs."""
    p = Path(path)
    data = inputs.parse_yaml(inputs.read_text(p, "sweep file"), str(p))
    return sweep_from(data, str(p), p.parent, seed)


def sweep_from(data: Any, source: str, base_dir: str | Path | None, seed: int | None = None) -> Sweep:
    """load_sweep of an already parsed sweep mapping (`source` names it in errors; a relative `scenario`
    resolves against base_dir first)."""
    p = Path(source)
    base = Path(base_dir) if base_dir is not None else Path(".")
    if not isinstance(data, dict):
        raise KvsimError(f"{p}: a sweep file is a mapping with {', '.join(KEYS)}")
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise KvsimError(f"{p}: unknown key {excerpt(unknown[0])}; known: {', '.join(KEYS)}")
    scenario = data.get("scenario")
    if scenario is not None:
        if not isinstance(scenario, str):
            raise KvsimError(f"{p}: scenario: a path to a scenario YAML")
        cand = base / scenario
        scenario = str(cand if cand.exists() or not Path(scenario).exists() else Path(scenario))
    shared = _overrides(data.get("set") or {}, f"{p}: set")
    grid = data.get("grid") or {}
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise KvsimError(f"{p}: grid: map each scenario key to a non-empty list of values")
    points = data.get("points") or [{}]
    if not isinstance(points, list) or not all(isinstance(x, dict) for x in points):
        raise KvsimError(f"{p}: points: a list of mappings of scenario keys to values")
    for index, pt in enumerate(points):
        both = [k for k in pt if k in grid]
        if both:  # values = {**point, **combination}: the grid's value would replace the point's silently
            raise KvsimError(f"{p}: points {index}: {excerpt(str(both[0]))} is also a grid key (the grid's "
                             "values would replace the point's); give it in one place")
    repeats = data.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= MAX_REPEATS:
        raise KvsimError(f"{p}: repeats: a whole number from 1 to {MAX_REPEATS}, got {excerpt(repeats)}")
    combinations = math.prod(len(v) for v in grid.values())  # (counted from the axes: nothing built yet)
    runs = len(points) * combinations * repeats
    if runs > MAX_POINTS:
        raise KvsimError(f"{p}: grid: {runs:,} runs ({len(points):,} points x {combinations:,} grid "
                         f"combinations x {repeats} repeats); at most {MAX_POINTS:,}")
    combos = list(itertools.product(*grid.values()))
    keys = list(dict.fromkeys([*(k for pt in points for k in pt), *grid]))
    tasks: list[Task] = []
    seen: dict[str, int] = {}  # scenario_hash -> its task's index
    index = 0
    for pt in points:
        for combo in combos:
            values = {**pt, **dict(zip(grid, combo, strict=True))}
            over = [*shared, *_overrides(values, f"{p}: point {index}")]
            try:
                sc = load_scenario(scenario, over, seed)
            except KvsimError as exc:
                raise KvsimError(f"{p}: point {index} ({point_label(values)}): {exc}") from None
            base_seed = sc.simulation.seed
            if base_seed + repeats - 1 > 2**63 - 1:
                raise KvsimError(f"{p}: repeats {repeats} from seed {base_seed} pass 2^63 - 1")
            for r in range(repeats):
                s = base_seed + r
                h = _hash(sc, s)
                if h in seen:  # a row is keyed by its scenario: two runs of one would keep one row
                    first = tasks[seen[h]]
                    raise KvsimError(f"{p}: point {index} repeat {r} ({point_label(values)}, seed {s}) runs "
                                     f"the same scenario and seed as point {first.point} repeat "
                                     f"{first.repeat}; a sweep runs each once (drop the duplicate point, or "
                                     "seeds that repeats already cover)")
                seen[h] = len(tasks)
                tasks.append(Task(index, r, s, tuple(values.items()), tuple(over), h))
            index += 1
    return Sweep(source, scenario, tasks, keys)


def point_label(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "the base scenario"


def _hash(sc, seed: int) -> str:
    data = scenario_dict(sc)
    data["simulation"]["seed"] = seed
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def flatten(summary: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every scalar figure of a summary as `dotted.key -> value` (lists, the scenario echo and per-replica
    / per-pool detail left out)."""
    out: dict[str, Any] = {}
    for k, v in summary.items():
        key = f"{prefix}{k}"
        if key in ("scenario", "cost.pools", "cost_model", "fleet.per_replica", "fleet.pools"):
            continue
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, bool) or v is None or isinstance(v, (int, str)):
            out[key] = v
        elif isinstance(v, float):
            out[key] = v if math.isfinite(v) else None
    return out


def run_task(scenario: str | None, task: Task) -> dict[str, Any]:
    """Simulate one task and return its row (the task's identity, then the flattened summary)."""
    summary = summary_of(scenario, list(task.overrides), task.seed)
    row: dict[str, Any] = {"point": task.point, "repeat": task.repeat, "seed": task.seed,
                           "scenario_hash": task.scenario_hash}
    for k, v in task.values:
        row[f"point.{k}"] = v if isinstance(v, (bool, int, float, str)) or v is None else yaml_text(v)
    row.update(flatten(summary))
    return row
