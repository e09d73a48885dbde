"""The worker's API mode classifies a Python call as the command line's contract asks: a return is a
valid run (of the expected type), a KvsimError one error line, anything else a failure kind."""

from __future__ import annotations

import pytest
from cases import Case
from runner import run_case

CALLS = [
    ("result = kvsim.load('s.yaml')", "pass", "Scenario", "ok", ""),
    ("result = kvsim.load('s.yaml')", "pass", "Result", "missing-output", "expected a Result"),
    ("raise kvsim.KvsimError('s.yaml: bad thing')", "fail", "", "error", "error: s.yaml: bad thing"),
    ("raise kvsim.KvsimError('bad\\nthing')", "any", "", "multi-line-error", "2 stderr lines"),
    ("raise kvsim.KvsimError('')", "any", "", "bad-error-line", "error: "),
    ("raise kvsim.KvsimError('internal error, please report it')", "any", "", "internal-error", "internal"),
    ("raise TypeError('x')", "any", "", "traceback", "TypeError: x"),
    ("raise SystemExit(2)", "any", "", "traceback", "the Python API raised SystemExit(2)"),
    ("open('x.txt', 'w').write('x')\nresult = 1", "any", "", "leftover-output", "wrote files: new x.txt"),
    ("result = 1", "fail", "", "accepted-nonsense", ""),
    ("import warnings\nwarnings.warn('w', DeprecationWarning)\nresult = 1", "any", "", "warning", "Warning"),
    ("import warnings\nwarnings.warn('0 done', kvsim.KvsimWarning)\nresult = 1", "any", "", "ok", ""),
    # kvsim's class, not its name: another package's KvsimWarning is a warning like any other
    ("import warnings\nclass KvsimWarning(UserWarning): pass\nwarnings.warn('0 done', KvsimWarning)\n"
     "result = 1", "any", "", "warning", "KvsimWarning: 0 done"),
]


@pytest.mark.parametrize("call, expect, returns, kind, detail", CALLS)
def test_api_mode_classifies_each_outcome(worker, call, expect, returns, kind, detail):
    case = Case("api-mode", [], {"s.yaml": "simulation: {requests: 2}\n"}, expect=expect, call=call,
                returns=returns)
    outcome = run_case(case, worker)
    assert (outcome.kind, detail in outcome.detail) == (kind, True), outcome.summary()
