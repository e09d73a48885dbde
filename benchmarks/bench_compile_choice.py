"""The measured prototype behind the compiler choice (docs/speed.md): one minimal decode loop, four ways.

    .venv/bin/python benchmarks/bench_compile_choice.py

benchmarks/compile_choice/decode_loop.py is a continuous-batching decode loop with kvsim's shape (admit while
blocks and sequence slots allow, time the batch from its context sum, grow a block at each boundary, free a
finished sequence's blocks), over plain Python lists. It runs as:

- python: the interpreter;
- cython: the same file compiled by Cython (what setup.py does to kvsim's hot modules);
- cython-typed: decode_loop_typed.py, the same loop with Cython's pure-Python-mode C types on its locals;
- numba: decode_loop.py under numba.njit (only if numba is installed; its import and compile time are
  printed too, since a `kvsim run` pays both in every process unless cached).

Both Cython builds go to a temporary folder (needs Cython and a C compiler). Per way: CPU seconds, µs per
iteration, the ratio to python, and the loop's result (the same in all four: iterations and simulated end).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "compile_choice"
ARGS = (20_000, 512, 128, 256, 100_000, 16, 0.01, 1e-7)
"""requests, prompt, output, max_num_seqs, blocks, block size, step time = a + b * context sum."""

BUILD = """
from setuptools import setup
from Cython.Build import cythonize
setup(name="proto", ext_modules=cythonize(["decode_loop_cy.py", "decode_loop_typed.py"],
      compiler_directives={"language_level": 3}, quiet=True), script_args=["build_ext", "--inplace", "-q"])
"""


def timed(fn) -> tuple[float, tuple]:
    t0 = time.process_time()
    out = fn(*ARGS)
    return time.process_time() - t0, out


def main() -> None:
    rows = []
    sys.path.insert(0, str(HERE))
    import decode_loop

    rows.append(("python", *timed(decode_loop.run), 0.0))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "decode_loop_cy.py").write_text((HERE / "decode_loop.py").read_text())
        (Path(tmp) / "decode_loop_typed.py").write_text((HERE / "decode_loop_typed.py").read_text())
        (Path(tmp) / "build.py").write_text(BUILD)
        built = subprocess.run([sys.executable, "build.py"], cwd=tmp, capture_output=True, text=True)
        if built.returncode == 0:
            sys.path.insert(0, tmp)
            for label, mod in (("cython", "decode_loop_cy"), ("cython-typed", "decode_loop_typed")):
                rows.append((label, *timed(importlib.import_module(mod).run), 0.0))
        else:
            print(f"cython: not built ({built.stderr.strip().splitlines()[-1:]})")
    try:
        t0 = time.process_time()
        import numba

        t_import = time.process_time() - t0
        t0 = time.process_time()
        jit = numba.njit(decode_loop.run)
        jit(10, 16, 4, 4, 1_000, 16, 0.01, 1e-7)  # compile
        t_compile = time.process_time() - t0
        cpu, out = timed(jit)
        rows.append(("numba", cpu, out, t_import + t_compile))
        print(f"numba: import {t_import:.2f} s CPU, compile {t_compile:.2f} s CPU (per process, uncached)")
    except ImportError:
        print("numba: not installed (pip install numba to include it)")
    base = rows[0][1]
    print(f"{'way':14} {'CPU s':>8} {'us/iter':>9} {'vs python':>10}  result")
    for label, cpu, (its, end), _ in rows:
        print(f"{label:14} {cpu:8.3f} {cpu / its * 1e6:9.2f} {base / cpu:9.1f}x  "
              f"{its} iterations, end {end!r}")


if __name__ == "__main__":
    main()
