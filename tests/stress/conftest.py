"""pytest wiring for the stress check: tests/stress on sys.path (the project runs pytest with
--import-mode=importlib, so sibling modules are not importable otherwise)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
