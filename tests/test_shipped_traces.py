"""The public traces shipped in workloads/traces/: each file is the one its README lists (bytes, rows,
SHA-256), each folder carries its licence, every example scenario's trace is a shipped file, and nothing
in the project reads the developers' shared folder beside the checkout (a user's clone has none)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from kvsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "workloads" / "traces"
ROW = re.compile(r"^\| (\S+\.(?:csv|jsonl)) \| ([\d,]+) \| ([\d,]+) \| ([0-9a-f]{64}) \|$")


def _listed() -> list[tuple[Path, int, int, str]]:
    out = []
    for readme in sorted(TRACES.glob("*/README.md")):
        for line in readme.read_text(encoding="utf-8").splitlines():
            m = ROW.match(line.strip())
            if m:
                name, rows, size, digest = m.groups()
                out.append((readme.parent / name, int(rows.replace(",", "")), int(size.replace(",", "")),
                            digest))
    return out


def test_every_shipped_trace_is_listed_with_its_checksum():
    listed = _listed()
    files = sorted(p for p in TRACES.glob("*/*") if p.suffix in (".csv", ".jsonl"))
    assert sorted(p for p, *_ in listed) == files and len(files) == 4


@pytest.mark.parametrize("path, rows, size, digest", _listed(), ids=lambda v: getattr(v, "name", ""))
def test_trace_file_matches_its_readme(path, rows, size, digest):
    data = path.read_bytes()
    assert len(data) == size
    assert hashlib.sha256(data).hexdigest() == digest
    lines = len(data.splitlines())
    assert lines - (1 if path.suffix == ".csv" else 0) == rows  # a CSV has a header line


def test_each_trace_folder_has_its_licence():
    assert "CC BY 4.0" in (TRACES / "azure_llm_2023" / "LICENSE.md").read_text(encoding="utf-8")
    assert "Apache License" in (TRACES / "mooncake" / "LICENSE-APACHE").read_text(encoding="utf-8")
    index = (TRACES / "README.md").read_text(encoding="utf-8")
    assert "Splitwise" in index and "Mooncake" in index


def test_example_traces_resolve_inside_the_project():
    used = set()
    for path in sorted((ROOT / "workloads").glob("*.yaml")):
        sc = load_scenario(path)
        if sc.workload.trace is not None:
            trace = Path(sc.workload.trace.path).resolve()
            assert trace.is_relative_to(TRACES), (path.name, trace)
            used.add(trace.name)
    assert used == {"AzureLLMInferenceTrace_conv.csv", "conversation_trace.jsonl", "synthetic_trace.jsonl"}


def test_nothing_reads_the_session_shared_folder():
    """No example, test, benchmark, notebook or doc names the shared folder beside a developer's checkout
    (the pattern is built from its parts, so this file does not name it either)."""
    name = "sh" + "ared"
    pattern = re.compile(rf"\.\./{name}|parents\[2\] / \"{name}\"|parent / \"{name}\"")
    hits = []
    for folder in ("kvsim", "tests", "workloads", "benchmarks", "notebooks", "docs", "calibration", ".ci"):
        for p in (ROOT / folder).rglob("*"):
            keep = p.suffix in (".py", ".yaml", ".md", ".ipynb", ".sh", "")
            if p.is_file() and keep and p != Path(__file__):
                text = p.read_text(encoding="utf-8", errors="replace")
                if pattern.search(text):
                    hits.append(str(p.relative_to(ROOT)))
    hits += ["README.md"] if pattern.search((ROOT / "README.md").read_text(encoding="utf-8")) else []
    assert not hits
