"""A second run() of one Simulation object equals its first (and a fresh object's), byte for byte."""
from pathlib import Path

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.scenario import load_scenario

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"


@pytest.mark.parametrize("name", ["rag", "speculative_chat", "fleet_chat"])
def test_a_second_run_of_one_simulation_repeats_the_first(name):
    # rag: the kernel grid's last cell carried into the second run changed the last bit of a dt_s;
    # speculative_chat: the sizing numbered its replicas on, so the second run drew other acceptances
    sim = Simulation(load_scenario(str(WORKLOADS / f"{name}.yaml"), ["simulation.requests=120"]))
    first, second = sim.run(), sim.run()
    assert first.requests.equals(second.requests)
    assert first.timeline.equals(second.timeline)
    assert second.meta == first.meta


def test_a_second_run_counts_its_progress_and_sequences_from_zero():
    seen: list[tuple[int, int]] = []
    sim = Simulation(load_scenario(str(WORKLOADS / "rag.yaml"), ["simulation.requests=30"]),
                     progress=lambda done, total: seen.append((done, total)))
    sim.run()
    first, seq_no = list(seen), sim._seq_no
    seen.clear()
    sim.run()
    assert seen == first and seen[-1] == (30, 30)
    assert sim._seq_no == seq_no
