"""A hand-filled Recorder shared by the metrics tests: 3 admitted requests (plus one rejected) and 4
timeline rows on 2 replicas.
Expected figures are worked out by hand in test_summary.py."""

from __future__ import annotations

import math

import pytest

from kvsim.metrics.recorder import TIMELINE_COLUMNS, IterationRow, Recorder, RequestRow

NAN = math.nan

REQUEST_NAMES = ("rid", "replica", "arrival_s", "prompt_len", "output_len", "n", "first_scheduled_s",
                 "first_token_s", "finish_s", "preemptions", "cached_tokens", "rejected")
REQUEST_ROWS = [
    (0, 0, 0.0, 100, 11, 1, 0.0, 0.5, 1.5, 0, 0, 0),
    (1, 0, 1.0, 50, 1, 2, 1.5, 2.0, 2.0, 1, 16, 0),
    (2, 1, 2.0, 200, 5, 1, 3.0, NAN, NAN, 0, 0, 0),  # still running at the end: not completed
    (3, 1, 2.5, 9000, 5, 1, NAN, NAN, NAN, 0, 0, 1),  # rejected: never scheduled
]

TIMELINE_NAMES = ("replica", "iteration", "t_s", "dt_s", "running_reqs", "num_seqs", "prefill_seqs",
                  "prefill_tokens", "decode_seqs", "waiting", "swapped", "kv_used_blocks", "kv_token_states",
                  "kv_cached_blocks", "preempted", "cow_copies")
# replica, iteration, t_s, dt_s, running_reqs, num_seqs, prefill_seqs, prefill_tokens, decode_seqs,
# waiting, swapped, kv_used_blocks, kv_token_states, kv_cached_blocks, preempted, cow_copies
TIMELINE_ROWS = [
    (0, 0, 0.0, 0.5, 1, 1, 1, 100, 0, 0, 0, 4, 12, 0, 0, 0),   # hold 1.0 (0.5 busy + 0.5 idle)
    (0, 1, 1.0, 0.5, 2, 2, 1, 50, 1, 1, 0, 8, 30, 2, 1, 1),    # hold 0.5
    (0, 2, 1.5, 0.5, 3, 3, 0, 0, 3, 0, 0, 10, 40, 0, 0, 0),    # last of replica 0: hold = dt 0.5
    (1, 0, 2.0, 1.0, 1, 1, 1, 200, 0, 2, 0, 2, 5, 0, 0, 2),    # last of replica 1: hold = dt 1.0
]

META = {
    "capacity_blocks": 10,
    "block_size": 4,
    "kv_bytes_per_token": 1000,
    "bytes_per_block": 4000,
    "weight_bytes_per_gpu": 16_000_000_000,
    "scenario": {"name": "hand", "parallelism": {"tensor_parallel_size": 1, "replicas": 2},
                 "workload": {"kind": "chat", "arrival": {"rate": 1.5}}, "simulation": {"seed": 7}},
    "kvsim_version": "0.1.0",
    "model": "llama-3-8b",
    "hardware": "h100-sxm",
    "cost_model": "roofline",
    "replicas": 2,
}


@pytest.fixture
def recorder() -> Recorder:
    rec = Recorder()
    for row in REQUEST_ROWS:
        rec.request(RequestRow(**dict(zip(REQUEST_NAMES, row, strict=True))))
    for row in TIMELINE_ROWS:
        rec.iteration(_timeline_row(dict(zip(TIMELINE_NAMES, row, strict=True))))
    return rec


def _timeline_row(values: dict) -> IterationRow:
    """An IterationRow from the named values; columns added to the recorder later default to 0."""
    return IterationRow(**{name: values.get(name, 0) for name in TIMELINE_COLUMNS})


@pytest.fixture
def frames(recorder: Recorder):
    """(requests_frame, timeline_frame) of the hand-filled recorder."""
    return recorder.requests_frame(), recorder.timeline_frame()


@pytest.fixture
def meta() -> dict:
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in META.items()}
