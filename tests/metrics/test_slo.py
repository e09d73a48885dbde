"""kvsim/metrics/slo.py: meets_slo, the slo and goodput sections, on cases small enough to check by hand
(and kvsim/schema.py check_slo, the `slo` key's rules)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kvsim.metrics.slo import goodput_section, meets_slo, slo_section
from kvsim.schema import check_slo, stat_quantile

NAN = float("nan")


def frame() -> pd.DataFrame:
    """Five requests: r0-r2 completed, r3 completed with a one-token output (no TPOT), r4 rejected."""
    return pd.DataFrame({
        "rid": [0, 1, 2, 3, 4],
        "output_len": [10, 10, 10, 1, 10],
        "finish_s": [1.0, 2.0, 9.0, 3.0, NAN],
        "rejected": [0, 0, 0, 0, 1],
        "ttft_s": [0.1, 0.5, 3.0, 0.2, NAN],
        "tpot_s": [0.01, 0.03, 0.02, NAN, NAN],
        "e2e_s": [1.0, 2.0, 9.0, 0.2, NAN],
        "queue_s": [0.0, 0.1, 2.0, 0.0, NAN],
    })


def test_meets_slo_needs_completion_and_every_threshold():
    slo = {"ttft_s": {"p99": 1.0}, "tpot_s": {"p90": 0.025}}
    # r0 within both; r1 TPOT 0.03 > 0.025; r2 TTFT 3.0 > 1; r3 TTFT 0.2 and TPOT does not apply; r4 rejected
    assert meets_slo(frame(), slo).tolist() == [True, False, False, True, False]


def test_slo_section_percentiles_and_fractions():
    slo = {"ttft_s": {"p50": 0.4}, "tpot_s": {"p90": 0.025}}
    s = slo_section(frame(), slo)
    # TTFT over the four with one: 0.1, 0.2, 0.5, 3.0; p50 (linear) = (0.2 + 0.5) / 2 = 0.35 <= 0.4
    assert s["ttft_s"] == {"percentile": "p50", "threshold_s": 0.4, "value_s": pytest.approx(0.35),
                           "attained": True, "within_fraction": 0.5}
    # TPOT over multi-token outputs with one: 0.01, 0.02, 0.03; p90 = 0.02 + 0.8 x 0.01 = 0.028 > 0.025
    assert s["tpot_s"]["value_s"] == pytest.approx(0.028)
    assert s["tpot_s"]["attained"] is False
    assert s["tpot_s"]["within_fraction"] == pytest.approx(2 / 3)
    assert s["attained"] is False


def test_goodput_is_requests_meeting_every_slo_per_second():
    meets = np.array([True, False, False, True, False])
    assert goodput_section(meets, 8.0) == {"requests_per_s": 0.25, "requests": 2, "fraction": 0.4}
    assert goodput_section(meets, None)["requests_per_s"] is None
    assert goodput_section(np.array([], bool), None) == {"requests_per_s": None, "requests": 0,
                                                         "fraction": None}


def test_no_value_when_no_request_has_the_metric():
    df = frame().iloc[[3, 4]]  # the one-token output and the rejected one: no TPOT at all
    s = slo_section(df, {"tpot_s": {"p99": 0.05}})
    assert s["tpot_s"]["value_s"] is None and s["tpot_s"]["attained"] is False
    assert s["tpot_s"]["within_fraction"] is None


@pytest.mark.parametrize("stat, q", [("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9), ("p100", 100.0)])
def test_stat_quantile(stat, q):
    assert stat_quantile(stat) == q


@pytest.mark.parametrize("slo, needle", [
    ({}, "must map a metric"),
    ({"ttfx": {"p99": 2}}, "unknown metric 'ttfx'"),
    ({"ttft_s": {"p99": 2, "p50": 1}}, "one percentile"),
    ({"ttft_s": 2}, "one percentile"),
    ({"ttft_s": {"q99": 2}}, "'q99' is not a percentile"),
    ({"ttft_s": {"p0": 2}}, "'p0' is not a percentile"),
    ({"ttft_s": {"p101": 2}}, "'p101' is not a percentile"),
    ({"ttft_s": {"p99": 0}}, "must be a number of seconds"),
    ({"ttft_s": {"p99": math.inf}}, "must be a number of seconds"),
    ({"ttft_s": {"p99": True}}, "must be a number of seconds"),
    ({"ttft_s": {"p99": 2e9}}, "must be a number of seconds in \\(0, 1e\\+09\\]"),
])
def test_check_slo_says_what_is_wrong(slo, needle):
    with pytest.raises(ValueError, match=needle):
        check_slo(slo)


def test_check_slo_reads_numbers_yaml_left_as_text():
    assert check_slo({"e2e_s": {"p50": "1e3"}}) == {"e2e_s": {"p50": 1000.0}}


def test_no_completed_request_attains_no_objective():
    # every request refused: no TTFT / E2E measured, so no objective is reported as attained
    df = pd.DataFrame({"ttft_s": [np.nan, np.nan], "tpot_s": [np.nan, np.nan], "e2e_s": [np.nan, np.nan],
                       "output_len": [4, 4], "finish_s": [np.nan, np.nan], "rejected": [1, 1]})
    slo = check_slo({"ttft_s": {"p99": 1e9}, "e2e_s": {"p50": 1e9}})
    section = slo_section(df, slo)
    assert section["attained"] is False
    assert section["ttft_s"]["value_s"] is None and section["ttft_s"]["within_fraction"] is None
    goodput = goodput_section(meets_slo(df, slo), None)
    assert goodput == {"requests_per_s": None, "requests": 0, "fraction": 0.0}
