from pathlib import Path

import numpy as np
import pytest

from kvsim.errors import KvsimError
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.trace import MOONCAKE_ID_BASE, trace_requests

DATA = Path(__file__).resolve().parents[1] / "data"
AZURE = DATA / "azure_conv_head200.csv"
MOONCAKE = DATA / "mooncake_conv_head50.jsonl"


def _read(max_requests=None, duration=None, **trace):
    cfg = WorkloadConfig(kind="trace", trace=trace)
    return trace_requests(cfg, np.random.default_rng(0), max_requests, duration)


def test_azure_excerpt():
    reqs = _read(path=str(AZURE))
    assert len(reqs) == 200
    # first rows: 18:15:46.6805900,374,44 / 18:15:50.9951690,396,109 / 18:15:51.2224670,879,55
    assert [(r.prompt_len, r.output_len) for r in reqs[:3]] == [(374, 44), (396, 109), (879, 55)]
    assert [r.arrival_s for r in reqs[:3]] == pytest.approx([0.0, 4.314579, 4.541877], abs=1e-9)
    # last row: 18:16:47.9441270,1143,409
    assert reqs[-1].arrival_s == pytest.approx(61.263537, abs=1e-9)
    assert (reqs[-1].prompt_len, reqs[-1].output_len) == (1143, 409)
    assert [r.rid for r in reqs] == list(range(200))
    assert all(r.segments == () and r.after == -1 and r.source == "trace" for r in reqs)


def test_time_scale_limit_and_caps():
    reqs = _read(path=str(AZURE), time_scale=0.5, limit=3)
    assert [r.arrival_s for r in reqs] == pytest.approx([0.0, 2.1572895, 2.2709385], abs=1e-9)
    assert len(_read(max_requests=7, path=str(AZURE))) == 7
    short = _read(duration=4.4, path=str(AZURE))
    assert [r.arrival_s for r in short] == pytest.approx([0.0, 4.314579], abs=1e-9)


def test_columns_format_sorts_shifts_and_clips(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,t,in,out\na,12.5,100,7\nb,10.0,0,3\n\nc,11.0,50,0\n")
    reqs = _read(path=str(path), format="columns", columns={"arrival": "t", "prompt": "in", "output": "out"})
    assert [(r.arrival_s, r.prompt_len, r.output_len) for r in reqs] == [
        (0.0, 1, 3), (1.0, 50, 1), (2.5, 100, 7)]


def test_columns_accepts_timestamps(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("when,p,o\n2024-01-01 23:59:59.5,10,2\n2024-01-02 00:00:01,20,3\n")
    reqs = _read(path=str(path), format="columns", columns={"arrival": "when", "prompt": "p", "output": "o"})
    assert [r.arrival_s for r in reqs] == pytest.approx([0.0, 1.5])


def test_csv_errors(tmp_path):
    with pytest.raises(KvsimError, match="trace file not found"):
        _read(path=str(tmp_path / "missing.csv"))
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("TIMESTAMP,Context,GeneratedTokens\n2023-11-16 18:15:46.68,1,2\n")
    with pytest.raises(KvsimError, match=r"wrong\.csv:1: no column 'ContextTokens'"):
        _read(path=str(wrong))
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,2\n"
                   "2023-11-16 18:15:47.00,12,3\n2023-11-16 18:15:48.00,x7,3\n")
    with pytest.raises(KvsimError, match=r"bad\.csv:4: ContextTokens: bad token count 'x7'"):
        _read(path=str(bad))
    stamp = tmp_path / "stamp.csv"
    stamp.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,2\n"
                     "2023-11-16 18:61:47.00,12,3\n")
    with pytest.raises(KvsimError, match=r"stamp\.csv:3: TIMESTAMP: bad time"):
        _read(path=str(stamp))
    short = tmp_path / "short.csv"
    short.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1\n")
    with pytest.raises(KvsimError, match=r"short\.csv:2: expected at least 3 fields"):
        _read(path=str(short))
    empty = tmp_path / "empty.csv"
    empty.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    with pytest.raises(KvsimError, match="no requests"):
        _read(path=str(empty))
    with pytest.raises(KvsimError, match="columns: missing 'output'"):
        _read(path=str(bad), format="columns", columns={"arrival": "a", "prompt": "b"})


def test_negative_or_fractional_counts_rejected(tmp_path):
    path = tmp_path / "neg.csv"
    path.write_text("t,p,o\n0,5,5\n1,5,-2\n")
    with pytest.raises(KvsimError, match=r"neg\.csv:3: o: bad token count '-2'"):
        _read(path=str(path), format="columns", columns={"arrival": "t", "prompt": "p", "output": "o"})
    path.write_text("t,p,o\n0,5.5,5\n")
    with pytest.raises(KvsimError, match=r"neg\.csv:2: p:"):
        _read(path=str(path), format="columns", columns={"arrival": "t", "prompt": "p", "output": "o"})


def test_mooncake_excerpt_segments():
    reqs = _read(path=str(MOONCAKE), format="mooncake")
    assert len(reqs) == 50
    first = reqs[0]
    # {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, ..., 13]}
    assert (first.arrival_s, first.prompt_len, first.output_len) == (0.0, 6758, 500)
    assert [cid - MOONCAKE_ID_BASE for cid, _ in first.segments] == list(range(14))
    assert [n for _, n in first.segments] == [512] * 13 + [6758 - 13 * 512]
    assert reqs[1].segments[0] == first.segments[0]  # both start with hash id 0
    assert all(sum(n for _, n in r.segments) == r.prompt_len for r in reqs)
    assert [r.arrival_s for r in reqs] == sorted(r.arrival_s for r in reqs)


def test_mooncake_errors(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n'
                    '{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [1]}\n')
    with pytest.raises(KvsimError, match=r"m\.jsonl:2: 1 hash_ids for input_length 600"):
        _read(path=str(path), format="mooncake")
    path.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n{oops\n')
    with pytest.raises(KvsimError, match=r"m\.jsonl:2: bad JSON"):
        _read(path=str(path), format="mooncake")
    path.write_text('{"timestamp": 0, "output_length": 5, "hash_ids": []}\n')
    with pytest.raises(KvsimError, match=r"m\.jsonl:1: missing key 'input_length'"):
        _read(path=str(path), format="mooncake")


def test_mooncake_custom_block_and_timestamps(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"timestamp": 1500, "input_length": 250, "output_length": 0, "hash_ids": [7, 8, 9]}\n'
                    '{"timestamp": 1000, "input_length": 0, "output_length": 4, "hash_ids": []}\n')
    reqs = _read(path=str(path), format="mooncake", hash_block_tokens=100)
    assert [(r.arrival_s, r.prompt_len, r.output_len) for r in reqs] == [(0.0, 1, 4), (0.5, 250, 1)]
    assert reqs[0].segments == ()
    assert [n for _, n in reqs[1].segments] == [100, 100, 50]
