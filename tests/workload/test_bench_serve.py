"""kind: bench_serve (kvsim/workload/bench_serve.py): vLLM's random-dataset intervals, ShareGPT rows, the
client's send schedule, the shared prefix, and the stream's bounds."""

from __future__ import annotations

import numpy as np
import pytest

from kvsim.workload.bench_serve import PREFIX_ID, REST_BASE, bench_serve_table, send_times
from kvsim.workload.bench_serve_config import BenchServeConfig
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.factory import build_request_stream, build_requests


def table(max_requests=2000, duration_s=None, scenario_seed=0, **bench):
    cfg = WorkloadConfig(kind="bench_serve", bench_serve=bench)
    return bench_serve_table(cfg, np.random.default_rng(scenario_seed), max_requests, duration_s)


def test_random_intervals_floor_low_ceil_high():
    # 1024 x 0.9 = 921.6 -> 921, 1024 x 1.1 = 1126.4 -> 1127; 128 x (1 -+ 0.5) = 64, 192
    b = BenchServeConfig(random_input_len=1024, random_output_len=128, random_range_ratio=0.1)
    assert b.input_interval() == (921, 1127)
    b = BenchServeConfig(random_output_len=128, random_range_ratio=0.5)
    assert b.output_interval() == (64, 192)
    # one special token: the interval is around 1023 (920.7 -> 920, 1125.3 -> 1126)
    b = BenchServeConfig(random_input_len=1024, random_range_ratio=0.1, num_special_tokens=1)
    assert b.input_interval() == (920, 1126)
    # output low floor(0.1) = 0 is raised to 1; ceil(1.9) = 2
    assert BenchServeConfig(random_output_len=1, random_range_ratio=0.9).output_interval() == (1, 2)
    assert BenchServeConfig().input_interval() == (1024, 1024)


def test_random_draws_cover_both_ends_and_add_prefix_and_special_tokens():
    t = table(num_prompts=400, random_input_len=10, random_output_len=10, random_range_ratio=0.1,
              random_prefix_len=5, num_special_tokens=1)
    # sampled input in [floor(9 x 0.9), ceil(9 x 1.1)] = [8, 10], plus 5 + 1; output in [9, 11]
    assert set(t.prompt_len.tolist()) == {14, 15, 16}
    assert set(t.output_len.tolist()) == {9, 10, 11}


def test_seed_gives_vllms_integers():
    t = table(num_prompts=6, random_input_len=1000, random_output_len=100, random_range_ratio=0.5,
              scenario_seed=7, seed=3)
    want = np.random.default_rng(3)
    assert t.prompt_len.tolist() == want.integers(500, 1501, size=6).tolist()
    assert t.output_len.tolist() == want.integers(50, 151, size=6).tolist()
    # without the key, the scenario's stream draws them
    a = table(num_prompts=6, random_range_ratio=0.5, scenario_seed=7)
    b = table(num_prompts=6, random_range_ratio=0.5, scenario_seed=7)
    assert a.prompt_len.tolist() == b.prompt_len.tolist() and a == b


def test_rate_inf_sends_everything_at_zero():
    assert send_times(BenchServeConfig(), np.random.default_rng(0), 4).tolist() == [0.0] * 4


def test_constant_gaps_rescaled_and_legacy():
    b = BenchServeConfig(request_rate=2, burstiness="inf")
    assert send_times(b, np.random.default_rng(0), 4).tolist() == [0.5, 1.0, 1.5, 2.0]
    b = BenchServeConfig(request_rate=2, burstiness="inf", rate_schedule="legacy")
    assert send_times(b, np.random.default_rng(0), 4).tolist() == [0.0, 0.5, 1.0, 1.5]


def test_gamma_gaps_rescaled_to_end_at_n_over_rate():
    b = BenchServeConfig(request_rate=4, burstiness=0.5)
    got = send_times(b, np.random.default_rng(1), 5)
    gaps = np.random.default_rng(1).gamma(0.5, 1.0 / (4 * 0.5), size=5)
    cum = np.cumsum(gaps)
    assert got == pytest.approx(cum * (5 / 4) / cum[-1], rel=1e-12)
    assert got[-1] == pytest.approx(1.25, rel=1e-12) and (np.diff(got) >= 0).all()
    legacy = send_times(BenchServeConfig(request_rate=4, burstiness=0.5, rate_schedule="legacy"),
                        np.random.default_rng(1), 5)
    assert legacy.tolist() == pytest.approx([0.0, *cum[:4]], rel=1e-12)


def test_gamma_gap_mean_and_burstiness():
    n = 20000
    poisson = np.diff(send_times(BenchServeConfig(request_rate=10), np.random.default_rng(0), n))
    bursty = np.diff(send_times(BenchServeConfig(request_rate=10, burstiness=0.25),
                                np.random.default_rng(0), n))
    assert poisson.mean() == pytest.approx(0.1, rel=0.01) and bursty.mean() == pytest.approx(0.1, rel=0.01)
    # coefficient of variation 1 / sqrt(shape): 1 for Poisson, 2 at burstiness 0.25
    assert poisson.std() / poisson.mean() == pytest.approx(1.0, rel=0.05)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.05)


def test_shared_prefix_segments():
    t = table(num_prompts=3, random_input_len=20, random_prefix_len=8, num_special_tokens=1)
    assert t.prompt_len.tolist() == [8 + 1 + 19] * 3
    assert [r.segments for r in t] == [((PREFIX_ID, 9), (REST_BASE + i, 19)) for i in range(3)]
    assert table(num_prompts=2)[0].segments == ()


def write_pairs(tmp_path, rows):
    path = tmp_path / "pairs.csv"
    path.write_text("prompt,output\n" + "".join(f"{p},{o}\n" for p, o in rows), encoding="utf-8")
    return str(path)


def test_sharegpt_rows_without_replacement_then_oversampled(tmp_path):
    path = write_pairs(tmp_path, [(10, 100), (20, 200), (30, 300)])
    t = table(num_prompts=3, dataset="sharegpt", dataset_path=path)
    rows = zip(t.prompt_len.tolist(), t.output_len.tolist(), strict=True)
    assert sorted(rows) == [(10, 100), (20, 200), (30, 300)]
    t = table(num_prompts=5, dataset="sharegpt", dataset_path=path)
    pairs = list(zip(t.prompt_len.tolist(), t.output_len.tolist(), strict=True))
    assert sorted(pairs[:3]) == [(10, 100), (20, 200), (30, 300)]
    assert set(pairs[3:]) <= set(pairs[:3])
    t = table(num_prompts=3, dataset="sharegpt", dataset_path=path, sharegpt_output_len=7)
    assert sorted(t.prompt_len.tolist()) == [10, 20, 30] and t.output_len.tolist() == [7, 7, 7]


def test_duration_and_request_cap_keep_the_first_sends_of_the_schedule():
    t = table(duration_s=1.0, num_prompts=4, request_rate=2, burstiness="inf")
    assert t.arrival_s.tolist() == [0.5, 1.0]
    t = table(max_requests=3, num_prompts=5, request_rate=2, burstiness="inf")
    assert t.arrival_s.tolist() == [0.5, 1.0, 1.5]  # the five-request schedule, cut to its first three


def test_list_and_table_agree():
    cfg = WorkloadConfig(kind="bench_serve", bench_serve={"num_prompts": 5, "random_range_ratio": 0.3,
                                                          "request_rate": 3})
    a = build_requests(cfg, np.random.default_rng(2), 100, None)
    b = build_request_stream(cfg, np.random.default_rng(2), 100, None)
    assert a == list(b) and [r.rid for r in a] == list(range(5)) and all(r.after == -1 for r in a)


@pytest.mark.parametrize(("bench", "message"), [
    ({"burstiness": 0.5}, "needs a finite request_rate"),
    ({"dataset": "sharegpt"}, "needs 'dataset_path'"),
    ({"dataset": "sharegpt", "dataset_path": "x.csv", "random_input_len": 5}, "'random_input_len' is for"),
    ({"dataset_path": "x.csv"}, "'dataset_path' is for dataset 'sharegpt'"),
    ({"request_rate": float("inf")}, "the word inf or a number"),
    ({"request_rate": 0}, "the word inf or a number"),
    ({"request_rate": "fast"}, "the word inf or a number"),
    ({"random_range_ratio": 1.0}, "less than 1"),
    ({"random_input_len": 1, "random_range_ratio": 0.5}, "can draw empty prompts"),
    ({"max_concurrency": 0}, "greater than or equal to 1"),
    ({"metric_percentiles": [101]}, "less than or equal to 100"),
])
def test_bad_bench_serve_keys(bench, message):
    with pytest.raises(ValueError, match=message):
        WorkloadConfig(kind="bench_serve", bench_serve=bench)


def test_keys_bench_serve_does_not_read():
    with pytest.raises(ValueError, match="not 'arrival'"):
        WorkloadConfig(kind="bench_serve", arrival={"rate": 3})
    with pytest.raises(ValueError, match="not 'output_len'"):
        WorkloadConfig(kind="bench_serve", output_len={"dist": "fixed", "value": 3})
    with pytest.raises(ValueError, match="'bench_serve' is for kind 'bench_serve'"):
        WorkloadConfig(kind="synthetic", bench_serve={})
    with pytest.raises(ValueError, match="cannot be a bench_serve client"):
        WorkloadConfig(kind="mix", mix=[{"kind": "bench_serve"}])


def test_inf_word_and_defaults():
    b = WorkloadConfig(kind="bench_serve").bench_serve
    assert (b.request_rate, b.burstiness, b.num_prompts, b.random_input_len, b.random_output_len) == (
        "inf", 1.0, 1000, 1024, 128)
    assert BenchServeConfig(request_rate="INF").request_rate == "inf"
    assert WorkloadConfig(kind="bench_serve", bench_serve={"max_concurrency": 4}).client_concurrency() == 4
    assert WorkloadConfig(kind="synthetic").client_concurrency() is None
