"""Builds kvsim's compiled hot paths: the modules of kvsim/native_modules.txt, compiled by Cython at install.

Everything else is in pyproject.toml. The modules stay plain Python (Cython compiles the same .py files), so
where they cannot be compiled (no C compiler, no Cython, KVSIM_PURE_PYTHON=1 at install) kvsim installs and
runs them as Python, with identical results; docs/speed.md says how to tell which runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
LIST = ROOT / "kvsim" / "native_modules.txt"
MANIFEST = "native_manifest.json"
"""Written next to the compiled package: module -> sha256 of the source each extension was compiled from
(kvsim/native.py runs a module as Python when its source no longer matches)."""


CYTHON_MIN = (3, 3, 1)
"""The oldest Cython that compiles the hot paths correctly (pyproject.toml's build requirement agrees)."""


def notice(text: str) -> None:
    print(f"kvsim: {text}", file=sys.stderr)


def hot_modules() -> list[str]:
    """Dotted names of the modules to compile, from kvsim/native_modules.txt (one per line, # comments)."""
    names = []
    for line in LIST.read_text().splitlines():
        name = line.split("#", 1)[0].strip()
        if name:
            names.append(name)
    return names


def source_of(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def digest(module: str) -> str:
    """sha256 of a module's source: the .py, then its augmenting .pxd (Cython types) when it has one; the same
    digest as kvsim/native.py's, which runs a module as Python when it no longer matches."""
    source = source_of(module)
    h = hashlib.sha256(source.read_bytes())
    pxd = source.with_suffix(".pxd")
    if pxd.is_file():
        h.update(b"\0pxd\0" + pxd.read_bytes())
    return h.hexdigest()


def extensions() -> list:
    if os.environ.get("KVSIM_PURE_PYTHON") == "1":
        notice("KVSIM_PURE_PYTHON=1: the hot paths are not compiled (pure Python, same results)")
        return []
    try:
        import Cython
        from Cython.Build import cythonize
    except ImportError:
        notice("Cython is not installed: the hot paths are not compiled (pure Python, same results)")
        return []
    version = tuple(int(p) if p.isdigit() else 0 for p in Cython.__version__.split(".")[:3])
    if version < CYTHON_MIN:
        # built by 3.3.0 the scheduler chain crashes (a segfault in Preemption._resize, called by a
        # sparsity sizing; not with 3.3.1, cause not isolated); pyproject.toml's build requirement asks
        # for CYTHON_MIN, this guards a build without isolation
        notice(f"Cython {Cython.__version__} is older than {'.'.join(map(str, CYTHON_MIN))}: the hot paths "
               "are not compiled (pure Python, same results)")
        return []
    from setuptools import Extension

    # -ffp-contract=off: no fused multiply-add (aarch64 compilers fuse by default), so C doubles round as
    # Python's floats do, operation by operation
    exts = [Extension(m, [str(source_of(m).relative_to(ROOT))],
                      extra_compile_args=["-O2", "-g0", "-ffp-contract=off"],
                      optional=True) for m in hot_modules()]
    # annotation_typing off: Cython would otherwise check and convert arguments by their annotations (a
    # `float` argument given a str raises TypeError at the call, where Python runs the function's own check)
    directives = {"language_level": 3, "binding": True, "annotation_typing": False}
    try:
        out = cythonize(exts, compiler_directives=directives, nthreads=os.cpu_count() or 1, quiet=True)
    except Exception:  # a module Cython cannot translate: the others, one by one, that one stays Python
        out = []
        for ext in exts:
            try:
                out += cythonize([ext], compiler_directives=directives, quiet=True)
            except Exception as exc:
                notice(f"{ext.name} could not be compiled ({type(exc).__name__}); it runs as Python")
    for e in out:
        e.optional = True  # no compiler or a failed compile: that module stays Python
    return out


class BuildHotPaths(build_ext):
    """build_ext that compiles in parallel, never fails the install, and writes the manifest of what it
    built."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # (optional extensions already warn one by one; this is the whole step)
            notice(f"the hot paths could not be compiled ({exc}); kvsim runs them as Python (same results)")
        built = {}
        for ext in self.extensions:
            target = Path(self.get_ext_fullpath(ext.name))
            if target.exists():
                built[ext.name] = digest(ext.name)
        if len(built) < len(self.extensions):
            notice(f"compiled {len(built)} of {len(self.extensions)} hot-path modules; the rest run as "
                   "Python")
        dest = Path(self.get_ext_fullpath("kvsim.x")).parent / MANIFEST
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(built, indent=1, sort_keys=True) + "\n")


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildHotPaths})
