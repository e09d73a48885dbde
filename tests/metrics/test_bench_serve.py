"""summary.json's bench_serve section (kvsim/metrics/bench_serve.py) on a case worked out by hand, with
vLLM's definitions (vllm/benchmarks/serve.py calculate_metrics).

One replica; requests A (prompt 4, output 3) and B (prompt 2, output 2) sent at 0, C (prompt 5, output 1)
due at 0 but sent at 0.13 (client wait 0.13), D refused at 0:
  iteration 0: t 0.00, dt 0.10, prefill A and B       -> first tokens of A, B at 0.10
  iteration 1: t 0.10, dt 0.02, decode A, B (2 seqs)  -> A's 2nd, B's 2nd (last) token at 0.12
  iteration 2: t 0.12, dt 0.01, decode A (1 seq)      -> A's 3rd (last) token at 0.13
  iteration 3: t 0.13, dt 0.05, prefill C             -> C's only token at 0.18
TTFT A, B, C = 0.10, 0.10, 0.05; E2EL = 0.13, 0.12, 0.05; TPOT A = 0.03 / 2 = 0.015, B = 0.02 / 1 = 0.02
(C has one token: no TPOT); inter-token gaps A 0.02, 0.01, B 0.02.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvsim.engine.client_gate import CLIENT_COLUMNS
from kvsim.metrics.bench_serve import (
    bench_serve_rows,
    bench_serve_section,
    peak_concurrency,
    token_gaps,
    weighted_percentile,
)
from kvsim.metrics.recorder import IterationRow, Recorder, RequestRow

NAN = math.nan


def iteration(i, t, dt, prefill, decode):
    return IterationRow(replica=0, iteration=i, t_s=t, dt_s=dt, running_reqs=prefill + decode,
                        num_seqs=prefill + decode, prefill_seqs=prefill, prefill_tokens=prefill,
                        decode_seqs=decode, waiting=0, swapped=0, kv_used_blocks=1, kv_token_states=1,
                        kv_cached_blocks=0, preempted=0, cow_copies=0, kv_reservation=0, kv_internal_frag=0,
                        kv_external_frag=0, kv_free=0, kv_unshared_blocks=1)


def frames(iterations):
    rec = Recorder()
    rec.add_request_columns(CLIENT_COLUMNS)
    rows = [  # rid, arrival (send), prompt, output, first token, finish, client wait
        (0, 0.0, 4, 3, 0.10, 0.13, 0.0),
        (1, 0.0, 2, 2, 0.10, 0.12, 0.0),
        (2, 0.13, 5, 1, 0.18, 0.18, 0.13),
    ]
    for rid, arr, p, o, ft, fin, wait in rows:
        rec.request(RequestRow(rid=rid, replica=0, arrival_s=arr, prompt_len=p, output_len=o, n=1,
                               first_scheduled_s=arr, first_token_s=ft, finish_s=fin, preemptions=0,
                               cached_tokens=0, rejected=0), (wait,))
    rec.request(RequestRow.refused(3, 0, 0.0, 9000, 5, 1), (NAN,))
    for row in iterations:
        rec.iteration(iteration(*row))
    return rec.take_frames()


ITERATIONS = [(0, 0.0, 0.10, 2, 0), (1, 0.10, 0.02, 0, 2), (2, 0.12, 0.01, 0, 1), (3, 0.13, 0.05, 1, 0)]
CFG = {"max_concurrency": 2, "request_rate": "inf", "metric_percentiles": [99.0, 50.0]}


@pytest.fixture(scope="module")
def section():
    requests, timeline = frames(ITERATIONS)
    return bench_serve_section(requests, timeline, CFG)


def test_counts_duration_and_throughput(section):
    assert (section["completed"], section["failed"]) == (3, 1)
    assert section["duration_s"] == pytest.approx(0.18)  # the last response ends at 0.18
    assert (section["total_input_tokens"], section["total_output_tokens"]) == (11, 6)
    assert section["request_throughput"] == pytest.approx(3 / 0.18)
    assert section["output_throughput"] == pytest.approx(6 / 0.18)
    assert section["total_token_throughput"] == pytest.approx(17 / 0.18)


def test_ttft(section):
    # [0.05, 0.10, 0.10]: mean 0.08333; median 0.10; population std sqrt(((2 x 0.01667^2) + 0.03333^2) / 3)
    assert section["mean_ttft_ms"] == pytest.approx(250 / 3)
    assert section["median_ttft_ms"] == pytest.approx(100)
    assert section["std_ttft_ms"] == pytest.approx(1000 * math.sqrt(0.0016666666 / 3), rel=1e-6)
    assert section["p99_ttft_ms"] == pytest.approx(100)  # h = 2 x 0.99: 0.10 + 0.98 x 0
    assert section["p50_ttft_ms"] == pytest.approx(100)


def test_tpot_skips_single_token_requests(section):
    # A 0.015, B 0.02; p99: 15 + 0.99 x 5
    assert section["mean_tpot_ms"] == pytest.approx(17.5)
    assert section["median_tpot_ms"] == pytest.approx(17.5)
    assert section["p99_tpot_ms"] == pytest.approx(19.95)


def test_itl_from_the_timeline(section):
    # gaps [0.01, 0.02, 0.02]: mean 0.05 / 3, median 0.02, p99 0.02, std sqrt((0.00667^2 + 2 x 0.00333^2) / 3)
    assert section["itl_exact"] is True
    assert section["mean_itl_ms"] == pytest.approx(50 / 3)
    assert section["median_itl_ms"] == pytest.approx(20)
    assert section["p99_itl_ms"] == pytest.approx(20)
    assert section["p50_itl_ms"] == pytest.approx(20)
    assert section["std_itl_ms"] == pytest.approx(1000 * math.sqrt(6.6666667e-5 / 3), rel=1e-6)


def test_e2el_and_client_queue(section):
    # E2EL [0.05, 0.12, 0.13]: mean 0.10, median 0.12, p99 0.12 + 0.98 x 0.01
    assert section["mean_e2el_ms"] == pytest.approx(100)
    assert section["median_e2el_ms"] == pytest.approx(120)
    assert section["p99_e2el_ms"] == pytest.approx(129.8)
    # client wait [0, 0, 0.13]: mean 0.04333, median 0, p99 0 + 0.98 x 0.13
    assert section["mean_client_queue_time_ms"] == pytest.approx(130 / 3)
    assert section["median_client_queue_time_ms"] == pytest.approx(0)
    assert section["p99_client_queue_time_ms"] == pytest.approx(127.4)


def test_peaks(section):
    # [0, 0.13), [0, 0.12), [0.13, 0.18): two at once; A's end at 0.13 comes before C's start
    assert section["max_concurrent_requests"] == 2
    # every one of the 6 tokens falls in second 0 (from the first send at 0)
    assert section["max_output_tokens_per_s"] == 6


def test_a_pause_between_tokens_leaves_only_the_exact_mean():
    """A prefill-only iteration (t 0.12, dt 0.05) pauses A: its 3rd token comes at 0.18, 0.06 after its 2nd,
    but the timeline's gap for it is 0.01: the gaps no longer add up, so median / p99 are None."""
    requests, timeline = frames([(0, 0.0, 0.10, 2, 0), (1, 0.10, 0.02, 0, 2), (2, 0.12, 0.05, 1, 0),
                                 (3, 0.17, 0.01, 0, 1)])
    requests.loc[0, "finish_s"] = 0.18
    requests["e2e_s"] = requests["finish_s"] - requests["arrival_s"]
    s = bench_serve_section(requests, timeline, CFG)
    assert s["itl_exact"] is False
    assert s["mean_itl_ms"] == pytest.approx((0.08 + 0.02) / 3 * 1000)
    assert s["median_itl_ms"] is None and s["p99_itl_ms"] is None and s["max_output_tokens_per_s"] is None


def test_token_gaps_and_weighted_percentile():
    _, timeline = frames(ITERATIONS)
    gaps, counts = token_gaps(timeline)
    assert gaps == pytest.approx([0.02, 0.01]) and counts.tolist() == [2, 1]
    rng = np.random.default_rng(0)
    v, c = rng.random(7), rng.integers(1, 5, size=7)
    for p in (0, 1, 50, 99, 99.9, 100):
        assert weighted_percentile(v, c, p) == pytest.approx(np.percentile(np.repeat(v, c), p), rel=1e-12)


def test_peak_concurrency_half_open():
    assert peak_concurrency(np.array([0.0, 1.0]), np.array([1.0, 2.0])) == 1
    assert peak_concurrency(np.array([0.0, 0.5, 0.5]), np.array([1.0, 2.0, 2.0])) == 3
    assert peak_concurrency(np.zeros(0), np.zeros(0)) == 0


def test_rows_use_vllms_labels(section):
    rows = dict(bench_serve_rows(section))
    assert rows["Successful requests:"] == "3" and rows["Failed requests:"] == "1"
    assert rows["Maximum request concurrency:"] == "2"
    assert "Request rate configured (RPS):" not in rows  # rate inf, as vLLM
    assert rows["Benchmark duration (s):"] == "0.18"
    assert rows["Mean TTFT (ms):"] == "83.33" and rows["P99 TTFT (ms):"] == "100.00"
    assert rows["P50 ITL (ms):"] == "20.00" and rows["Median E2EL (ms):"] == "120.00"
    assert bench_serve_rows(None) == []


def test_a_hand_off_between_replicas_is_not_exact():
    """With disaggregated prefill / decode a request's first gap spans two replicas' clocks: no ITL
    percentiles, whatever the sums say."""
    requests, timeline = frames(ITERATIONS)
    requests["prefill_replica"] = [1, 1, -1, -1]
    s = bench_serve_section(requests, timeline, CFG)
    assert s["itl_exact"] is False and s["p99_itl_ms"] is None
    assert s["mean_itl_ms"] == pytest.approx(50 / 3)
