"""Execute every notebook here in place, saving its outputs (plots included), as the repository keeps them:

    .venv/bin/python notebooks/run_all.py          # needs the notebooks extra: pip install -e '.[notebooks]'

The tests (tests/test_notebooks.py) execute them the same way into a scratch copy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def execute(path: Path, cwd: Path, timeout_s: int = 600) -> nbformat.NotebookNode:
    """The notebook at `path` run top to bottom by an IPython kernel working in `cwd`."""
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
                   ).execute()
    return nb


def main() -> int:
    for path in sorted(HERE.glob("*.ipynb")):
        print(f"executing {path.name}", flush=True)
        nbformat.write(execute(path, HERE.parent), path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
