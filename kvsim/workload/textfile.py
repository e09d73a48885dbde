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
READ_BYTES = 2**20
"""text_blocks reads this many bytes at a time."""
_LINES = re.compile(r"[^\n]*\n")
_RAW_LINES = re.compile(rb"[^\n]*\n")
_COLUMN_NAME = re.compile(r"[\w .()/-]{1,40}")


def _open(path: str | Path, what: str):
    """The checked path and its file, open for binary reading (a one-line error naming the file if not)."""
    p = check_file(path, what)
    try:
        return p, p.open("rb")
    except OSError as exc:
        raise KvsimError(f"{p}: cannot read {what}: {exc.strerror or exc}") from None


def text_lines(path: str | Path, what: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, text with its line ending) of each line of a text file."""
    p, fh = _open(path, what)
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


def text_blocks(path: str | Path, what: str) -> Iterator[list[str]]:
    """The texts text_lines gives (the same checks, the same error at the same line), many lines a list:
    the file is read READ_BYTES at a time. Where a line is bad, the list holds the lines before it and
    its error is raised when the next list is asked for (a reader that stops before it never sees it)."""
    p, fh = _open(path, what)
    with fh:
        line_no = 0  # lines handed out
        carry = b""  # the start of the line the last block ended in
        while True:
            try:
                data = fh.read(READ_BYTES)
            except OSError as exc:
                raise KvsimError(f"{p}:{line_no + 1}: cannot read {what}: {exc.strerror or exc}") from None
            if not data:
                if carry:
                    yield [_decode(carry, p, line_no + 1)]
                return
            buf = carry + data if carry else data
            end = buf.rfind(b"\n") + 1
            carry = buf[end:]
            if end:
                texts = _decode_block(buf[:end], line_no)
                if texts is None:  # a bad line among them: the good ones before it, then its error
                    texts = []
                    for raw in _RAW_LINES.findall(buf, 0, end):
                        try:
                            texts.append(_decode(raw, p, line_no + len(texts) + 1))
                        except KvsimError:
                            if texts:
                                yield texts
                            raise
                line_no += len(texts)
                yield texts
            if len(carry) > MAX_LINE_BYTES:
                raise KvsimError(f"{p}:{line_no + 1}: line longer than {MAX_LINE_BYTES // 2**20} MiB")


def _decode_block(block: bytes, line_no: int) -> list[str] | None:
    """The lines of `block` (whole lines, each with its ending, from line line_no + 1) as texts, as
    _decode makes them; None if one of them is bad."""
    if b"\x00" in block:
        return None
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if line_no == 0:
        text = text.removeprefix("\ufeff")
    texts = _LINES.findall(text)
    # (a line over MAX_LINE_BYTES bytes has over a quarter as many characters, less a BOM)
    if len(block) > MAX_LINE_BYTES and 4 * (max(map(len, texts)) + 1) > MAX_LINE_BYTES:
        return None  # (maybe a line too long: the caller decodes them one by one)
    return texts


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
