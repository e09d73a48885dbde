"""Bounded line reading of trace and length files."""

from itertools import chain, islice

import pytest

from kvsim.errors import KvsimError
from kvsim.workload import textfile
from kvsim.workload.textfile import find_column, text_blocks, text_lines


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


@pytest.mark.parametrize("data", [
    b"\xef\xbb\xbfa,b\r\nc\n\n\nd",
    b"ab\ncd\nef\n",
    b"a\nb\x00c\nd\n",  # a NUL on line 2
    b"a\nb\nc\xff\nd\n",  # not UTF-8 on line 3
    b"a\n" + b"x" * 20 + b"\nb\n",  # too long on line 2
    b"a\nb\n" + b"y" * 20,  # too long, unended, on line 3
    b"a\n\xc3\xa9\xc3\xa9\xc3\xa9\nz",
    b"",
])
@pytest.mark.parametrize("read_bytes", [1, 3, 7, 1 << 20])
def test_blocks_hold_the_lines_text_lines_gives(tmp_path, monkeypatch, data, read_bytes):
    monkeypatch.setattr(textfile, "MAX_LINE_BYTES", 8)
    monkeypatch.setattr(textfile, "READ_BYTES", read_bytes)
    path = tmp_path / "f.txt"
    path.write_bytes(data)

    def read(lines):
        got = []
        try:
            for text in lines:
                got.append(text)
        except KvsimError as exc:
            return got, str(exc)
        return got, None

    expected = read(text for _, text in text_lines(path, "file"))
    assert read(chain.from_iterable(text_blocks(path, "file"))) == expected
    # a reader that stops before a bad line never sees its error
    n = len(expected[0])
    assert list(islice(chain.from_iterable(text_blocks(path, "file")), n)) == expected[0]
