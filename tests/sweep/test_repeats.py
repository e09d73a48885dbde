"""kvsim/sweep/repeats.py: t quantiles, intervals by hand, seeds, and `kvsim run --repeats`."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.errors import KvsimError
from kvsim.sweep.repeats import interval, repeats_section, run_repeats, seeds, t975


@pytest.mark.parametrize("df, t", [(1, 12.706), (4, 2.776), (30, 2.042), (60, 2.000), (120, 1.980)])
def test_t975_table(df, t):
    assert t975(df) == t


def test_t975_between_points_and_beyond():
    assert 2.000 > t975(80) > 1.980  # linear in 1/df between 60 and 120
    assert t975(80) == pytest.approx(1.980 + 0.020 * (1 / 80 - 1 / 120) / (1 / 60 - 1 / 120))
    assert t975(10**9) == pytest.approx(1.960, abs=1e-6)
    with pytest.raises(ValueError):
        t975(0)


def test_interval_by_hand():
    # 1, 2, 3, 4: mean 2.5, s = sqrt(5/3), half-width t(3) s / 2 = 3.182 x 1.29099 / 2 = 2.05397
    got = interval([1, 2, 3, 4])
    assert got["mean"] == 2.5 and got["n"] == 4
    assert got["half_width"] == pytest.approx(3.182 * math.sqrt(5 / 3) / 2)
    assert got["low"] == pytest.approx(2.5 - got["half_width"])
    assert got["high"] == pytest.approx(2.5 + got["half_width"])
    assert interval([7.0]) == {"mean": 7.0, "low": 7.0, "high": 7.0, "half_width": None, "n": 1}
    assert interval([None, float("nan")])["mean"] is None
    assert interval([2.0, None, 2.0])["half_width"] == 0.0


def test_seeds():
    assert seeds(5, 3) == [5, 6, 7]
    with pytest.raises(KvsimError, match="2\\^63"):
        seeds(2**63 - 2, 3)
    with pytest.raises(KvsimError, match="1 to 1000"):
        seeds(0, 0)


def test_repeats_section_keys_and_values():
    summaries = [{"throughput": {"requests_per_s": v}, "slo": {"ttft_s": {"value_s": v / 10}}}
                 for v in (1.0, 3.0)]
    rep = repeats_section(summaries, [0, 1])
    assert rep["seeds"] == [0, 1] and rep["confidence"] == 0.95
    assert set(rep["figures"]) == {"throughput.requests_per_s", "slo.ttft_s.value_s"}
    f = rep["figures"]["throughput.requests_per_s"]
    assert f["values"] == [1.0, 3.0] and f["mean"] == 2.0
    assert f["half_width"] == pytest.approx(12.706 * math.sqrt(2.0) / math.sqrt(2))


def test_parallel_repeats_equal_serial():
    over = ["simulation.requests=20"]
    assert run_repeats(None, over, [3, 4], jobs=2) == run_repeats(None, over, [3, 4], jobs=1)


def test_run_repeats_writes_repeats_json(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["run", "--set", "simulation.requests=30", "--seed", "2", "--repeats", "3",
                                   "--slo", "ttft_s.p99=1", "--no-plots", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "repeats.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert rep["seeds"] == [2, 3, 4]
    ttft = rep["figures"]["latency.ttft_s.p99"]
    assert ttft["values"][0] == summary["latency"]["ttft_s"]["p99"]  # the first seed is the run written
    assert len(set(ttft["values"])) == 3  # three different request streams
    assert ttft["low"] <= ttft["mean"] <= ttft["high"]
    assert "slo.ttft_s.value_s" in rep["figures"]
    assert "3 seeds (2..4): mean and 95% interval" in res.stdout
