"""The notebooks in notebooks/ run top to bottom in an IPython kernel (nbclient, as Jupyter runs them), and
their plots render inline (an image output, not a headless backend forced by the notebook)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PLOTTING = {"capacity_planning.ipynb", "prefix_cache_tiers.ipynb", "kvsim_quickstart.ipynb"}


def _runner():
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "notebooks" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_a_kernel(path, tmp_path):
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = _runner().execute(path, ROOT)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    if path.name in PLOTTING:
        assert images, f"{path.name}: no inline plot"


def test_committed_notebooks_hold_their_outputs():
    """The repository keeps each notebook executed (notebooks/run_all.py), plots included."""
    import json

    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(c.get("execution_count") for c in code), f"{path.name} is not executed"
        if path.name in PLOTTING:
            outputs = [o for c in code for o in c.get("outputs", [])]
            assert any("image/png" in o.get("data", {}) for o in outputs), path.name


def test_there_are_notebooks():
    assert {p.name for p in NOTEBOOKS} >= PLOTTING
    assert "matplotlib.use(" not in "".join(p.read_text() for p in NOTEBOOKS)
    assert sys.executable
