from pathlib import Path

import numpy as np
import pytest

from kvsim.errors import KvsimError
from kvsim.workload import trace as trace_module
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


AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
COLUMNS = {"format": "columns", "columns": {"arrival": "t", "prompt": "p", "output": "o"}}


def _error(path, **trace) -> str:
    with pytest.raises(KvsimError) as info:
        _read(path=str(path), **trace)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("count", ["inf", "1e19", "true", "nan", "-2", "5.5", "", "1" * 400])
def test_bad_token_counts_name_the_line(tmp_path, count):
    """inf and 1e19 once became 1 token (int64 overflow, then raised to 1)."""
    path = tmp_path / "t.csv"
    path.write_text(AZURE_HEADER + f"2023-11-16 18:15:46.68,10,2\n2023-11-16 18:15:47.68,{count},2\n")
    assert _error(path).startswith(f"{path}:3: ContextTokens: bad token count ")


def test_integral_float_token_counts_are_integers(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("t,p,o\n0,12.0,3\n1,1_000,4\n")  # the second row takes the row-by-row parse
    assert [(r.prompt_len, r.output_len) for r in _read(path=str(path), **COLUMNS)] == [(12, 3), (1000, 4)]


@pytest.mark.parametrize(("content", "expected"), [
    (b"", "{path}: empty trace file (expected a header row)"),
    (AZURE_HEADER.encode() + b"2023-11-16 18:15:46.68,1\xe9,2\n",
     "{path}:2: not UTF-8 text (byte 25 of the line)"),
    (AZURE_HEADER.encode() + b'"' + b"x" * 200_000 + b'",1,2\n',
     "{path}:2: bad CSV ('field larger than field limit (131072)')"),
    (AZURE_HEADER.encode() + b"x" * 1_100_000, "{path}:2: line longer than 1 MiB"),
    (b"root:x:0:0:root:/root:/bin/bash\n",
     "{path}:1: no column 'TIMESTAMP' (1 field(s), none like a column name)"),
    (b"\x7fELF\x00\x00", "{path}:1: binary data (NUL byte), expected text"),
])
def test_files_that_are_no_trace(tmp_path, content, expected):
    path = tmp_path / "t.csv"
    path.write_bytes(content)
    assert _error(path) == expected.format(path=path)


def test_a_directory_is_no_trace(tmp_path):
    assert _error(tmp_path) == f"{tmp_path}: is a directory, expected a trace file"


def test_header_of_another_table_is_quoted_short(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("when,in,out," + ",".join(f"c{i}" for i in range(50)) + "\n1,2,3\n")
    assert _error(path) == f"{path}:1: no column 'TIMESTAMP' (header: 'when, in, out, c0, c1, c2, c3, c4')"


def test_times_are_finite_and_span_at_most_1e9_seconds(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("t,p,o\n0,5,5\nnan,5,5\n")
    assert _error(path, **COLUMNS) == (f"{path}:3: t: bad time 'nan' (expected a finite number of seconds or "
                                       "'YYYY-MM-DD HH:MM:SS.fff')")
    path.write_text("t,p,o\n0,5,5\n1e300,5,5\n")
    assert _error(path, **COLUMNS) == (f"{path}: the trace spans 1e+300 s (times x "
                                       "workload.trace.time_scale), more than 1e+09 s")
    path.write_text("t,p,o\n0,5,5\n1000,5,5\n")
    assert _read(path=str(path), time_scale=1e6, **COLUMNS)[-1].arrival_s == 1e9


MOONCAKE_LINE = '{{"timestamp": {ts}, "input_length": {n}, "output_length": 5, "hash_ids": {ids}}}\n'


@pytest.mark.parametrize(("ts", "n", "ids", "expected"), [
    ("NaN", "10", "[1]", "timestamp: bad time nan (expected a finite number of milliseconds"),
    ("Infinity", "10", "[1]", "timestamp: bad time inf (expected a finite number of milliseconds"),
    ("1" + "0" * 400, "10", "[1]", "timestamp: bad time 1000000000000000000000000000000000000000…"),
    ("true", "10", "[1]", "timestamp: bad time True"),
    ("0", "true", "[1]", "input_length: bad token count True (expected an integer from 0 to 1,000,000,000)"),
    ("0", "1e19", "[1]", "input_length: bad token count 1e+19"),
    ("0", "-1", "[]", "input_length: bad token count -1"),
    ("0", "10.5", "[1]", "input_length: bad token count 10.5"),
    ("0", "10", "[true]", "hash_ids: expected a list of integers"),
    ("0", "10", "[1099511627776]", "hash_ids: ids must lie in [0, 2^40)"),
])
def test_mooncake_fields_are_checked(tmp_path, ts, n, ids, expected):
    """A NaN timestamp once made every arrival NaN and the run exit 0."""
    path = tmp_path / "m.jsonl"
    path.write_text(MOONCAKE_LINE.format(ts=0, n=10, ids="[1]") + MOONCAKE_LINE.format(ts=ts, n=n, ids=ids))
    assert _error(path, format="mooncake").startswith(f"{path}:2: {expected}")


def test_mooncake_integral_float_length_is_an_integer(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(MOONCAKE_LINE.format(ts=1.5, n=10.0, ids="[7]"))
    (r,) = _read(path=str(path), format="mooncake")
    assert (r.prompt_len, r.segments) == (10, ((MOONCAKE_ID_BASE + 7, 10),))


@pytest.mark.parametrize(("line", "expected"), [
    ("[1, 2]", "expected a JSON object, got list"),
    ("[" * 100_000 + "]" * 100_000, "bad JSON ("),
    ('{"timestamp": 0, "input_length": ' + "1" * 5000 + ', "output_length": 1}', "bad JSON ("),
])
def test_mooncake_lines_that_are_no_record(tmp_path, line, expected):
    path = tmp_path / "m.jsonl"
    path.write_text(line + "\n")
    assert _error(path, format="mooncake").startswith(f"{path}:1: {expected}")


def test_row_count_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_module, "MAX_REQUESTS", 3)
    path = tmp_path / "t.csv"
    path.write_text("t,p,o\n" + "".join(f"{i},5,5\n" for i in range(5)))
    assert _error(path, **COLUMNS) == f"{path}:5: more than 3 rows; read fewer with workload.trace.limit"
    assert len(_read(path=str(path), limit=3, **COLUMNS)) == 3


@pytest.mark.parametrize("text", [
    "t,p,o\n0,1,2\n1,3,4\n",  # regular: read many rows at a time
    "t,p,o\n0,1,2\n\n1,3,4\n",  # a blank row (skipped, as the row-by-row reader skips it)
    "t,p,o\n0,1,2\n1,3,4\n\n",  # a trailing blank row
    "t,p,o\n\n\n0,1,2\n\n\n1,3,4\n",  # blank rows across the batches of _ROWS_AT_ONCE
    't,p,o\n0,"1\n",2\n1,3,4\n',  # a row over two lines
    "t,p,o\n0,1,2\n1,3\n",  # a short row
    "t,p,o\n0,1,2\n1,3,4\n2,5,6\n3,7,8\n",  # more than MAX_REQUESTS
    "x,y\n0,1\n",  # no such column
    "",
])
@pytest.mark.parametrize("limit", [None, 1, 2, 3])
def test_rows_read_at_once_are_the_rows_read_one_by_one(tmp_path, monkeypatch, text, limit):
    monkeypatch.setattr(trace_module, "MAX_REQUESTS", 3)
    monkeypatch.setattr(trace_module, "_ROWS_AT_ONCE", 2)
    path = tmp_path / "t.csv"
    path.write_text(text)
    names = {"arrival": "t", "prompt": "p", "output": "o"}
    keys = ("arrival", "prompt", "output")
    try:
        checked = trace_module._read_rows_checked(path, names, keys, limit)
    except KvsimError:
        checked = None
    fast = trace_module._read_rows(path, names, keys, limit)
    assert fast is None or fast == checked
    if text.replace("\n\n\n", "\n").replace("\n\n", "\n") == "t,p,o\n0,1,2\n1,3,4\n":
        assert fast is not None  # (the regular files, blank rows or not, take the fast way)


def test_a_bad_value_after_blank_rows_is_named_at_its_own_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("t,p,o\n1,2,3\n\n\n2,x,3\n3,4,5\n")
    assert _error(path, **COLUMNS).startswith(f"{path}:5: p: bad token count 'x'")
