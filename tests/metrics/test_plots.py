import time

import numpy as np
import pandas as pd
import pytest

from kvsim.metrics.plots import PLOT_FILES, cdf_points, replica_mean_curve, step_bin_means, write_plots
from kvsim.metrics.recorder import TIMELINE_COLUMNS, Recorder
from kvsim.metrics.summary import build_summary


def test_step_bin_means_by_hand():
    # value 2 on [0, 1), 4 on [1, 2), nothing after 2
    got = step_bin_means(np.array([0.0, 1.0]), np.array([1.0, 1.0]), np.array([2.0, 4.0]),
                         np.array([0.0, 0.5, 1.5, 2.0, 3.0]))
    # [0, 0.5): 2; [0.5, 1.5): (2*0.5 + 4*0.5) / 1 = 3; [1.5, 2): 4; [2, 3): 0
    assert got.tolist() == [2.0, 3.0, 4.0, 0.0]


def test_replica_mean_curve_averages_replicas():
    tl = pd.DataFrame({"replica": [0, 1], "t_s": [0.0, 0.0], "hold_s": [2.0, 1.0]})
    x, y = replica_mean_curve(tl, pd.Series([4.0, 2.0]), bins=2)
    # bin [0, 1): (4 + 2) / 2 = 3; bin [1, 2): (4 + 0) / 2 = 2
    assert x.tolist() == [0.5, 1.5]
    assert y.tolist() == [3.0, 2.0]


def test_cdf_points():
    x, y = cdf_points(pd.Series([3.0, np.nan, 1.0, 2.0]))
    assert x.tolist() == [1.0, 2.0, 3.0]
    assert y.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    x, y = cdf_points(pd.Series(np.arange(10_000, dtype=float)), points=11)
    assert len(x) == 11 and x[0] == 0.0 and x[-1] == 9999.0 and y[5] == 0.5


def test_write_plots_deterministic(tmp_path, frames, meta):
    requests, timeline = frames
    summary = build_summary(requests, timeline, meta)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert write_plots(tmp_path / "a", summary, requests, timeline) == list(PLOT_FILES)
    write_plots(tmp_path / "b", summary, requests, timeline.drop(columns="hold_s"))
    for name in PLOT_FILES:
        data = (tmp_path / "a" / name).read_bytes()
        assert data.startswith(b"\x89PNG")
        assert b"Software" not in data
        assert data == (tmp_path / "b" / name).read_bytes()


def test_write_plots_empty_run(tmp_path):
    rec = Recorder()
    requests, timeline = rec.requests_frame(), rec.timeline_frame()
    write_plots(tmp_path, build_summary(requests, timeline, {}), requests, timeline)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PLOT_FILES)


def test_write_plots_fast_on_100k_rows(tmp_path):
    n = 100_000
    rng = np.random.default_rng(0)
    cols = {k: np.zeros(n, dtype=np.float64 if t == "d" else np.int64) for k, t in TIMELINE_COLUMNS.items()}
    cols["replica"] = np.arange(n) % 4
    cols["t_s"] = np.repeat(np.arange(n // 4) * 0.02, 4)
    cols["dt_s"] = np.full(n, 0.02)
    cols["running_reqs"] = rng.integers(0, 200, n)
    cols["kv_used_blocks"] = rng.integers(0, 1000, n)
    cols["kv_token_states"] = cols["kv_used_blocks"] * 12
    timeline = pd.DataFrame(cols)
    requests = pd.DataFrame({"ttft_s": rng.random(20_000), "tpot_s": rng.random(20_000),
                             "e2e_s": rng.random(20_000)})
    summary = {"kv": {"capacity_tokens": 16_000, "capacity_blocks": 1000}}
    start = time.perf_counter()
    write_plots(tmp_path, summary, requests, timeline)
    assert time.perf_counter() - start < 10.0
