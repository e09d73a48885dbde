"""What a fuzz case is and what it did: `Case` (a kvsim argument list, or a Python API call, plus the files
to create, and what the outcome must be), `Link` (a symlink among those files), `Outcome` (the classified
result) and the outcome kinds (OK, ERROR and FAILURE_KINDS, described in harness.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

OK, ERROR = "ok", "error"
FAILURE_KINDS = ("traceback", "multi-line-error", "bad-error-line", "long-error", "wrong-exit-code", "hang",
                 "memory", "leftover-output", "data-loss", "accepted-nonsense", "rejected-valid",
                 "leaked-content", "markup-rendered", "unescaped-control", "internal-error",
                 "validate-mismatch", "missing-output", "warning")


# ---------------------------------------------------------------------------------------------------
# Cases and outcomes


@dataclass
class Case:
    """One input to kvsim.

    argv: the arguments after `kvsim`. files: relative path -> contents (str is written as UTF-8, bytes
    as is, None makes a folder, a `Link` a symlink); these are the "user files" kvsim must not delete or
    change ("{dir}" in text content stands for the case folder). cwd: the folder (relative) kvsim runs
    in. expect: "any", "fail" (must be a one-line error) or "pass" (must run). forbid: substrings that
    must not appear in stdout or stderr. literal: substrings a successful run must print verbatim
    (markup / emoji codes). env: extra environment variables,
    "{dir}" in a value standing for the case folder. validate_first: also run `kvsim validate` on
    argv[1] (with the same --set items) and require it to agree with `run` (both ok or both errors).
    setup: kvsim commands run first (each must succeed; what they write is kvsim's, not the user's);
    after_setup: user files written after them (e.g. notes.md into an earlier output folder).
    outputs: files (relative to cwd) a successful run must have written.
    call: Python source run in place of the command line (API mode; argv is then empty): it is executed
    in the case folder with `kvsim`, `math`, `Path`, `PosixPath`, `nan` and `inf` in scope and assigns
    `result`; a KvsimError counts as the one-line error (exit 2), a return as a valid run (exit 0), any
    other exception as a traceback. returns: the type name `result` must have after a valid call.
    progress: the command prints progress lines to stderr before its result (kvsim plan's probes), so
    an error is the last stderr line, the lines before it being progress (none may start "error").
    """

    category: str
    argv: list[str]
    files: dict[str, Any] = field(default_factory=dict)
    expect: str = "any"
    why: str = ""
    cwd: str = "."
    forbid: tuple[str, ...] = ()
    literal: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    validate_first: bool = False
    setup: list[list[str]] = field(default_factory=list)
    after_setup: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    call: str = ""
    returns: str = ""
    progress: bool = False

    def __repr__(self) -> str:  # short: hypothesis prints it for a failing example
        files = ", ".join(f"{k} ({_size(v)})" for k, v in self.files.items())
        what = f"call={self.call[:200]!r}" if self.call else f"argv={[a[:80] for a in self.argv]!r}"
        return (f"Case({self.category!r}, {self.why[:120]!r}, {what}, "
                f"expect={self.expect!r}, files=[{files}])")

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis' pretty-printer asks for this
        printer.text(repr(self))

    def repro(self, limit: int = 1500) -> str:
        """A human-readable reproduction: the files (cut) and the command line."""
        parts = [f"# {self.category}: {self.why}" if self.why else f"# {self.category}"]
        for name, content in self.files.items():
            parts.append(f"--- {name} {_describe(content, limit)}")
        where = "" if self.cwd == "." else f"cd {self.cwd} && "
        env = "".join(f"{k}={v} " for k, v in self.env.items())
        for argv in self.setup:
            parts.append(f"$ {where}{env}kvsim {' '.join(_shell_quote(a) for a in argv)}   # setup")
        for name, content in self.after_setup.items():
            parts.append(f"--- then {name} {_describe(content, limit)}")
        if self.call:
            parts.append(f"$ {where}{env}python   # then, with import kvsim, math; from pathlib import Path")
            parts.extend(f">>> {line}" for line in self.call[:limit].splitlines())
        else:
            parts.append(f"$ {where}{env}kvsim {' '.join(_shell_quote(a) for a in self.argv)}")
        return "\n".join(parts)


@dataclass(frozen=True)
class Link:
    """A symlink to create in the case folder (target as given, relative or absolute)."""

    target: str


@dataclass
class Outcome:
    """What a case did: kind (ok, error or a failure kind), exit code, output, wall time, a detail."""

    kind: str
    rc: int | None
    stdout: str = ""
    stderr: str = ""
    elapsed: float = 0.0
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.kind not in (OK, ERROR)

    def summary(self, limit: int = 1200) -> str:
        tail = self.stderr.strip()
        if len(tail) > limit:
            tail = "…" + tail[-limit:]
        return (f"outcome {self.kind} (exit {self.rc}, {self.elapsed:.2f} s)"
                + (f": {self.detail}" if self.detail else "") + (f"\nstderr:\n{tail}" if tail else ""))


def _size(content: Any) -> str:
    if content is None:
        return "folder"
    if isinstance(content, Link):
        return f"-> {content.target}"
    return f"{len(content)} {'bytes' if isinstance(content, bytes) else 'chars'}"


def _describe(content: Any, limit: int) -> str:
    if content is None:
        return "(folder)"
    if isinstance(content, Link):
        return f"-> {content.target}"
    if isinstance(content, bytes):
        try:
            text = content.decode("utf-8")
            if "\x00" in text:
                raise UnicodeDecodeError("utf-8", b"", 0, 1, "NUL")
        except UnicodeDecodeError:
            return f"({len(content)} bytes) {content[:limit]!r}"
        content = text
    size = f"({len(content)} chars, cut)" if len(content) > limit else ""
    return f"{size}\n{content[:limit]}" if size else f"\n{content}"


def _shell_quote(arg: str) -> str:
    if arg and re.fullmatch(r"[\w@%+=:,./-]+", arg):
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"
