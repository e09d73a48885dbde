"""kvsim/sweep/grid.py: sweep files -> tasks (points x grid x repeats, hashed), rows of a run."""

from __future__ import annotations

import pytest

from kvsim.errors import KvsimError
from kvsim.sweep.grid import flatten, load_sweep, run_task


def write(tmp_path, text: str):
    p = tmp_path / "sweep.yaml"
    p.write_text(text)
    return p


def test_points_cross_the_grid_and_repeats(tmp_path):
    sw = load_sweep(write(tmp_path, """
set: {simulation.requests: 20}
grid: {kv.block_size: [16, 32], workload.arrival.rate: [2, 4, 8]}
points: [{hardware: h100-sxm}, {hardware: a100-80gb}]
repeats: 2
"""))
    assert len(sw.tasks) == 2 * 6 * 2
    assert sw.keys == ["hardware", "kv.block_size", "workload.arrival.rate"]
    first = sw.tasks[0]
    assert (first.point, first.repeat, first.seed) == (0, 0, 0)
    assert dict(first.values) == {"hardware": "h100-sxm", "kv.block_size": 16, "workload.arrival.rate": 2}
    assert (sw.tasks[1].point, sw.tasks[1].repeat, sw.tasks[1].seed) == (0, 1, 1)
    assert dict(sw.tasks[2].values)["workload.arrival.rate"] == 4  # the last grid key varies fastest
    assert len({t.scenario_hash for t in sw.tasks}) == len(sw.tasks)
    again = load_sweep(tmp_path / "sweep.yaml")
    assert [t.scenario_hash for t in again.tasks] == [t.scenario_hash for t in sw.tasks]


@pytest.mark.parametrize("text, needle", [
    ("[1, 2]", "a sweep file is a mapping"),
    ("grids: {}", "unknown key 'grids'"),
    ("grid: {kv.block_size: []}", "grid: map each scenario key to a non-empty list"),
    ("points: {a: 1}", "points: a list of mappings"),
    ("repeats: 0", "repeats: a whole number from 1 to 1000"),
    ("grid: {kv.block_size: [16, 0]}", "point 1 (kv.block_size=0)"),
    ("points: [{kv.blok: 1}]", "point 0 (kv.blok=1): default scenario: kv.blok: unknown key"),
    ("scenario: 3", "scenario: a path"),
    ("grid: {kv.block_size: [16]}\npoints: [{kv.block_size: 0}]",  # (the point's 0 was dropped silently)
     "points 0: 'kv.block_size' is also a grid key"),
])
def test_bad_sweep_files_say_where(tmp_path, text, needle):
    with pytest.raises(KvsimError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_sweep(write(tmp_path, text))


def test_flatten_keeps_scalars_only():
    s = {"a": {"b": 1, "c": [1, 2], "d": {"e": 0.5, "f": float("nan")}}, "scenario": {"x": 1}, "g": "txt",
         "h": None, "i": True}
    assert flatten(s) == {"a.b": 1, "a.d.e": 0.5, "a.d.f": None, "g": "txt", "h": None, "i": True}


def test_run_task_row(tmp_path):
    sw = load_sweep(write(tmp_path, "set: {simulation.requests: 15}\npoints: [{kv.block_size: 32}]\n"))
    row = run_task(sw.scenario, sw.tasks[0])
    assert row["point"] == 0 and row["seed"] == 0 and row["point.kv.block_size"] == 32
    assert row["kv.block_size"] == 32 and row["requests.total"] == 15
    assert row["scenario_hash"] == sw.tasks[0].scenario_hash


def test_example_sweep_file_loads():
    from pathlib import Path

    sw = load_sweep(Path(__file__).parents[2] / "workloads" / "sweeps" / "chat_gpus_dtypes.yaml")
    assert len(sw.tasks) == 32 and sw.keys == ["hardware", "kv.dtype", "workload.arrival.rate"]


def test_a_huge_grid_is_counted_from_its_axes_before_anything_is_built(tmp_path):
    """14 axes of 10 values: 10^14 runs, refused at once (the product is never built, no point checked)."""
    import time

    axes = "\n".join(f"  k{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" for i in range(14))
    t0 = time.monotonic()
    with pytest.raises(KvsimError) as exc:
        load_sweep(write(tmp_path, f"grid:\n{axes}\npoints: [{{}}, {{}}]\nrepeats: 3\n"))
    assert time.monotonic() - t0 < 2
    assert str(exc.value) == (f"{tmp_path / 'sweep.yaml'}: grid: 600,000,000,000,000 runs (2 points x "
                              "100,000,000,000,000 grid combinations x 3 repeats); at most 100,000")


@pytest.mark.parametrize("text, needle", [
    ("grid: {simulation.seed: [0, 1]}\nrepeats: 2",
     "point 1 repeat 0 (simulation.seed=1, seed 1) runs the same scenario and seed as point 0 repeat 1"),
    ("points: [{kv.block_size: 16}, {kv.block_size: 16}]",
     "point 1 repeat 0 (kv.block_size=16, seed 0) runs the same scenario and seed as point 0 repeat 0"),
])
def test_two_runs_of_one_scenario_and_seed_are_refused(tmp_path, text, needle):
    """A row is keyed by its scenario hash: two runs of one scenario would keep one row, and a rerun would
    never see the sweep complete."""
    with pytest.raises(KvsimError, match=needle.replace("(", r"\(").replace(")", r"\)")) as exc:
        load_sweep(write(tmp_path, text))
    assert "\n" not in str(exc.value)
