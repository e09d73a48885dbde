"""The notebooks in notebooks/ run top to bottom (their code cells, in order, in one namespace)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    nb = json.loads(path.read_text())
    namespace: dict = {"__name__": "__notebook__"}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)  # noqa: S102


def test_there_is_a_notebook():
    assert NOTEBOOKS
