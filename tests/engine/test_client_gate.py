"""The benchmark client's --max-concurrency (kvsim/engine/client_gate.py): FIFO slots, a refusal frees its
slot at once, and in a run a request is sent when a slot frees, its TTFT from then on."""

from __future__ import annotations

import numpy as np
import pytest

from kvsim.engine.client_gate import ClientGate
from kvsim.engine.simulation import Simulation
from kvsim.scenario import build_scenario
from kvsim.workload.request import Request


def req(rid: int) -> Request:
    return Request(rid=rid, arrival_s=0.0, prompt_len=8, output_len=4)


def test_slots_first_come_first_served():
    sent: list[int] = []
    gate = ClientGate(2, lambda r: sent.append(r.rid))
    for i in range(4):
        gate.arrive(req(i))
    assert sent == [0, 1] and [r.rid for r in gate.waiting] == [2, 3]
    gate.done()
    assert sent == [0, 1, 2] and gate.in_flight == 2
    gate.done()
    gate.done()
    assert sent == [0, 1, 2, 3] and gate.in_flight == 1


def test_refusal_inside_send_frees_the_slot_for_the_next():
    sent: list[int] = []
    gate: ClientGate

    def send(r: Request) -> None:
        sent.append(r.rid)
        if r.rid % 2 == 0:  # refused at once
            gate.done()

    gate = ClientGate(1, send)
    for i in range(5):
        gate.arrive(req(i))
    # 0 refused -> 1 sent (in flight); 1 ends -> 2 refused -> 3 sent
    assert sent == [0, 1] and gate.in_flight == 1
    gate.done()
    assert sent == [0, 1, 2, 3] and gate.in_flight == 1
    gate.done()
    assert sent == [0, 1, 2, 3, 4] and gate.in_flight == 0


def test_done_without_a_request_in_flight_is_a_bug():
    with pytest.raises(RuntimeError, match="none in flight"):
        ClientGate(1, lambda r: None).done()
    with pytest.raises(ValueError):
        ClientGate(0, lambda r: None)


def run(bench: dict, requests: int = 3):
    sc = build_scenario({"model": "llama-3-8b", "hardware": "h100-sxm",
                         "workload": {"kind": "bench_serve", "bench_serve": bench},
                         "simulation": {"seed": 0, "requests": requests}})
    return Simulation(sc).run().requests


def test_concurrency_one_sends_each_request_when_the_previous_ends():
    rq = run({"num_prompts": 3, "random_input_len": 64, "random_output_len": 8, "max_concurrency": 1})
    finish = rq["finish_s"].to_numpy()
    assert rq["arrival_s"].tolist() == [0.0, finish[0], finish[1]]
    assert rq["client_wait_s"].tolist() == [0.0, finish[0], finish[1]]
    # TTFT counts from the send: the three identical requests, each alone, see the same TTFT
    ttft = rq["ttft_s"].to_numpy()
    assert ttft == pytest.approx([ttft[0]] * 3, rel=1e-12) and ttft[0] < finish[0]


def test_rate_and_slots_together_send_at_the_later_of_the_two():
    rq = run({"num_prompts": 4, "random_input_len": 64, "random_output_len": 64, "request_rate": 1000,
              "burstiness": "inf", "max_concurrency": 2}, requests=4)
    due = np.array([1, 2, 3, 4]) / 1000
    arrival, finish = rq["arrival_s"].to_numpy(), rq["finish_s"].to_numpy()
    assert arrival[:2] == pytest.approx(due[:2], rel=1e-12)
    # requests 2 and 3 are due long before a slot frees: each goes when one of the first two ends
    first_two = np.sort(finish[:2])
    assert arrival[2] == first_two[0] and arrival[3] == first_two[1]
    assert rq["client_wait_s"].to_numpy() == pytest.approx(arrival - due, abs=1e-15)


def test_no_limit_sends_at_the_schedule_and_has_no_wait_column():
    rq = run({"num_prompts": 3, "random_input_len": 64, "random_output_len": 8})
    assert rq["arrival_s"].tolist() == [0.0, 0.0, 0.0] and "client_wait_s" not in rq.columns


def test_refused_requests_free_their_slot():
    sc = build_scenario({"model": "llama-3-8b", "hardware": "h100-sxm", "scheduler": {"max_model_len": 100},
                         "workload": {"kind": "bench_serve", "bench_serve": {
                             "num_prompts": 6, "random_input_len": 100, "random_output_len": 10,
                             "random_range_ratio": 0.5, "max_concurrency": 1, "seed": 1}},
                         "simulation": {"seed": 0, "requests": 6}})
    rq = Simulation(sc).run().requests
    refused = rq["rejected"].to_numpy() == 1
    assert refused.any() and (~refused).any() and len(rq) == 6
    # every request after a refused one goes out at the same instant as it
    arrival = rq["arrival_s"].to_numpy()
    for i in np.flatnonzero(refused[:-1]):
        assert arrival[i + 1] == arrival[i]
