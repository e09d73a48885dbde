"""Markup in everything kvsim echoes: rich markup and emoji codes in names, file names, --vary values
and folder names, which a successful command must print verbatim (`markup_cases`)."""

from __future__ import annotations

from typing import Any

import yaml
from cases import Case
from hypothesis import strategies as st

from .common import MARKUP, TINY_SCENARIO, run_argv, to_yaml
from .hardware import HW_BASE
from .models import TINY_MODEL

# ---------------------------------------------------------------------------------------------------
# Markup in everything kvsim echoes

SAFE_MARKUP = tuple(m for m in MARKUP if "/" not in m) + (":smile:[bold]", "[b]x", ":+1:")
"""Markup usable in a file name (no slash)."""


@st.composite
def markup_cases(draw) -> Case:
    """User-chosen text (names, file names, --vary values, folder names) that holds rich markup or emoji
    codes: a successful command must print it verbatim."""
    mark = draw(st.sampled_from(MARKUP))
    fname = draw(st.sampled_from(SAFE_MARKUP))
    where = draw(st.sampled_from(["run-name", "run-file", "run-out", "validate-file", "compare-vary",
                                  "compare-file", "hitrate-name", "footprint-model", "hardware-list",
                                  "validate-hardware"]))
    files: dict[str, Any] = {"s.yaml": TINY_SCENARIO}
    scenario = f"{fname}.yaml"
    env: dict[str, str] = {}
    if where == "run-name":
        files["s.yaml"] = to_yaml({**yaml.safe_load(TINY_SCENARIO), "name": mark})
        argv, literal = run_argv(), (mark,)
    elif where == "run-file":
        files[scenario] = TINY_SCENARIO
        argv, literal = run_argv(scenario), ()  # the file name is not printed by run; it must still work
    elif where == "run-out":
        argv, literal = ["run", "s.yaml", "--no-progress", "--out", fname], (fname,)
    elif where == "validate-file":
        files[scenario] = TINY_SCENARIO
        argv, literal = ["validate", scenario], (scenario,)
    elif where == "compare-vary":
        second = draw(st.sampled_from([m for m in MARKUP if "," not in m and m != mark] or ["plain"]))
        argv = ["compare", "s.yaml", "--vary", f"name='{mark}','{second}'", "--out", "c"]  # quoted: YAML
        literal = (mark, second) if "," not in mark else ()
    elif where == "compare-file":
        files[scenario] = TINY_SCENARIO
        argv, literal = ["compare", scenario, "--vary", "kv.block_size=16,32", "--out", "c"], (scenario,)
    elif where == "hitrate-name":
        files["s.yaml"] = to_yaml({**yaml.safe_load(TINY_SCENARIO), "name": mark})
        argv, literal = ["hitrate", "s.yaml", "--out", "h"], (mark,)
    elif where == "footprint-model":
        files["m.yaml"] = to_yaml({**TINY_MODEL, "name": mark})
        argv, literal = ["footprint", "m.yaml", "--tokens", "100"], (mark,)
    elif where == "hardware-list":
        files["hw/p.yaml"] = to_yaml({**HW_BASE, "name": mark, "description": mark})
        argv, literal, env = ["hardware"], (mark,), {"KVSIM_HARDWARE_DIR": "{dir}/hw"}
    else:
        files["s.yaml"] = to_yaml({**yaml.safe_load(TINY_SCENARIO), "hardware": {**HW_BASE, "name": mark}})
        argv, literal = ["validate", "s.yaml"], (mark,)
    if "," in mark and argv[0] == "compare":
        literal = ()
    shown = fname if "file" in where or where == "run-out" else mark
    return Case("markup", argv, files, expect="pass", why=f"{where}: {shown}", literal=literal, env=env)
