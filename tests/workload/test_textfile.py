"""Bounded line reading of trace and length files."""

import pytest

from kvsim.errors import KvsimError
from kvsim.workload import textfile
from kvsim.workload.textfile import find_column, text_lines


def test_lines_are_numbered_and_a_bom_dropped(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"\xef\xbb\xbfa\r\nb\n\nc")
    assert list(text_lines(path, "file")) == [(1, "a\r\n"), (2, "b\n"), (3, "\n"), (4, "c")]


def test_a_long_line_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(textfile, "MAX_LINE_BYTES", 8)
    path = tmp_path / "f.txt"
    path.write_text("short\n" + "x" * 100)
    with pytest.raises(KvsimError, match=r"f\.txt:2: line longer than"):
        list(text_lines(path, "file"))


def test_missing_file_names_what_it_is(tmp_path):
    with pytest.raises(KvsimError, match=r"nope\.csv: trace file not found$"):
        list(text_lines(tmp_path / "nope.csv", "trace file"))


def test_find_column_quotes_only_names():
    with pytest.raises(KvsimError) as info:
        find_column(["a", "b c", "x" * 100, "s3cr3t:line"], "want", "f.csv")
    assert str(info.value) == "f.csv:1: no column 'want' (header: 'a, b c')"
