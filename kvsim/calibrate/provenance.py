"""Where and with what a measurement was taken: device, driver, library versions, date, method."""

from __future__ import annotations

import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import torch

from kvsim import __version__


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({torch.get_num_threads()} threads)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"


def driver_version(device: torch.device) -> str:
    if device.type != "cuda":
        return f"linux {platform.release()}"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout.strip()
        return f"{out.splitlines()[0]} (CUDA {torch.version.cuda})"
    except (OSError, subprocess.SubprocessError, IndexError):
        return f"unknown (CUDA {torch.version.cuda})"


def triton_version() -> str:
    try:
        import triton
    except ImportError:
        return "not installed"
    return triton.__version__


def provenance(device: torch.device, profile: str, method: str, model_shapes: str, grid: str,
               seed: int) -> dict[str, str]:
    """The header of a measurements file."""
    return {
        "device": device_name(device), "profile": profile, "driver": driver_version(device),
        "torch": torch.__version__, "triton": triton_version(), "kvsim": __version__,
        "python": platform.python_version(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "method": method, "model_shapes": model_shapes, "grid": grid, "seed": str(seed),
    }
