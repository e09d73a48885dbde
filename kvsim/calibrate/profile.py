"""Write the `calibration` key of a hardware profile YAML, keeping every other line (comments included)
as it is."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

from kvsim.errors import KvsimError
from kvsim.inputs import load_yaml, read_text

_TOP_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:")


def _represent_float(dumper: yaml.SafeDumper, value: float) -> yaml.Node:
    """Six significant digits, always in a form YAML 1.1 reads back as a float (0.0, 1.0e-05)."""
    text = f"{value:.6g}"
    if text[-1].isdigit():
        mant, e, exp = text.partition("e")
        text = (mant if "." in mant else mant + ".0") + e + exp
    return dumper.represent_scalar("tag:yaml.org,2002:float", text)


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(float, _represent_float)


def dump_calibration(calibration: dict[str, Any]) -> str:
    """The `calibration:` block as YAML text: nested mappings in block style, the innermost ones (params,
    derived figures, per-block-size overheads) in flow style on one line."""
    text = yaml.dump({"calibration": calibration}, Dumper=_Dumper, sort_keys=False, width=110,
                     default_flow_style=None, allow_unicode=True)
    return text


def write_calibration(path: Path, calibration: dict[str, Any], comment: str = "") -> None:
    """Replace the top-level `calibration:` entry of the YAML at path (append it if absent). Only that
    entry's lines change; a comment line, if given, goes right above it."""
    if not path.is_file():
        raise KvsimError(f"{path}: hardware profile not found")
    lines = read_text(path, "hardware profile").splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if re.match(r"^calibration\s*:", ln)), None)
    if start is None:
        start = end = len(lines)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
    else:
        end = start + 1
        while end < len(lines) and not _TOP_KEY.match(lines[end]):
            end += 1
        while end > start + 1 and lines[end - 1].lstrip().startswith("#"):
            end -= 1  # a comment right above the next key belongs to that key
        while start > 0 and lines[start - 1].startswith("# calibration:"):
            start -= 1
    block = (f"# calibration: {comment}\n" if comment else "") + dump_calibration(calibration)
    new = "".join(lines[:start]) + block + "".join(lines[end:])
    try:
        yaml.safe_load(new)
    except yaml.YAMLError as exc:  # pragma: no cover - our own dump is valid YAML
        raise KvsimError(f"{path}: writing the calibration would break the YAML ({exc})") from None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(new)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)  # the profile is the old text or the new one, whole
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_calibration(path: Path) -> dict[str, Any] | None:
    """The `calibration` mapping of a profile YAML (None when absent or null)."""
    data = load_yaml(path, "hardware profile") or {}
    cal = data.get("calibration") if isinstance(data, dict) else None
    return cal if isinstance(cal, dict) else None
