"""Writing the `calibration` key keeps every other line of the profile, comments included."""

from __future__ import annotations

import yaml

from kvsim.calibrate.profile import write_calibration

PROFILE = """# a device
name: toy
memory_bytes: 1 GiB   # inline comment
calibration: null
# about sources
sources:
  memory_bytes: "datasheet"
"""


def test_replaces_only_the_calibration_entry(tmp_path):
    p = tmp_path / "toy.yaml"
    p.write_text(PROFILE)
    write_calibration(p, {"terms": {"linear": "gemm_torch"}, "x": [0.0, 1e-5]}, "fitted")
    text = p.read_text()
    assert text.startswith("# a device\nname: toy\nmemory_bytes: 1 GiB   # inline comment\n"
                           "# calibration: fitted\n")
    assert text.endswith("# about sources\nsources:\n  memory_bytes: \"datasheet\"\n")
    assert yaml.safe_load(text)["calibration"] == {"terms": {"linear": "gemm_torch"}, "x": [0.0, 1e-5]}
    write_calibration(p, {"terms": {}}, "again")  # a second write replaces the first, comment and all
    text2 = p.read_text()
    assert text2.count("# calibration:") == 1 and "fitted" not in text2
    assert yaml.safe_load(text2)["calibration"] == {"terms": {}}


def test_appends_when_absent(tmp_path):
    p = tmp_path / "toy.yaml"
    p.write_text("name: toy\nmemory_bytes: 1")
    write_calibration(p, {"a": 1})
    assert yaml.safe_load(p.read_text()) == {"name": "toy", "memory_bytes": 1, "calibration": {"a": 1}}
