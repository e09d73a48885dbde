"""The one exception type the CLI turns into a one-line error and a non-zero exit, `excerpt`, the one
way an error message quotes user input, and `check_jobs`, the Python API's check of a `jobs` argument,
with its limits `MAX_JOBS` / `MAX_SWEEP_JOBS` (the command line's --jobs limits too)."""

from __future__ import annotations

from typing import Any


class KvsimError(Exception):
    """A user-facing error: bad scenario, bad trace, unknown model. The message is one line and names
    the file, key or line at fault."""


def excerpt(value: Any, limit: int = 40) -> str:
    """A short, escaped quotation of user input for an error message: repr() (so control characters and
    newlines are escaped), cut to about `limit` characters. Never echo more of a file than this."""
    text = value if isinstance(value, str) else repr(value)
    if isinstance(value, str):
        cut = text[: limit + 1]
        quoted = repr(cut[:limit])
        return quoted[:-1] + "…" + quoted[-1] if len(cut) > limit else quoted
    return text if len(text) <= limit else text[:limit] + "…"


MAX_JOBS = 256
"""`--jobs` of run, compare and plan at most, and the Python API's compare's and plan's `jobs`."""
MAX_SWEEP_JOBS = 1024
"""`kvsim sweep --jobs` at most, and `kvsim.sweep`'s `jobs`."""


def check_jobs(jobs: Any, most: int) -> None:
    """The Python API's `jobs` (as the command line's --jobs): a whole number from 1 to `most`."""
    if not (isinstance(jobs, int) and not isinstance(jobs, bool) and 1 <= jobs <= most):
        shown = excerpt(jobs) if isinstance(jobs, (int, float, str)) else type(jobs).__name__
        raise KvsimError(f"jobs: a whole number from 1 to {most}, got {shown}")


def printable(text: Any) -> str:
    """text with every control or format character (ESC, BEL, DEL, C1, bidi overrides...) written as a
    Python escape, so a name or path echoed to a terminal cannot move the cursor, recolour or hide text."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in text)


class WorkerError(Exception):
    """An unexpected exception in a worker process (a sweep point simulated on a process pool or Ray): a
    kvsim bug, not bad input. The message is one line naming the point, the exception's class and its
    message; the worker's traceback is the `__cause__` (shown with KVSIM_DEBUG=1)."""


class RemoteTraceback(Exception):
    """A worker's formatted traceback, attached as a WorkerError's cause."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0]) if self.args else ""


class KvsimWarning(UserWarning):
    """A result the user must see that is not an error: `kvsim.run` of a run in which no request completed
    (the message is the line `kvsim run` prints first)."""
