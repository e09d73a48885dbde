"""Compiled hot paths or pure Python: which one each hot module runs as, decided at its import.

setup.py compiles the modules of kvsim/native_modules.txt with Cython (the same .py source) and writes
kvsim/native_manifest.json: module -> sha256 of the source each extension was built from (the .py and its
augmenting .pxd, if any). `install()`
(called by kvsim/__init__.py before any other kvsim module loads) puts `SourceFirst` on the import path; it
loads a hot module from its .py source instead of its extension when

- KVSIM_PURE_PYTHON=1 is set (the pure-Python fallback, asked for), or
- the source no longer matches the manifest (edited since the build: the extension would be stale code),
  or that of a kvsim module its .pxd cimports does not (an extension type's base class that runs as
  Python: the compiled subclass could not load over it).

Otherwise Python's own import finds the extension (it prefers extensions over sources). `state()` says how
the hot modules run (run.json's `hot_paths`); `notice()` is the command line's one-line note when none is
compiled although nobody asked for Python (no C compiler or Cython at install).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from importlib.util import spec_from_file_location
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
MANIFEST = PACKAGE / "native_manifest.json"
ENV = "KVSIM_PURE_PYTHON"


def pure_requested() -> bool:
    """KVSIM_PURE_PYTHON=1: every module runs as Python."""
    return os.environ.get(ENV) == "1"


def _manifest() -> dict[str, str]:
    try:
        data = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _digest(path: str) -> str:
    """sha256 of a module's source: the .py, then its augmenting .pxd (Cython types) when it has one, so an
    edit to either makes the extension stale. setup.py computes the same digest."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    pxd = path[:-3] + ".pxd"
    if os.path.isfile(pxd):
        with open(pxd, "rb") as f:
            h.update(b"\0pxd\0" + f.read())
    return h.hexdigest()


def _cimports(pxd: str) -> list[str]:
    """The kvsim modules an augmenting .pxd cimports (`from kvsim.x cimport Y`); none without a .pxd."""
    if not os.path.isfile(pxd):
        return []
    with open(pxd, encoding="utf-8") as f:
        return _cimports_in(f.read())


def _cimports_in(text: str) -> list[str]:
    return re.findall(r"^from (kvsim(?:\.\w+)+) cimport", text, re.MULTILINE)


class SourceFirst:
    """A meta path finder for kvsim's compiled modules: the .py source when the extension must not run
    (see the module docstring), else nothing (Python's path finder then loads the extension)."""

    def __init__(self, manifest: dict[str, str], pure: bool) -> None:
        self.manifest = manifest
        self.pure = pure
        self.stale: list[str] = []
        """Modules whose source (or that of a module they cimport) changed since they were compiled (run
        as Python)."""
        self.compiled: list[str] = []
        """Modules imported as extensions so far."""
        self._known: dict[str, bool] = {}

    def find_spec(self, name: str, path=None, target=None):
        if path is None or not name.startswith("kvsim."):
            return None
        leaf = name.rpartition(".")[2]
        for entry in path:
            source = os.path.join(entry, leaf + ".py")
            if not os.path.isfile(source):
                continue
            if not any(os.path.exists(os.path.join(entry, leaf + s)) for s in EXTENSION_SUFFIXES):
                return None  # never compiled: the usual import
            if not self.pure:
                if self._fresh(name, source):
                    self.compiled.append(name)
                    return None  # the extension, fresh
                self.stale.append(name)
            return spec_from_file_location(name, source)
        return None

    def _fresh(self, name: str, source: str) -> bool:
        """name's extension is there and matches its source, and so do those of the kvsim modules it
        cimports (each module decided once; a cimport cycle decides nothing on its way round)."""
        known = self._known.get(name)
        if known is not None:
            return known
        self._known[name] = True
        fresh = (self.manifest.get(name) == _digest(source)
                 and any(os.path.exists(source[:-3] + s) for s in EXTENSION_SUFFIXES))
        if fresh:
            root = os.path.dirname(source)
            for _ in range(name.count(".")):
                root = os.path.dirname(root)
            fresh = all(self._fresh(dep, os.path.join(root, *dep.split(".")) + ".py")
                        for dep in _cimports(source[:-3] + ".pxd"))
        self._known[name] = fresh
        return fresh


_finder: SourceFirst | None = None


def install() -> SourceFirst:
    """Put the finder first on sys.meta_path (once per process)."""
    global _finder
    if _finder is None:
        _finder = SourceFirst(_manifest(), pure_requested())
        sys.meta_path.insert(0, _finder)
    return _finder


def state() -> str:
    """'compiled' (the manifest lists modules and none is forced to Python), 'pure' (KVSIM_PURE_PYTHON=1),
    'not built' (no manifest or an empty one: no compiler or no Cython at install) or 'stale' (some compiled
    module's source changed since the build)."""
    finder = install()
    if finder.pure:
        return "pure"
    if not finder.manifest:
        return "not built"
    if finder.stale:
        return "stale"
    return "compiled"


def notice() -> str | None:
    """The command line's one-line notice when nothing runs compiled without being asked to (no C compiler
    or no Cython at install), or None. A stale module (edited since the build) runs as Python silently: a
    developer's edit, whose tests compare the command line's output."""
    if state() == "not built":
        return ("kvsim: note: the compiled hot paths are not built (no C compiler or Cython at install); "
                "running them as Python (same results, slower)")
    return None
