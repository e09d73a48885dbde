"""The folders kvsim writes (`run --out`, `compare --out`, `hitrate --out`, `calibrate --out`).

A folder is written whole into a hidden temporary sibling (`.NAME.tmp-*`) and then renamed into place, so
a reader sees the old output or the new one, never a mix. Each folder carries a manifest,
`.kvsim-manifest.json`: a kvsim signature, the command, and the SHA-256 of every file kvsim wrote there.
kvsim replaces an existing folder only when it carries that manifest and holds nothing else: no file the
manifest does not list, no listed file changed since. Anything else (a project folder with a stray
`summary.json`, an output folder with the user's `notes.md` added, `--out .`, a parent of the scenario
being run) is refused with a one-line error before any simulation runs. `kvsim sweep` rewrites its folder
at checkpoints while it runs, so there a file kvsim did not write (a file browser's `.DS_Store`) in a
folder it did is tolerated: moved, untouched, into the new folder, never deleted.

SIGINT and SIGTERM while writing remove the temporary folder; while the temporary folder is made and
recorded, and while the old folder is swapped for the new one, they are held back until that is done, so
an interrupt leaves the old output or the new one, whole, and no `.NAME.tmp-*` or `.NAME.old-*` behind
(a temporary folder still recorded at exit is removed then; kvsim/interrupts.py turns each signal into
one exception, even where Python would swallow it). What a SIGKILL leaves, `.NAME.tmp-PID-*`, the next
write to NAME removes once process PID is gone (remove_stale_temps). The folder keeps its permissions; a
symlinked output folder stays a symlink (its target is replaced).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from kvsim import __version__
from kvsim.errors import KvsimError
from kvsim.interrupts import catch_signals, raise_swallowed, restore_signals, signals_held

MANIFEST = ".kvsim-manifest.json"
SIGNATURE = "kvsim output folder v1"
_MANIFEST_MAX_BYTES = 1 << 20


class OutputFolder:
    """One output folder to (re)write. Construction checks the target (call it before simulating, so a
    bad --out fails fast); `with folder as tmp:` yields the temporary folder to write files into and,
    when the block ends without an exception, swaps it into place. `protect` lists input files (the
    scenario, a trace) the folder must not contain. `keep_foreign` (a sweep's checkpoints): files kvsim did
    not write in a folder it did (a file browser's `.DS_Store`) are tolerated and moved, untouched, into
    the new folder."""

    def __init__(self, path: str | Path, command: str, protect: Iterable[str | Path | None] = (),
                 keep_foreign: bool = False) -> None:
        self.given = Path(path)
        self.keep_foreign = keep_foreign
        self.command = command
        self.protect = [Path(os.path.realpath(p)) for p in protect if p is not None]
        self.path = Path(os.path.realpath(self.given))
        self._tmp: Path | None = None
        self.check()

    # ---- checks -------------------------------------------------------------------------
    def check(self) -> None:
        """Raise KvsimError unless kvsim may create or replace the folder."""
        shown = self.given
        cwd = Path(os.path.realpath(os.getcwd()))
        if self.path == cwd or self.path in cwd.parents:
            raise KvsimError(f"{shown}: refusing to write output into the working directory or a parent"
                             " of it; choose a new folder, e.g. --out runs/NAME")
        for p in self.protect:
            if self.path == p or self.path in p.parents:
                raise KvsimError(f"{shown}: output folder would contain the input {p.name}; "
                                 "choose another --out")
        if os.path.lexists(self.path) and not self.path.is_dir():
            raise KvsimError(f"{shown}: exists and is not a folder")
        if self.path.is_dir():
            foreign = self._foreign_entry()
            if foreign is not None:
                raise KvsimError(f"{shown}: {foreign}; kvsim replaces only folders it wrote itself "
                                 "(choose another --out, or move the files away)")
        self._check_parent(shown)

    def _check_parent(self, shown: Path) -> None:
        ancestor = self.path.parent
        while not ancestor.exists():
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise KvsimError(f"{shown}: {ancestor} is not a folder")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise KvsimError(f"{shown}: cannot write in {ancestor}: permission denied")

    def _foreign_entry(self) -> str | None:
        """Why the existing folder is not kvsim's to replace, or None when it is (empty, or holding exactly
        the unchanged files its manifest lists)."""
        try:
            names = sorted(os.listdir(self.path))
        except OSError as exc:
            return f"cannot list the folder ({exc.strerror})"
        if not names:
            return None
        if MANIFEST not in names:
            return f"holds {names[0]!r} and no {MANIFEST} (not a kvsim output folder)"
        listed = read_manifest(self.path)
        if listed is None:
            return f"{MANIFEST} is not one kvsim wrote"
        for name in names:
            if name == MANIFEST:
                continue
            if name not in listed:
                if self.keep_foreign:
                    continue
                return f"holds {name!r}, which kvsim did not write there"
            entry = self.path / name
            if entry.is_symlink() or not entry.is_file():
                return f"{name!r} is no longer the file kvsim wrote"
            if file_sha256(entry) != listed[name]:
                return f"{name!r} was changed after kvsim wrote it"
        return None

    # ---- writing ------------------------------------------------------------------------
    def __enter__(self) -> Path:
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KvsimError(f"{self.given}: cannot create output folder: {exc.strerror}") from None
        remove_stale_temps(parent, self.path.name)
        self._old_signals = catch_signals()
        try:
            with signals_held():  # (a signal between creating the folder and recording it would orphan it)
                self._tmp = _make_temp(parent, self.path.name)
        except BaseException as exc:  # an OSError, or a signal held back above and delivered now
            if self._tmp is not None:
                _discard(self._tmp)
                self._tmp = None
            restore_signals(self._old_signals)
            if isinstance(exc, OSError):
                raise KvsimError(f"{self.given}: cannot create output folder: {exc.strerror}") from None
            raise
        return self._tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        tmp = self._tmp
        try:
            if exc_type is None:
                raise_swallowed()  # (one Python swallowed while the run went on: the old output stays)
                self._commit(tmp)
        except BaseException:
            _discard(tmp)
            raise
        else:
            if exc_type is not None:
                _discard(tmp)
        finally:
            self._tmp = None
            restore_signals(self._old_signals)

    def _commit(self, tmp: Path) -> None:
        (tmp / TEMP_MARKER).unlink(missing_ok=True)
        files = sorted(os.listdir(tmp))
        for name in files:
            if not (tmp / name).is_file() or (tmp / name).is_symlink():
                raise KvsimError(f"internal error: output {name!r} is not a plain file")
        doc = {"signature": SIGNATURE, "command": self.command, "kvsim_version": __version__,
               "files": {name: file_sha256(tmp / name) for name in files}}
        (tmp / MANIFEST).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        with signals_held():
            self.check()  # again: the folder may have changed while the run simulated
            existing = self.path.is_dir()
            mode = self.path.stat().st_mode & 0o7777 if existing else 0o777 & ~_umask()
            os.chmod(tmp, mode)
            if not existing:
                os.rename(tmp, self.path)
                _live_temps.discard(tmp)
                return
            if self.keep_foreign:
                _move_foreign(self.path, tmp)
            try:
                old = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.old-", dir=self.path.parent))
                os.rmdir(old)
                os.rename(self.path, old)
                try:
                    os.rename(tmp, self.path)
                except BaseException:
                    os.rename(old, self.path)
                    raise
                _live_temps.discard(tmp)
            except BaseException:
                if self.keep_foreign:  # (tmp is discarded next: put the files kvsim did not write back)
                    _move_foreign(tmp, self.path)
                raise
            _remove_own(old)


def read_manifest(folder: Path) -> dict[str, str] | None:
    """file name -> SHA-256 from folder's manifest, or None if it is missing or not kvsim's."""
    path = folder / MANIFEST
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _MANIFEST_MAX_BYTES:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("signature") != SIGNATURE:
        return None
    files = doc.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return None
    return {str(k): v for k, v in files.items() if "/" not in str(k) and str(k) not in ("", ".", "..")}


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _discard(tmp: Path | None) -> None:
    """Remove a temporary folder of our own, signals held so an interrupt cannot leave half of it."""
    if tmp is None:
        return
    with signals_held():
        shutil.rmtree(tmp, ignore_errors=True)
        _live_temps.discard(tmp)


TEMP_MARKER = ".kvsim-tmp"
"""A file in each temporary folder while it is written: kvsim's signature, the writing process, its host
and PID namespace (remove_stale_temps reads it). Removed before the manifest is written."""
TEMP_SIGNATURE = "kvsim temporary output folder v1"
STALE_EMPTY_S = 60.0
"""An empty temporary folder of a dead kvsim process is removed once it is this many seconds old (a live
one writes its marker within microseconds of creating it)."""
_live_temps: set[Path] = set()
"""This process's temporary folders not yet renamed into place or removed: removed at exit, whatever
path the process leaves by (a signal between two statements of the cleanup included)."""


def _make_temp(parent: Path, name: str) -> Path:
    """A new temporary folder `.NAME.tmp-PID-XXXXXXXX` in parent, recorded in _live_temps, with its marker."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-{os.getpid()}-", dir=parent))
    _live_temps.add(tmp)
    try:
        doc = {"signature": TEMP_SIGNATURE, "pid": os.getpid(), "host": socket.gethostname(),
               "pid_ns": _pid_namespace()}
        (tmp / TEMP_MARKER).write_text(json.dumps(doc) + "\n", encoding="utf-8")
    except BaseException:  # (a full disk: the caller never learns tmp, so remove it here)
        _discard(tmp)
        raise
    return tmp


@atexit.register
def _remove_live_temps() -> None:
    """At exit: remove the temporary folders still recorded. A signal arriving meanwhile waits for that, then
    ends the process as its default action does (raised as KeyboardInterrupt inside an atexit callback it
    would only print a traceback)."""
    with signals_held(default_after=True):
        for tmp in list(_live_temps):
            _discard(tmp)


def remove_stale_temps(parent: Path, name: str) -> list[str]:
    """Remove the temporary siblings `.NAME.tmp-PID-*` of an output folder that a kvsim process left when it
    was killed (SIGKILL, a power cut) and return their names. Only folders kvsim wrote: the process named
    in the folder's name is gone from this host, and the folder holds kvsim's marker naming that process,
    this host and this PID namespace, or is empty and older than STALE_EMPTY_S. Anything else is left
    alone."""
    pattern = re.compile(rf"\.{re.escape(name)}\.tmp-(\d+)-[A-Za-z0-9_]+$")
    removed: list[str] = []
    try:
        entries = os.listdir(parent)
    except OSError:
        return removed
    for entry in entries:
        m = pattern.match(entry)
        if m is None:
            continue
        folder, pid = parent / entry, int(m.group(1))
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid() \
                    or _pid_alive(pid):
                continue
            left = _abandoned(folder, pid)
            if left == "empty":
                os.rmdir(folder)  # (not rmtree: whatever was put there since it was listed stays)
            elif left == "marked":
                shutil.rmtree(folder)
            else:
                continue
        except OSError:
            continue
        removed.append(entry)
    return removed


def _abandoned(folder: Path, pid: int) -> str | None:
    """"empty" (and older than STALE_EMPTY_S), "marked" (kvsim's marker naming pid and this host), or None:
    not known to be what a dead kvsim process left."""
    names = os.listdir(folder)
    if not names:
        return "empty" if time.time() - folder.stat().st_mtime > STALE_EMPTY_S else None
    marker = folder / TEMP_MARKER
    if TEMP_MARKER not in names or marker.is_symlink() or not marker.is_file() \
            or marker.stat().st_size > _MANIFEST_MAX_BYTES:
        return None
    try:
        doc = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    mine = isinstance(doc, dict) and doc.get("signature") == TEMP_SIGNATURE and doc.get("pid") == pid \
        and doc.get("host") == socket.gethostname() and doc.get("pid_ns") == _pid_namespace()
    return "marked" if mine else None


def _pid_namespace() -> str:
    """This process's PID namespace ("pid:[4026531836]" on Linux, "" where there is none to read): two
    containers on one host may share a hostname and a folder, and a PID of one is not visible in the other
    (dead to _pid_alive while the process lives)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (EPERM: another user's process)
        return True
    return True


def _remove_own(old: Path) -> None:
    """Delete a moved-aside output folder: the files its manifest lists, the manifest, then the folder.
    Anything else found there (it was checked just before) stays, and so does the folder."""
    listed = read_manifest(old) or {}
    for name in (*listed, MANIFEST):
        try:
            (old / name).unlink()
        except FileNotFoundError:
            pass
    try:
        os.rmdir(old)
    except OSError:
        pass


def _move_foreign(folder: Path, tmp: Path) -> None:
    """Move the entries of folder its manifest does not list (files kvsim did not write) into tmp."""
    listed = read_manifest(folder) or {}
    for name in os.listdir(folder):
        if name != MANIFEST and name not in listed and not os.path.lexists(tmp / name):
            os.rename(folder / name, tmp / name)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def folder_for(out: str | Path | OutputFolder, command: str) -> OutputFolder:
    """An OutputFolder for out (a path is checked now)."""
    return out if isinstance(out, OutputFolder) else OutputFolder(out, command)
