import math

import numpy as np
import pytest

from kvsim.metrics.stats import percentiles, plain, time_weighted_mean, time_weighted_quantile


def test_time_weighted_mean_by_hand():
    # (1*1 + 2*1 + 3*2) / (1 + 1 + 2) = 9 / 4
    assert time_weighted_mean([1, 2, 3], [1, 1, 2]) == 2.25


def test_time_weighted_mean_ignores_nan_and_empty():
    # the NaN value and its weight are dropped: (1*1 + 3*3) / 4 = 2.5
    assert time_weighted_mean([1, math.nan, 3], [1, 5, 3]) == 2.5
    assert time_weighted_mean([], []) is None
    assert time_weighted_mean([4.0], [0.0]) is None


@pytest.mark.parametrize(("q", "expected"), [
    (0.0, 1.0),    # smallest value with positive weight
    (0.25, 1.0),   # F(1) = 1/4
    (0.3, 2.0),
    (0.5, 2.0),    # F(2) = 2/4 = 0.5 exactly
    (0.9, 3.0),    # F(3) = 1
    (1.0, 3.0),
])
def test_time_weighted_quantile_by_hand(q, expected):
    assert time_weighted_quantile([3, 1, 2], [2, 1, 1], q) == expected


def test_time_weighted_quantile_edge_cases():
    assert time_weighted_quantile([5, 1], [0, 1], 0.0) == 1.0  # zero-weight value never chosen
    assert time_weighted_quantile([1, math.nan], [1, 1], 0.9) == 1.0
    assert time_weighted_quantile([], [], 0.5) is None
    # F(2) = 0.6 / 0.8 = 0.75 on paper, but in floating point 0.75 * 0.8 lands one ulp above 0.1 + 0.5
    assert time_weighted_quantile([1, 2, 3], [0.1, 0.5, 0.2], 0.75) == 2.0
    with pytest.raises(ValueError):
        time_weighted_quantile([1], [1], 1.5)
    with pytest.raises(ValueError):
        time_weighted_quantile([1], [-1], 0.5)
    with pytest.raises(ValueError):
        time_weighted_mean([1, 2], [1])


def test_percentiles_linear_interpolation_by_hand():
    # [1, 2, 3, 4]: p90 at rank 0.9 * 3 = 2.7 -> 3 + 0.7 * (4 - 3) = 3.7; p99 at rank 2.97 -> 3.97
    got = percentiles([4.0, math.nan, 1.0, 3.0, 2.0])
    assert list(got) == ["mean", "p50", "p90", "p99"]
    assert got["mean"] == 2.5
    assert got["p50"] == 2.5
    assert got["p90"] == pytest.approx(3.7)
    assert got["p99"] == pytest.approx(3.97)
    assert all(type(v) is float for v in got.values())


def test_percentiles_empty():
    assert percentiles([]) == {"mean": None, "p50": None, "p90": None, "p99": None}
    assert percentiles([math.nan]) == {"mean": None, "p50": None, "p90": None, "p99": None}


def test_plain():
    assert type(plain(np.int64(3))) is int
    assert type(plain(np.float32(0.5))) is float
    assert plain(np.float64("nan")) is None
    assert plain(math.inf) is None
    assert plain(np.bool_(True)) is True
    assert plain("x") == "x"
    assert plain(None) is None


def test_weighted_sum_does_not_depend_on_blas_threads():
    """Pairwise summation of the product: the same bits whatever OpenBLAS's thread count (np.dot's are not
    always); here it equals math.fsum's correctly rounded result on values exact in binary."""
    import math

    from kvsim.metrics.stats import weighted_sum

    v = np.arange(1, 100_001, dtype=np.float64)
    w = np.full(v.size, 0.5)
    assert weighted_sum(v, w) == math.fsum(v * w) == 0.5 * 100_000 * 100_001 / 2


def test_no_blas_reductions_in_the_summary_code():
    """np.dot / matmul results can depend on the BLAS thread count: summary figures use weighted_sum."""
    from pathlib import Path

    root = Path(__file__).parents[2] / "kvsim"
    for path in [*root.glob("metrics/*.py"), *root.glob("sweep/*.py")]:
        text = path.read_text()
        assert "np.dot(" not in text and "np.matmul(" not in text and " @ " not in text, path.name
