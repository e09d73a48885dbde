"""pytest wiring for tests/kvcache: this folder on sys.path (the project runs pytest with
--import-mode=importlib, so sibling modules are not importable otherwise): its tests share queue_model.py."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
