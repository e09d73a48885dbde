"""Run one fuzz case against the `kvsim` CLI and classify what happened.

The contract every input must meet (issue 9): either a valid run (exit 0), or exit 2 with exactly one
line on stderr that starts with "error: ", no Python traceback, no output folder left behind, no user
file touched, within bounded time and memory.

A case (`Case`) is a kvsim argument list (or, in API mode, a Python call of kvsim.run / load / compare /
sweep / plan, whose KvsimError counts as the error line and exit 2) plus the files to create in a fresh
folder. The parent process
(pytest, or `report.py`) lays the folder out, then hands the case to a long-lived worker subprocess
(`Worker`), which runs `kvsim.cli.main()` in-process with a patched sys.argv, the case folder as its
working directory, fd 1 and 2 redirected to capture files, a per-case wall-clock alarm and an address-space
limit. Running in-process keeps a case to milliseconds (no Python start, pandas is imported once); running
in a subprocess means a case that hangs in C code, blows up memory or kills the interpreter costs one
worker restart, never the test session. The parent then compares the folder with what it created and
classifies the result (`classify`) into an `Outcome`:

    ok              exit 0
    error           exit 2, exactly one stderr line starting "error: "
and the failures (FAILURE_KINDS):
    traceback       a Python traceback (an exception escaped main())
    multi-line-error, bad-error-line, long-error, wrong-exit-code
    hang            over the per-case time limit
    memory          MemoryError, or the worker died (killed by the OOM killer, a segfault)
    leftover-output a new file or folder left in the case folder after an error
    data-loss       a file the case created (a "user file") was deleted or changed
    accepted-nonsense  exit 0 for an input the strategy marks as must-fail
    rejected-valid  a one-line error for an input the strategy marks as must-pass
    leaked-content  output that quotes what the case forbids (e.g. a line of /etc/passwd)
    markup-rendered rich markup / emoji codes in user input not printed literally
    unescaped-control  an ESC character in the output: user input echoed with its terminal escape
                    sequences (kvsim itself prints no colour here: no terminal, NO_COLOR=1)
    internal-error  an "internal error" one-liner: a check validate should have made
    validate-mismatch  `kvsim validate` accepts what `kvsim run` then rejects (or the reverse)
    missing-output  exit 0 without the files the command must write (summary.json), or an API call that
                    returned another type than the case expects
    (an API call that writes a file in the case folder is a leftover-output; an empty error message, or
    one holding a carriage return, a bad-error-line; a command marked `progress` (kvsim plan) may print
    progress lines to stderr before its one error line)
    warning         a Python warning printed by a successful run

The code lives in cases.py (Case, Link, Outcome, the outcome kinds), worker.py (the worker subprocess
and its limits), runner.py (run_case: lay out, run, classify), outcome.py (snapshots, classify,
failure signatures); this module keeps the checking and tallying, re-exports the rest, and is the
script entry.

Script use (the worker is started the same way, from worker.py, with --worker):

    python tests/fuzz/harness.py ARGS...   # one ad-hoc case: `kvsim ARGS` in an empty temp folder
"""

from __future__ import annotations

import os
import sys
from collections import Counter, defaultdict

from cases import ERROR, FAILURE_KINDS, OK, Case, Link, Outcome
from outcome import MAX_ERROR_CHARS, classify, exception_name, origin, signature, snapshot
from runner import run_case
from worker import DEBUG, MEMORY_LIMIT_BYTES, REPO, RESTART_EVERY, TIME_LIMIT_S, Worker, worker_main

__all__ = [
    "DEBUG", "ERROR", "EXAMPLES", "FAILURE_KINDS", "KEEP_PER_SIGNATURE", "MAX_ERROR_CHARS",
    "MEMORY_LIMIT_BYTES", "OK", "REPO", "RESTART_EVERY", "SURVEY", "TALLY", "TIME_LIMIT_S", "Case",
    "Link", "Outcome", "Worker", "check", "classify", "exception_name", "origin", "record", "run_case",
    "signature", "snapshot", "tally_table", "worker_main",
]


# ---------------------------------------------------------------------------------------------------
# Checking and tallying (shared by the pytest suite and report.py)

TALLY: Counter[tuple[str, str]] = Counter()
"""(category, outcome kind) -> cases seen in this process."""
EXAMPLES: dict[tuple[str, str], list[tuple[Case, Outcome]]] = defaultdict(list)
"""(kind, signature) -> the first few failing cases with that signature."""
KEEP_PER_SIGNATURE = 3


def record(case: Case, outcome: Outcome) -> None:
    TALLY[(case.category, outcome.kind)] += 1
    if outcome.failed:
        bucket = EXAMPLES[(outcome.kind, signature(outcome, case))]
        if len(bucket) < KEEP_PER_SIGNATURE:
            bucket.append((case, outcome))


SURVEY = os.environ.get("KVSIM_FUZZ_SURVEY", "") not in ("", "0")
"""Survey mode: `check` records failures without raising, so one pytest run counts every outcome (the
tests then pass whatever happened: for measuring, never for CI)."""


def check(case: Case, worker: Worker) -> Outcome:
    """Run the case, record it, and fail (AssertionError with a reproduction) on a contract breach."""
    outcome = run_case(case, worker)
    record(case, outcome)
    if outcome.failed and not SURVEY:
        raise AssertionError(f"{outcome.summary()}\n--- reproduction ---\n{case.repro()}\n"
                             f"--- origin: {origin(outcome)}")
    return outcome


def tally_table(tally: Counter[tuple[str, str]]) -> list[str]:
    """The tally as text rows: one per category, columns cases, ok, error and each failure kind seen."""
    cats = sorted({c for c, _ in tally})
    kinds = [OK, ERROR] + [k for k in FAILURE_KINDS if any(kind == k for _, kind in tally)]
    width = max([len("category"), len("total")] + [len(c) for c in cats])
    head = f"{'category':<{width}} {'cases':>6} " + " ".join(f"{k:>{max(5, len(k))}}" for k in kinds)
    rows = [head, "-" * len(head)]
    for cat in [*cats, "total"]:
        counts = {k: sum(n for (c, kind), n in tally.items() if kind == k and cat in (c, "total"))
                  for k in kinds}
        rows.append(f"{cat:<{width}} {sum(counts.values()):>6} "
                    + " ".join(f"{counts[k]:>{max(5, len(k))}}" for k in kinds))
    failed = sum(n for (_, kind), n in tally.items() if kind not in (OK, ERROR))
    total = sum(tally.values())
    rows.append(f"{total} cases, {total - failed} kept the contract, {failed} did not")
    return rows


# ---------------------------------------------------------------------------------------------------
# Script entry


def _adhoc(argv: list[str]) -> int:
    """`harness.py ARGS`: run `kvsim ARGS` in an empty temp folder and print the outcome."""
    worker = Worker()
    try:
        outcome = run_case(Case("adhoc", argv), worker)
    finally:
        worker.close()
    print(outcome.summary())
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker_main(int(sys.argv[2]))
    else:
        sys.exit(_adhoc(sys.argv[1:]))
