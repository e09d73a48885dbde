"""kvsim/native.py: which hot modules run compiled, the pure-Python fallback, and their identity.

The identity test is the issue's CI check: every example scenario (workloads/*.yaml, requests capped) run
with the compiled hot paths and with KVSIM_PURE_PYTHON=1 gives the same summary.json, Parquet files and
report, byte for byte (run.json and the manifest hold wall timings and are left out).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from kvsim import native

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "workloads").glob("*.yaml"))
CAP = 300
"""Requests per example in the identity check (the full files take minutes each in pure Python)."""
TIMED = {"run.json", ".kvsim-manifest.json"}


def _listed() -> list[str]:
    lines = (ROOT / "kvsim" / "native_modules.txt").read_text().splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def _python(code: str, pure: bool) -> str:
    env = dict(os.environ)
    env.pop(native.ENV, None)
    if pure:
        env[native.ENV] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_every_listed_module_exists_and_defines_no_pydantic_model():
    for name in _listed():
        source = ROOT.joinpath(*name.split(".")).with_suffix(".py")
        assert source.is_file(), name
        assert "pydantic" not in source.read_text(), f"{name}: pydantic cannot read compiled methods"


def test_finder_loads_the_source_when_pure_is_asked(tmp_path):
    (tmp_path / "hot.py").write_text("X = 1\n")
    (tmp_path / ("hot" + EXTENSION_SUFFIXES[0])).write_bytes(b"not a real extension")
    digest = hashlib.sha256(b"X = 1\n").hexdigest()
    fresh = native.SourceFirst({"kvsim.hot": digest}, pure=False)
    assert fresh.find_spec("kvsim.hot", [str(tmp_path)]) is None  # the path finder then loads the extension
    assert fresh.compiled == ["kvsim.hot"]
    pure = native.SourceFirst({"kvsim.hot": digest}, pure=True)
    assert pure.find_spec("kvsim.hot", [str(tmp_path)]).origin == str(tmp_path / "hot.py")
    assert pure.stale == []


def test_finder_runs_an_edited_module_as_python(tmp_path):
    (tmp_path / "hot.py").write_text("X = 2\n")  # edited after the build
    (tmp_path / ("hot" + EXTENSION_SUFFIXES[0])).write_bytes(b"")
    finder = native.SourceFirst({"kvsim.hot": hashlib.sha256(b"X = 1\n").hexdigest()}, pure=False)
    assert finder.find_spec("kvsim.hot", [str(tmp_path)]).origin == str(tmp_path / "hot.py")
    assert finder.stale == ["kvsim.hot"]


def test_finder_runs_a_module_as_python_when_its_pxd_changed(tmp_path):
    (tmp_path / "hot.py").write_text("X = 1\n")
    (tmp_path / "hot.pxd").write_text("cdef int Y\n")  # the types were edited after the build
    (tmp_path / ("hot" + EXTENSION_SUFFIXES[0])).write_bytes(b"")
    finder = native.SourceFirst({"kvsim.hot": hashlib.sha256(b"X = 1\n").hexdigest()}, pure=False)
    assert finder.find_spec("kvsim.hot", [str(tmp_path)]).origin == str(tmp_path / "hot.py")
    assert finder.stale == ["kvsim.hot"]
    both = hashlib.sha256(b"X = 1\n" + b"\0pxd\0" + b"cdef int Y\n").hexdigest()
    fresh = native.SourceFirst({"kvsim.hot": both}, pure=False)
    assert fresh.find_spec("kvsim.hot", [str(tmp_path)]) is None


def test_finder_runs_a_module_as_python_when_a_module_it_cimports_is_stale(tmp_path):
    pkg = tmp_path / "kvsim"
    pkg.mkdir()
    for leaf, text in (("base", "X = 1\n"), ("sub", "Y = 1\n")):
        (pkg / f"{leaf}.py").write_text(text)
        (pkg / (leaf + EXTENSION_SUFFIXES[0])).write_bytes(b"")
    (pkg / "sub.pxd").write_text("from kvsim.base cimport Base\n")  # sub's extension type subclasses Base
    sub = hashlib.sha256(b"Y = 1\n" + b"\0pxd\0" + b"from kvsim.base cimport Base\n").hexdigest()
    fresh = {"kvsim.base": hashlib.sha256(b"X = 1\n").hexdigest(), "kvsim.sub": sub}
    assert native.SourceFirst(fresh, pure=False).find_spec("kvsim.sub", [str(pkg)]) is None
    finder = native.SourceFirst({**fresh, "kvsim.base": "edited"}, pure=False)  # base edited since
    assert finder.find_spec("kvsim.sub", [str(pkg)]).origin == str(pkg / "sub.py")
    assert finder.stale == ["kvsim.sub"]


def test_finder_runs_a_module_as_python_when_a_module_it_cimports_has_no_extension(tmp_path):
    pkg = tmp_path / "kvsim"
    pkg.mkdir()
    (pkg / "base.py").write_text("X = 1\n")  # listed in the manifest, its extension gone
    (pkg / "sub.py").write_text("Y = 1\n")
    (pkg / ("sub" + EXTENSION_SUFFIXES[0])).write_bytes(b"")
    (pkg / "sub.pxd").write_text("from kvsim.base cimport Base\n")
    sub = hashlib.sha256(b"Y = 1\n" + b"\0pxd\0" + b"from kvsim.base cimport Base\n").hexdigest()
    manifest = {"kvsim.base": hashlib.sha256(b"X = 1\n").hexdigest(), "kvsim.sub": sub}
    finder = native.SourceFirst(manifest, pure=False)
    assert finder.find_spec("kvsim.sub", [str(pkg)]).origin == str(pkg / "sub.py")


def test_finder_decides_a_cimport_cycle_without_recursing_forever(tmp_path):
    pkg = tmp_path / "kvsim"
    pkg.mkdir()
    manifest = {}
    for leaf, other in (("a", "b"), ("b", "a")):
        text, pxd = f"{leaf} = 1\n", f"from kvsim.{other} cimport T\n"
        (pkg / f"{leaf}.py").write_text(text)
        (pkg / f"{leaf}.pxd").write_text(pxd)
        (pkg / (leaf + EXTENSION_SUFFIXES[0])).write_bytes(b"")
        manifest[f"kvsim.{leaf}"] = hashlib.sha256(text.encode() + b"\0pxd\0" + pxd.encode()).hexdigest()
    assert native.SourceFirst(manifest, pure=False).find_spec("kvsim.a", [str(pkg)]) is None


def test_every_kvsim_cimport_in_the_package_is_one_the_finder_reads():
    """The finder's staleness rule reads `from kvsim.x cimport Y` lines only: no other spelling in kvsim."""
    for pxd in (ROOT / "kvsim").rglob("*.pxd"):
        for line in pxd.read_text(encoding="utf-8").splitlines():
            if "cimport" in line and "kvsim" in line:
                assert native._cimports_in(line) != [], f"{pxd}: {line}"


def test_finder_leaves_uncompiled_and_foreign_modules_alone(tmp_path):
    (tmp_path / "cold.py").write_text("")
    finder = native.SourceFirst({}, pure=True)
    assert finder.find_spec("kvsim.cold", [str(tmp_path)]) is None
    assert finder.find_spec("numpy.linalg", [str(tmp_path)]) is None
    assert finder.find_spec("kvsim", None) is None


def test_pure_python_env_loads_every_hot_module_from_source():
    code = ("import importlib, kvsim.native as n; names = [l.split('#')[0].strip() for l in "
            "open(n.PACKAGE / 'native_modules.txt') if l.split('#')[0].strip()]; "
            "files = [importlib.import_module(m).__file__ for m in names]; "
            "print(n.state(), all(f.endswith('.py') for f in files))")
    assert _python(code, pure=True) == "pure True"


def _built() -> dict[str, str]:
    try:
        return json.loads(native.MANIFEST.read_text())
    except (OSError, ValueError):
        return {}


def test_the_hot_modules_are_compiled_where_a_compiler_exists():
    """The README's install compiles them (setup.py); a missing one means the build failed quietly."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: kvsim runs its hot paths as Python")
    built = _built()
    if not built and not (ROOT / "build").exists() and not any(ROOT.glob("kvsim/**/*.so")):
        pytest.skip("kvsim was not installed by setup.py here (no manifest, no extension)")
    assert sorted(built) == sorted(_listed())
    code = ("import importlib, kvsim.native as n; import kvsim.engine.scheduler as s; "
            "print(n.state(), s.__file__.endswith('.py'))")
    assert _python(code, pure=False) == "compiled False"


def _run(example: Path, out: Path, pure: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(native.ENV, None)
    if pure:
        env[native.ENV] = "1"
    cmd = [sys.executable, "-m", "kvsim.cli", "run", str(example), "--set", f"simulation.requests={CAP}",
           "--no-plots", "--no-progress", "--out", str(out)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=out.parent)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_identical_compiled_and_pure(example, tmp_path):
    if native.state() != "compiled" or not _built():
        pytest.skip(f"the hot paths are not compiled here ({native.state()}): nothing to compare")
    a, b = _run(example, tmp_path / "compiled", False), _run(example, tmp_path / "pure", True)
    assert (a.returncode, a.stderr) == (b.returncode, b.stderr)
    assert a.returncode == 0, a.stderr
    names = sorted(p.name for p in (tmp_path / "compiled").iterdir() if p.name not in TIMED)
    assert names == sorted(p.name for p in (tmp_path / "pure").iterdir() if p.name not in TIMED)
    assert {"summary.json", "requests.parquet", "timeline.parquet"} <= set(names)
    for name in names:
        assert (tmp_path / "compiled" / name).read_bytes() == (tmp_path / "pure" / name).read_bytes(), name


def test_notice_only_when_nothing_is_built_and_python_was_not_asked(monkeypatch):
    monkeypatch.setattr(native, "_finder", native.SourceFirst({}, pure=False))
    assert native.state() == "not built"
    assert native.notice().startswith("kvsim: note: the compiled hot paths are not built")
    monkeypatch.setattr(native, "_finder", native.SourceFirst({}, pure=True))
    assert native.state() == "pure" and native.notice() is None
    stale = native.SourceFirst({"kvsim.hot": "0" * 64}, pure=False)
    stale.stale.append("kvsim.hot")
    monkeypatch.setattr(native, "_finder", stale)
    assert native.state() == "stale" and native.notice() is None  # (a developer's edit: silently Python)
    monkeypatch.setattr(native, "_finder", native.SourceFirst({"kvsim.hot": "0" * 64}, pure=False))
    assert native.state() == "compiled" and native.notice() is None
