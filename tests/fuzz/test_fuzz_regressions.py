"""Fixed cases for every item of issue 9 (alias bomb, deep nesting, /etc/passwd as a trace, `true` as a
block size, NaN and infinite numbers, zipf_s=12, num_key_value_heads: 0, data loss through --out, ...).
See regressions.py for the cases themselves."""

from __future__ import annotations

import pytest
from harness import check
from regressions import REGRESSIONS


@pytest.mark.parametrize("case", list(REGRESSIONS.values()), ids=list(REGRESSIONS))
def test_regression(worker, case):
    check(case, worker)
