import pytest
from pydantic import ValidationError

from kvsim.workload.config import ChatConfig, LengthDist, TraceConfig


def test_think_time_accepts_number_or_distribution():
    assert ChatConfig(think_time_s=0).think_time_s == 0.0
    assert isinstance(ChatConfig().think_time_s, LengthDist)
    assert ChatConfig(think_time_s={"dist": "fixed", "value": 3}).think_time_s.value == 3
    with pytest.raises(ValidationError, match=r"think time must be a number of seconds in \[0, 1e\+09\]"):
        ChatConfig(think_time_s=-1)


def test_trace_defaults():
    cfg = TraceConfig(path="t.csv")
    assert (cfg.format, cfg.time_scale, cfg.limit, cfg.hash_block_tokens) == ("azure", 1.0, None, 512)


@pytest.mark.parametrize(("dist", "needle"), [
    ({"dist": "lognormal", "mean": 1000, "p50": 1e-320}, r"lognormal p50 9\.99989e-321 is too far below mean "
                                                         r"1000 \(the implied sigma"),
    ({"dist": "lognormal", "mean": 1000, "sigma": 1e200}, "sigma\n.*less than or equal to 10"),
    ({"dist": "uniform", "low": 1, "high": 10**20}, "high\n.*less than or equal to 1000000000"),
    ({"dist": "fixed", "value": True}, "value\n.*boolean"),
    ({"dist": "lognormal", "mean": float("nan"), "sigma": 1}, "mean\n.*finite number"),
])
def test_length_dist_bounds(dist, needle):
    with pytest.raises(ValidationError, match=needle):
        LengthDist.model_validate(dist)


def test_lognormal_at_the_sigma_bound_is_accepted():
    # sigma = sqrt(2 ln(mean / p50)) = 10 when ln(mean / p50) = 50
    import math
    assert LengthDist(dist="lognormal", mean=1e9, p50=1e9 / math.exp(49.9)).p50 > 0


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, True, 1e10])
def test_think_time_number_is_finite_and_bounded(value):
    with pytest.raises(ValidationError, match="think time must be a number of seconds"):
        ChatConfig(think_time_s=value)


def test_trace_path_and_column_names_are_bounded():
    with pytest.raises(ValidationError, match="at most 4096 characters"):
        TraceConfig(path="x" * 5000)
    with pytest.raises(ValidationError, match="at most 1000 characters"):
        TraceConfig(path="t.csv", columns={"arrival": "c" * 1001})


def test_length_pairs_only_for_synthetic_and_not_with_lengths():
    from kvsim.workload.config import WorkloadConfig

    assert WorkloadConfig(length_pairs={"path": "x.csv"}).length_pairs.prompt_column == "prompt"
    with pytest.raises(ValueError, match="'length_pairs' is for kind 'synthetic'"):
        WorkloadConfig(kind="chat", length_pairs={"path": "x.csv"})
    with pytest.raises(ValueError, match="either 'length_pairs' or 'output_len'"):
        WorkloadConfig(length_pairs={"path": "x.csv"}, output_len={"dist": "fixed", "value": 3})


def test_a_section_of_another_kind_is_refused_not_ignored():
    from kvsim.errors import KvsimError
    from kvsim.scenario import build_scenario

    with pytest.raises(KvsimError, match="workload: 'trace' is for kind 'trace', this workload is kind 'ch"):
        build_scenario({"workload": {"kind": "chat", "trace": {"path": "x.csv"}}})
    with pytest.raises(KvsimError, match="workload: 'mix' is for kind 'mix', this workload is kind 'rag'"):
        build_scenario({"workload": {"kind": "rag", "mix": [{"kind": "chat"}]}})
