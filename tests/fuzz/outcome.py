"""Classify what a case did: folder snapshots before and after (data loss in the user's files, output
left behind after an error), the exit code and stderr against the contract (`classify`), and the
grouping of failures by cause (`origin`, `exception_name`, `signature`)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from cases import ERROR, OK, Case, Outcome
from worker import TIME_LIMIT_S

MAX_ERROR_CHARS = 1000
"""An error line longer than this quotes too much user input."""

_WARNING_LINE = re.compile(r"^\S*:\d+: \w*Warning: ", re.M)


# ---------------------------------------------------------------------------------------------------
# Snapshots and classification


def snapshot(root: Path) -> dict[str, str]:
    """relative path -> a fingerprint ("dir", "link:TARGET" or the SHA-256 of the bytes), every entry."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = "link:" + os.readlink(p)
            elif os.path.isdir(p):
                out[rel] = "dir"
            else:
                try:
                    with open(p, "rb") as fh:
                        out[rel] = hashlib.sha256(fh.read()).hexdigest()
                except OSError:
                    out[rel] = "unreadable"
    return out


def _diff_text(before: dict[str, str], after: dict[str, str]) -> str:
    gone = sorted(set(before) - set(after))
    changed = sorted(k for k in before if k in after and before[k] != after[k])
    new = sorted(set(after) - set(before))
    bits = []
    if gone:
        bits.append("deleted " + ", ".join(gone[:6]))
    if changed:
        bits.append("changed " + ", ".join(changed[:6]))
    if new:
        bits.append("new " + ", ".join(new[:6]))
    return "; ".join(bits)


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0][:200] if text else ""


def _read_capture(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def classify(case: Case, raw: dict[str, Any], capture: Path, before: dict[str, str],
             after: dict[str, str], user: set[str], root: Path) -> Outcome:
    """Turn the worker's reply and the folder's before/after snapshots into an Outcome; `user` holds
    the paths (relative to root) of the case's own files and folders."""
    rc, elapsed = raw.get("rc"), float(raw.get("elapsed") or 0.0)
    stdout = _read_capture(capture / "stdout.txt")
    stderr = _read_capture(capture / "stderr.txt")

    def out(kind: str, detail: str = "") -> Outcome:
        return Outcome(kind, rc, stdout, stderr, elapsed, detail)

    kind = raw.get("kind")
    if kind == "hang":
        return out("hang", f"no result within {TIME_LIMIT_S:g} s")
    if kind in ("memory", "died"):
        return out("memory", "MemoryError" if kind == "memory" else
                   f"worker died (signal or OOM kill); last stderr: {_last_lines(stderr, 3)}")
    if raw.get("tb") or "Traceback (most recent call last)" in stderr:
        return out("traceback", _last_lines(raw.get("tb") or stderr, 1))
    touched = {k: v for k, v in before.items() if k in user and after.get(k) != v}
    if touched:
        return out("data-loss", _diff_text(touched, {k: after[k] for k in touched if k in after}))
    for text in case.forbid:
        if text in stdout or text in stderr:
            return out("leaked-content", f"printed {text!r}")
    if "\x1b" in stdout or "\x1b" in stderr:
        where = stdout if "\x1b" in stdout else stderr
        at = where.index("\x1b")
        return out("unescaped-control", f"printed {where[max(0, at - 30): at + 10]!r}")
    lines = stderr.rstrip("\n").split("\n") if stderr.strip() else []
    new = sorted(set(after) - set(before))
    if case.progress and rc == 2 and len(lines) > 1:  # progress lines, then the error
        if any(ln.startswith("error") for ln in lines[:-1]):
            return out("multi-line-error", f"{sum(ln.startswith('error') for ln in lines)} error lines")
        lines = lines[-1:]
    if case.call and rc == 0 and new:
        return out("leftover-output", "the Python API wrote files: new " + ", ".join(new[:6]))
    if rc == 0:
        if case.expect == "fail":
            return out("accepted-nonsense", "exit 0 for an input that must be refused")
        if _WARNING_LINE.search(stderr):
            return out("warning", _WARNING_LINE.search(stderr).group(0) + _first_line(
                stderr[_WARNING_LINE.search(stderr).end():]))
        if case.returns and f"returned {case.returns}\n" not in stdout:
            return out("missing-output", f"{_first_line(stdout)}, expected a {case.returns}")
        missing = [p for p in case.outputs if not (root / case.cwd / p).is_file()]
        if missing:
            return out("missing-output", "exit 0 but no " + ", ".join(missing))
        flat = " ".join(stdout.split())
        for text in case.literal:
            if text not in flat and text not in stdout:
                return out("markup-rendered", f"{text!r} not printed literally")
        return out(OK)
    if rc == 2:
        if len(lines) != 1:
            return out("multi-line-error", f"{len(lines)} stderr lines")
        line = lines[0]
        if not line.startswith("error: ") or (case.call and (not line[7:].strip() or "\r" in line)):
            return out("bad-error-line", line[:200])
        if len(line) > MAX_ERROR_CHARS:
            return out("long-error", f"{len(line)} characters")
        if new:
            return out("leftover-output", "after an error: new " + ", ".join(new[:6]))
        if "internal error" in line:
            return out("internal-error", line[:300])
        if case.expect == "pass":
            return out("rejected-valid", line[:300])
        return out(ERROR, line[:300])
    if len(lines) == 1 and "internal error" in lines[0]:
        return out("internal-error", f"exit {rc}; {lines[0][:300]}")
    return out("wrong-exit-code", f"exit {rc}; {_first_line(stderr)}")


def _last_lines(text: str, n: int) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[:500]


# ---------------------------------------------------------------------------------------------------
# Failure signatures

_FRAME = re.compile(r'File "([^"]*?(kvsim/[^"]+\.py))", line (\d+), in (\S+)')


def origin(outcome: Outcome) -> str:
    """Where a failure comes from: the innermost kvsim frame of a traceback ("kvsim/x.py:12 in f"),
    else "-"."""
    frames = _FRAME.findall(outcome.stderr)
    frames = [f for f in frames if "/tests/" not in f[0]]
    if not frames:
        return "-"
    _, rel, line, func = frames[-1]
    return f"{rel}:{line} in {func}"


def exception_name(text: str) -> str:
    """The exception class of the last traceback in text ("yaml.reader.ReaderError")."""
    names = re.findall(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|error))\b", text, re.M)
    return names[-1] if names else "?"


def signature(outcome: Outcome, case: Case | None = None) -> str:
    """A short key that groups failures with one cause: the exception line and origin of a traceback;
    for an input judged wrongly (accepted-nonsense, rejected-valid, data-loss, ...) what the case does;
    else the error line with numbers and quoted values blanked."""
    if case is not None and outcome.kind in ("accepted-nonsense", "markup-rendered", "data-loss",
                                             "leaked-content", "validate-mismatch"):
        what = re.sub(r"line \d+", "line N", case.why)[:100]
        return f"{case.category}: {what}"
    if outcome.kind == "traceback":
        return f"{exception_name(outcome.stderr)} @ {origin(outcome)}"
    text = outcome.detail or _first_line(outcome.stderr)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    text = re.sub(r"/tmp/\S+", "PATH", text)
    return text[:140]
