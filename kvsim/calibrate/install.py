"""`kvsim calibrate --install`: put a new fit in place of the shipped one, asked for by name.

The shipped files are hardware_profiles/PROFILE.yaml (its `calibration` key) and
calibration/PROFILE/measurements.csv. Before they change, the current pair is copied to
calibration/PROFILE/previous/<UTC time>/. A fit worse than the stored one is refused unless forced:
worse means it lacks a kernel and dtype the stored fit has, or one of those has a held-out MAPE above
WORSE_FACTOR x the stored one + WORSE_SLACK, or it comes from the smoke grid (a pipeline check, not a
calibration) where the stored one does not.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvsim.calibrate.profile import read_calibration, write_calibration
from kvsim.errors import KvsimError
from kvsim.specs.hardware import hardware_profiles_dir

WORSE_FACTOR = 1.25
WORSE_SLACK = 0.01


def repo_root() -> Path:
    """The folder holding hardware_profiles/ and calibration/."""
    return hardware_profiles_dir().parent


def measurements_path(profile: str, root: Path | None = None) -> Path:
    return (root or repo_root()) / "calibration" / profile / "measurements.csv"


def installed_source(profile: str) -> str:
    """The `source` a fit records: where --install puts its measurements, relative to the repo root."""
    return f"calibration/{profile}/measurements.csv"


def profile_file(profile: str) -> Path:
    """hardware_profiles/PROFILE.yaml, which must exist."""
    path = hardware_profiles_dir() / f"{profile}.yaml"
    if not path.is_file():
        raise KvsimError(f"--profile {profile}: no {path}")
    return path


def worse_than(new: dict[str, Any], stored: dict[str, Any] | None) -> list[str]:
    """Why the new calibration is worse than the stored one (empty: it is not)."""
    if not stored or not isinstance(stored.get("kernels"), dict):
        return []
    reasons = []
    new_grid = (new.get("provenance") or {}).get("grid")
    old_grid = (stored.get("provenance") or {}).get("grid")
    if new_grid == "smoke" and old_grid != "smoke":
        reasons.append(f"it comes from the smoke grid, the stored one from {old_grid!r}")
    for kernel, by_dtype in stored["kernels"].items():
        for dtype, old in (by_dtype or {}).items():
            fit = (new.get("kernels") or {}).get(kernel, {}).get(dtype)
            if fit is None:
                reasons.append(f"it has no fit for {kernel}/{dtype}")
            elif fit["heldout_mape"] > WORSE_FACTOR * old["heldout_mape"] + WORSE_SLACK:
                reasons.append(f"{kernel}/{dtype} held-out MAPE {fit['heldout_mape']:.3f} vs stored "
                               f"{old['heldout_mape']:.3f}")
    return reasons


def install(profile: str, csv: Path, calibration: dict[str, Any], comment: str, force: bool = False,
            log: Callable[[str], None] = print, now: float | None = None) -> Path | None:
    """Install csv and calibration as PROFILE's shipped calibration; returns the backup folder of the
    previous pair (None when there was nothing to keep). KvsimError when the fit is worse, unless force."""
    target = profile_file(profile)
    stored = read_calibration(target)
    reasons = worse_than(calibration, stored)
    if reasons and not force:
        raise KvsimError(f"--install {profile}: refusing a fit worse than the stored one: {reasons[0]}"
                         f"{f' (and {len(reasons) - 1} more)' if len(reasons) > 1 else ''}; "
                         "--force to install it anyway")
    shipped_csv = measurements_path(profile)
    backup = _backup(profile, target, shipped_csv, now) if stored else None
    shipped_csv.parent.mkdir(parents=True, exist_ok=True)
    _copy_atomic(csv, shipped_csv)
    write_calibration(target, calibration, comment)
    if backup is not None:
        log(f"kept the previous calibration in {backup}")
    log(f"installed the fit as {target} and {shipped_csv}")
    return backup


def _backup(profile: str, target: Path, csv: Path, now: float | None) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    base = csv.parent / "previous" / stamp
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = base.with_name(f"{stamp}-{n}")
    folder.mkdir(parents=True)
    shutil.copy2(target, folder / target.name)
    if csv.is_file():
        shutil.copy2(csv, folder / csv.name)
    return folder


def _copy_atomic(src: Path, dst: Path) -> None:
    """Copy src over dst through a temporary sibling, so dst is the old file or the new one, whole."""
    if src.resolve() == dst.resolve():
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.tmp-", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
