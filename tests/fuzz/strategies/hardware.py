"""Hardware profiles: inline hardware mappings with bad numbers, units or sections, and hardware
profile folders holding one broken file (`hardware_cases`)."""

from __future__ import annotations

import json
import math
from typing import Any

from cases import Case, Link
from hypothesis import strategies as st

from .common import MARKUP, PASSWD_LINE, _base_scenario, run_argv, to_yaml
from .yaml_abuse import alias_bomb, deep_flow

# ---------------------------------------------------------------------------------------------------
# Hardware profiles

HW_BASE = {"name": "fuzz-gpu", "memory_bytes": "79.11 GiB", "hbm_bandwidth": "3.35 TB/s",
           "peak_flops": {"bf16": "989.5 TFLOPS", "fp16": "989.5 TFLOPS", "fp8": "1979 TFLOPS"},
           "host_link_bandwidth": "64 GB/s", "interconnect_bandwidth": "450 GB/s",
           "host_dram_bytes": "256 GiB", "ssd_bytes": "3.84 TB", "ssd_bandwidth": "7 GB/s"}
HW_NUMERIC = ("memory_bytes", "hbm_bandwidth", "host_link_bandwidth", "interconnect_bandwidth",
              "host_dram_bytes", "ssd_bytes", "ssd_bandwidth", "memory_gb")
HW_BAD: tuple[tuple[Any, str], ...] = (
    (math.nan, "fail"), (math.inf, "fail"), (-math.inf, "fail"), (-1, "fail"), (True, "fail"),
    ("inf", "fail"),
    ("nan", "fail"), ("NaN TB/s", "fail"), ("1e400", "fail"), ("1e400 B/s", "fail"), ("-3 TB/s", "fail"),
    ("4.8 XB/s", "fail"), ("", "fail"), ("abc", "fail"), ([], "fail"), ({}, "fail"), (None, "fail"),
    ("4.8e12", "any"), (1e308, "any"), ("1" + "0" * 400, "any"), ("0x10", "fail"), ("1..2 TB/s", "fail"),
    (" 3 TB/s ", "any"), ("3 tb/s", "any"), ("3 Gi", "fail"), (10**400, "any"),
)


@st.composite
def inline_hardware(draw) -> tuple[dict[str, Any], str, str]:
    hw = json.loads(json.dumps(HW_BASE))
    how = draw(st.sampled_from(["field"] * 4 + ["flops-empty", "flops-value", "flops-key", "unknown",
                                                "missing", "zero", "calibration", "name"]))
    if how == "field":
        key = draw(st.sampled_from(HW_NUMERIC))
        value, expect = draw(st.sampled_from(HW_BAD))
        if key in ("host_dram_bytes", "ssd_bytes") and value == -1:
            expect = "fail"
        hw[key] = value
        return hw, f"{key}: {value!r}"[:80], expect
    if how == "flops-empty":
        hw["peak_flops"] = draw(st.sampled_from([{}, [], "1e15", None]))
    elif how == "flops-value":
        value, expect = draw(st.sampled_from(HW_BAD))
        hw["peak_flops"] = {"bf16": value}
        return hw, f"peak_flops.bf16: {value!r}"[:80], expect
    elif how == "flops-key":
        hw["peak_flops"] = {draw(st.sampled_from(["bfloat16", "BF16", "", "fp4", "[bold]x"])): 1e15}
    elif how == "unknown":
        hw[draw(st.sampled_from(["memory", "hbm", "", "calibrated"]))] = 1
    elif how == "missing":
        del hw[draw(st.sampled_from(["memory_bytes", "hbm_bandwidth", "peak_flops", "ssd_bandwidth"]))]
    elif how == "zero":
        hw[draw(st.sampled_from(["memory_bytes", "hbm_bandwidth", "host_link_bandwidth"]))] = 0
    elif how == "calibration":
        hw["calibration"] = draw(st.sampled_from(["junk", [], {"terms": {}}, {"terms": "x"},
                                                  {"kernels": {}, "terms": {"linear": "gemm"}}]))
        return hw, how, "any"
    else:
        hw["name"] = draw(st.sampled_from(MARKUP + ("", "x" * 10_000, "a\nb")))
        return hw, how, "any"
    return hw, how, "fail"


PROFILE_FILES: tuple[tuple[str, Any, str], ...] = (
    ("bin.yaml", bytes(range(256)), "binary"), ("latin.yaml", b"name: caf\xe9\nmemory_bytes: 1\n", "latin-1"),
    ("empty.yaml", b"", "empty"), ("dir.yaml", None, "directory"), ("list.yaml", "- 1\n- 2\n", "list"),
    ("bomb.yaml", alias_bomb(10, 9), "alias bomb"), ("deep.yaml", deep_flow(20000), "deep nesting"),
    ("link.yaml", Link("/etc/passwd"), "symlink to /etc/passwd"), ("nul.yaml", b"name: a\x00\n", "NUL"),
    ("dup.yaml", to_yaml(HW_BASE) + "hbm_bandwidth: 1 TB/s\n", "duplicate key"),
    ("nan.yaml", to_yaml({**HW_BASE, "hbm_bandwidth": math.nan}), "NaN bandwidth"),
    ("dangling.yaml", Link("nowhere.yaml"), "dangling symlink"),
)


@st.composite
def hardware_cases(draw) -> Case:
    """Inline hardware mappings (validate/run, with the roofline or calibrated cost model), and
    hardware profile folders holding one broken file (`kvsim hardware`, validate, footprint)."""
    if draw(st.integers(0, 2)):
        hw, what, expect = draw(inline_hardware())
        sc = _base_scenario()
        sc["hardware"] = hw
        if "calibration" in hw or draw(st.integers(0, 4)) == 0:
            sc["cost"] = {"model": "calibrated"}
            expect = "fail"
        argv = draw(st.sampled_from([["validate", "s.yaml"], run_argv()]))
        shown = what == "name" and hw["name"] in MARKUP and argv[0] == "validate"
        literal = (hw["name"],) if shown else ()
        return Case("hardware", argv, {"s.yaml": to_yaml(sc)}, expect=expect, why=f"inline: {what}",
                    literal=literal)
    name, content, what = draw(st.sampled_from(PROFILE_FILES))
    files = {"hw/good.yaml": to_yaml(HW_BASE), f"hw/{name}": content}
    stem = name.removesuffix(".yaml")
    sc = _base_scenario(hardware=stem)
    files["s.yaml"] = to_yaml(sc)
    cmd = draw(st.sampled_from(["list", "validate", "footprint", "good"]))
    argv = {"list": ["hardware"], "validate": ["validate", "s.yaml"],
            "footprint": ["footprint", "llama-3-8b", "--tokens", "100", "--hardware", stem],
            "good": ["footprint", "llama-3-8b", "--tokens", "100", "--hardware", "good"]}[cmd]
    expect = "fail" if cmd in ("validate", "footprint") else "any"
    return Case("hardware", argv, files, expect=expect, why=f"profile folder: {what}",
                env={"KVSIM_HARDWARE_DIR": "{dir}/hw"}, forbid=(PASSWD_LINE,))
