import pytest
from pydantic import ValidationError

from kvsim.workload.config import ChatConfig, LengthDist, TraceConfig


def test_think_time_accepts_number_or_distribution():
    assert ChatConfig(think_time_s=0).think_time_s == 0.0
    assert isinstance(ChatConfig().think_time_s, LengthDist)
    assert ChatConfig(think_time_s={"dist": "fixed", "value": 3}).think_time_s.value == 3
    with pytest.raises(ValidationError, match="think time must be a number >= 0"):
        ChatConfig(think_time_s=-1)


def test_trace_defaults():
    cfg = TraceConfig(path="t.csv")
    assert (cfg.format, cfg.time_scale, cfg.limit, cfg.hash_block_tokens) == ("azure", 1.0, None, 512)
