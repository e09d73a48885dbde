"""pytest wiring for the fuzz suite: tests/fuzz on sys.path (the project runs pytest with
--import-mode=importlib, so sibling modules are not importable otherwise), one shared worker process
for the whole session, and a tally of every case's outcome at the end of the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import profile_settings  # noqa: E402


@pytest.fixture(scope="session")
def worker():
    """The long-lived kvsim worker every fuzz test hands its cases to."""
    w = harness.Worker()
    yield w
    w.close()


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest hook
    if not harness.TALLY:
        return
    terminalreporter.section(f"kvsim fuzz tally (profile {profile_settings.PROFILE})")
    for line in harness.tally_table(harness.TALLY):
        terminalreporter.write_line(line)
    if harness.SURVEY and harness.EXAMPLES:
        terminalreporter.write_line("survey mode (KVSIM_FUZZ_SURVEY=1): failures were recorded, not raised")
        for (kind, sig), examples in sorted(harness.EXAMPLES.items()):
            terminalreporter.write_line(f"  [{kind}] {sig}  e.g. {examples[0][0].why[:80]!r}")
