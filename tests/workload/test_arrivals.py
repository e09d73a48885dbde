import numpy as np
import pytest
from pydantic import ValidationError

from kvsim.errors import KvsimError
from kvsim.workload import arrivals
from kvsim.workload.arrivals import arrival_times, closed_loop_counts, require_request_cap
from kvsim.workload.config import Arrival


def _gap_stats(times: np.ndarray) -> tuple[float, float]:
    gaps = np.diff(times)
    return gaps.mean(), gaps.std() / gaps.mean()


def test_poisson_mean_rate_and_cv():
    times = arrival_times(Arrival(process="poisson", rate=5.0), np.random.default_rng(1), 20_000, None)
    assert len(times) == 20_000
    assert times[0] == 0.0
    mean, cv = _gap_stats(times)
    assert mean == pytest.approx(0.2, rel=0.03)
    assert cv == pytest.approx(1.0, rel=0.03)


def test_gamma_mean_rate_and_cv():
    times = arrival_times(Arrival(process="gamma", rate=2.0, cv=2.0), np.random.default_rng(2), 20_000, None)
    mean, cv = _gap_stats(times)
    assert mean == pytest.approx(0.5, rel=0.05)
    assert cv == pytest.approx(2.0, rel=0.06)


def test_gamma_low_cv_is_regular():
    times = arrival_times(Arrival(process="gamma", rate=4.0, cv=0.25), np.random.default_rng(3), 20_000, None)
    mean, cv = _gap_stats(times)
    assert mean == pytest.approx(0.25, rel=0.01)
    assert cv == pytest.approx(0.25, rel=0.05)


def test_fixed_gaps_exact_first_at_zero():
    times = arrival_times(Arrival(process="fixed", rate=4.0), np.random.default_rng(0), 5, None)
    assert times.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_fixed_duration_includes_endpoint():
    times = arrival_times(Arrival(process="fixed", rate=2.0), np.random.default_rng(0), None, 3.0)
    assert times.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    capped = arrival_times(Arrival(process="fixed", rate=2.0), np.random.default_rng(0), 4, 3.0)
    assert capped.tolist() == [0.0, 0.5, 1.0, 1.5]


def test_duration_only_bounds_arrivals():
    times = arrival_times(Arrival(process="poisson", rate=10.0), np.random.default_rng(4), None, 500.0)
    assert times.max() <= 500.0
    assert np.all(np.diff(times) >= 0)
    assert len(times) == pytest.approx(5000, rel=0.05)
    assert times[-1] > 499.0  # generation did not stop early


def test_duration_and_cap_take_the_smaller():
    rng = np.random.default_rng(5)
    assert len(arrival_times(Arrival(rate=10.0), rng, 50, 1000.0)) == 50
    times = arrival_times(Arrival(rate=10.0), np.random.default_rng(5), 100_000, 10.0)
    assert times.max() <= 10.0 and 50 < len(times) < 200


def test_deterministic_for_a_seed():
    a = arrival_times(Arrival(rate=3.0), np.random.default_rng(7), 100, None)
    b = arrival_times(Arrival(rate=3.0), np.random.default_rng(7), 100, None)
    assert np.array_equal(a, b)


def test_errors():
    with pytest.raises(KvsimError, match="closed_loop"):
        arrival_times(Arrival(process="closed_loop"), np.random.default_rng(0), 10, None)
    with pytest.raises(KvsimError, match="requests"):
        arrival_times(Arrival(), np.random.default_rng(0), None, None)
    with pytest.raises(KvsimError, match="closed_loop needs simulation.requests"):
        require_request_cap(None)


def test_closed_loop_counts_split_evenly():
    assert closed_loop_counts(10, 4).tolist() == [3, 3, 2, 2]
    assert closed_loop_counts(2, 4).tolist() == [1, 1, 0, 0]
    assert closed_loop_counts(8, 4).tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize("process", ["poisson", "gamma", "fixed"])
def test_arrivals_within_a_duration_are_bounded(process, monkeypatch):
    monkeypatch.setattr(arrivals, "MAX_REQUESTS", 1000)
    arrival = Arrival(process=process, rate=10.0)
    assert len(arrival_times(arrival, np.random.default_rng(0), None, 50.0)) < 1000  # about 500
    with pytest.raises(KvsimError, match=r"^simulation\.duration_s: more than 1,000 arrivals within 200 s at "
                                         r"workload\.arrival\.rate 10; set simulation\.requests"):
        arrival_times(arrival, np.random.default_rng(0), None, 200.0)  # about 2000
    assert len(arrival_times(arrival, np.random.default_rng(0), 100, 200.0)) == 100  # a cap: fine


@pytest.mark.parametrize(("cv", "needle"), [
    (float("inf"), "finite number"), (1e300, "less than or equal to 100"),
    (1e-300, "greater than or equal to 0.001"), (True, "boolean")])
def test_gamma_cv_is_bounded(cv, needle):
    """cv = inf once divided by zero (shape 1/cv^2 = 0); tiny cv made the shape overflow."""
    with pytest.raises(ValidationError, match=needle):
        Arrival(process="gamma", cv=cv)


def test_extreme_cv_still_draws_finite_gaps():
    for cv in (0.001, 100.0):
        times = arrival_times(Arrival(process="gamma", rate=1.0, cv=cv), np.random.default_rng(0), 1000, None)
        assert np.isfinite(times).all() and (np.diff(times) >= 0).all()
