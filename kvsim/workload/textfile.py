"""Bounded line-by-line reading of the workload's data files (traces, empirical length files): files of
any size are streamed, but each line is at most MAX_LINE_BYTES, UTF-8, and without NUL bytes. Every
failure is a one-line KvsimError naming the file and line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kvsim.errors import KvsimError, excerpt
from kvsim.inputs import check_file

MAX_LINE_BYTES = 2**20
_COLUMN_NAME = re.compile(r"[\w .()/-]{1,40}")


def text_lines(path: str | Path, what: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, text with its line ending) of each line of a text file."""
    p = check_file(path, what)
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise KvsimError(f"{p}: cannot read {what}: {exc.strerror or exc}") from None
    with fh:
        line_no = 0
        while True:
            try:
                raw = fh.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                raise KvsimError(f"{p}:{line_no + 1}: cannot read {what}: {exc.strerror or exc}") from None
            if not raw:
                return
            line_no += 1
            yield line_no, _decode(raw, p, line_no)


def _decode(raw: bytes, path: Path, line_no: int) -> str:
    if len(raw) > MAX_LINE_BYTES:
        raise KvsimError(f"{path}:{line_no}: line longer than {MAX_LINE_BYTES // 2**20} MiB")
    if b"\x00" in raw:
        raise KvsimError(f"{path}:{line_no}: binary data (NUL byte), expected text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KvsimError(f"{path}:{line_no}: not UTF-8 text (byte {exc.start + 1} of the line)") from None
    return text.removeprefix("\ufeff") if line_no == 1 else text


def find_column(header: list[str], name: str, path: Path) -> int:
    """Where column `name` is in a CSV header row. The error quotes only header fields that look like
    column names, cut short (the file may not be a table at all: /etc/passwd)."""
    if name in header:
        return header.index(name)
    shown = [h for h in header if _COLUMN_NAME.fullmatch(h)][:8]
    have = (f"header: {excerpt(', '.join(shown), 80)}" if shown
            else f"{len(header)} field(s), none like a column name")
    raise KvsimError(f"{path}:1: no column {excerpt(name)} ({have})")


def column_text(name: str) -> str:
    """A column name for a message: as is when it looks like one, else an excerpt."""
    return name if _COLUMN_NAME.fullmatch(name) else excerpt(name)
