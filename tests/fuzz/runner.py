"""The parent side of one case: lay out its files in a fresh folder, run its setup commands, `kvsim
validate` first when asked, then the command (or the Python API call) itself through the `Worker`, and
classify the result."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cases import ERROR, OK, Case, Link, Outcome
from outcome import _diff_text, _first_line, classify, snapshot
from worker import Worker

# ---------------------------------------------------------------------------------------------------
# The parent side: lay out a case, hand it to the worker, classify


def run_case(case: Case, worker: Worker) -> Outcome:
    """Lay out the case in a fresh folder, run its setup commands, then the case itself (and `validate`
    first when asked), and classify the result."""
    base = Path(tempfile.mkdtemp(prefix="kvsim-fuzz-case-"))
    try:
        root = base / "root"
        capture = base / "capture"
        capture.mkdir()
        _write_files(root, case.files)
        cwd = root / case.cwd
        cwd.mkdir(parents=True, exist_ok=True)
        env = {k: v.replace("{dir}", str(root)) for k, v in case.env.items()}
        for argv in case.setup:
            done = _plain_outcome(argv, worker, cwd, capture, env)
            if done.kind != OK:
                kind = ERROR if done.kind == ERROR else done.kind
                return Outcome(kind, done.rc, done.stdout, done.stderr, done.elapsed,
                               f"setup `kvsim {' '.join(argv)}`: {done.detail}")
        _write_files(root, case.after_setup)
        user = _user_paths(root, {**case.files, **case.after_setup})
        before = snapshot(root)
        pre: Outcome | None = None
        if case.validate_first and len(case.argv) >= 2:
            pre = _validate_outcome(case, worker, cwd, capture, env)
            after_validate = snapshot(root)
            if after_validate != before and pre.kind in (OK, ERROR):
                pre = Outcome("leftover-output", pre.rc, pre.stdout, pre.stderr, pre.elapsed,
                              "`kvsim validate` changed the folder: " + _diff_text(before, after_validate))
            if pre.failed:
                return pre
            before = after_validate
        raw = worker.execute(case.argv, cwd, capture, env, case.call)
        outcome = classify(case, raw, capture, before, snapshot(root), user, root)
        if pre is not None and not outcome.failed and pre.kind != outcome.kind:
            outcome = Outcome("validate-mismatch", outcome.rc, outcome.stdout, outcome.stderr,
                              outcome.elapsed, f"validate: {pre.kind} ({_first_line(pre.stderr)}); "
                              f"{case.argv[0]}: {outcome.kind} ({_first_line(outcome.stderr)})")
        return outcome
    finally:
        _make_removable(base)
        shutil.rmtree(base, ignore_errors=True)


def _user_paths(root: Path, files: dict[str, Any]) -> set[str]:
    """The case's own files and every folder above them (relative to root): what kvsim must not touch."""
    out: set[str] = set()
    for name in files:
        rel = os.path.normpath(name)
        while rel not in ("", "."):
            out.add(rel)
            rel = os.path.dirname(rel)
    return out


def _plain_outcome(argv: list[str], worker: Worker, cwd: Path, capture: Path, env: dict[str, str]) -> Outcome:
    """Run one command and classify it with no expectations (setup steps, validate_first)."""
    raw = worker.execute(argv, cwd, capture, env)
    snap = snapshot(cwd)
    return classify(Case("setup", argv), raw, capture, snap, snap, set(), cwd)


def _validate_outcome(case: Case, worker: Worker, cwd: Path, capture: Path, env: dict[str, str]) -> Outcome:
    argv = ["validate", case.argv[1]]
    args = case.argv[2:]
    for i, arg in enumerate(args):
        if arg == "--set" and i + 1 < len(args):
            argv += ["--set", args[i + 1]]
        elif arg.startswith("--set="):
            argv.append(arg)
    return _plain_outcome(argv, worker, cwd, capture, env)


def _write_files(root: Path, files: dict[str, Any]) -> None:
    """Create the case's files under root; "{dir}" in text content stands for root."""
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink() and content is not None:
            shutil.rmtree(path)
        elif os.path.lexists(path) and (content is None or isinstance(content, Link)):
            path.unlink()
        if content is None:
            path.mkdir(parents=True, exist_ok=True)
        elif isinstance(content, Link):
            path.symlink_to(content.target)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.replace("{dir}", str(root)), encoding="utf-8")


def _make_removable(base: Path) -> None:
    """kvsim may leave folders without write permission (a bug to report, not to trip over)."""
    for dirpath, dirnames, _ in os.walk(base):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                try:
                    os.chmod(p, 0o755)
                except OSError:
                    pass
