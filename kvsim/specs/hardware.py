"""Hardware profiles: one YAML file per device in hardware_profiles/, loaded into HardwareSpec."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

import kvsim
from kvsim.errors import KvsimError

GB = 1e9


@dataclass(frozen=True, slots=True)
class HardwareSpec:
    """One accelerator (or a CPU standing in for one) and the host around it, per GPU.

    memory_bytes: device memory as the runtime reports it (CUDA/HIP total, what vLLM multiplies by
        gpu_memory_utilization); memory_gb: the datasheet figure in GB (1e9 bytes), informational.
    hbm_bandwidth, host_link_bandwidth (GPU<->host, one direction), interconnect_bandwidth (GPU<->GPU
        for tensor-parallel all-reduce, one direction), ssd_bandwidth (read): bytes/s.
    peak_flops: dtype -> dense FLOP/s (no sparsity); keys among fp32, tf32, bf16, fp16, fp8, int8.
    host_dram_bytes, ssd_bytes: this GPU's share of the host's DRAM and local NVMe.
    sources: field -> citation. calibration: raw mapping from a kernel-measurement fit, or None.
    """

    name: str
    memory_bytes: int
    hbm_bandwidth: float
    peak_flops: dict[str, float]
    host_link_bandwidth: float
    host_dram_bytes: int
    ssd_bytes: int
    ssd_bandwidth: float
    interconnect_bandwidth: float
    memory_gb: float = 0.0
    description: str = ""
    sources: dict[str, str] | None = None
    calibration: dict[str, Any] | None = None

    def __hash__(self) -> int:  # the dict fields are not hashable; equal specs share these
        return hash((self.name, self.memory_bytes, self.hbm_bandwidth))

    def flops(self, dtype: str) -> float:
        """Peak dense FLOP/s for math in `dtype`, falling back to the nearest format the device has
        (fp8 -> bf16 on devices without fp8, int4 -> int8)."""
        chain = {"fp16": ("fp16", "bf16"), "bf16": ("bf16", "fp16"), "fp8": ("fp8", "bf16", "fp16"),
                 "int8": ("int8", "fp8", "bf16"), "int4": ("int8", "fp8", "bf16"),
                 "fp32": ("fp32", "tf32"), "tf32": ("tf32", "fp32")}.get(dtype, (dtype,))
        for key in (*chain, "bf16", "fp16", "fp32"):
            if key in self.peak_flops:
                return self.peak_flops[key]
        raise KvsimError(f"hardware {self.name}: no peak_flops entry for {dtype}")


_REQUIRED = ("memory_bytes", "hbm_bandwidth", "peak_flops", "host_link_bandwidth", "host_dram_bytes",
             "ssd_bytes", "ssd_bandwidth", "interconnect_bandwidth")
_KNOWN = tuple(f.name for f in fields(HardwareSpec))
_FLOPS_KEYS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")

_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15,
           "ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40, "pi": 2.0**50}
_QUANTITY = re.compile(r"^\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*"
                       r"(?:([kKmMgGtTpP]i?)?(B|FLOPS|FLOP/s|OPS|OP/s|B/s)?)?\s*$")


def parse_quantity(value: Any) -> float:
    """A number, or a string such as '4.8e12', '4.8 TB/s', '139.81 GiB', '989.5 TFLOPS'. Decimal
    prefixes are powers of 1000, binary ones (Ki, Mi, Gi, Ti) powers of 1024. ValueError if not."""
    if isinstance(value, bool):
        raise ValueError("not a number")
    if isinstance(value, (int, float)):
        return float(value)
    m = _QUANTITY.match(str(value))
    if not m or (m.group(2) and not m.group(3)):
        raise ValueError(f"cannot read {value!r} as a quantity")
    return float(m.group(1)) * _PREFIX[(m.group(2) or "").lower()]


def hardware_profiles_dir() -> Path:
    """The folder of device YAML files: $KVSIM_HARDWARE_DIR, else hardware_profiles/ at the repo root."""
    env = os.environ.get("KVSIM_HARDWARE_DIR")
    return Path(env) if env else Path(kvsim.__file__).resolve().parents[1] / "hardware_profiles"


def list_hardware() -> list[str]:
    """Names of the profiles in hardware_profiles_dir(), sorted."""
    folder = hardware_profiles_dir()
    return sorted(p.stem.lower() for p in folder.glob("*.yaml")) if folder.is_dir() else []


def load_hardware(name_or_dict: str | Path | dict[str, Any] | HardwareSpec) -> HardwareSpec:
    """A HardwareSpec from a profile name (case-insensitive), a path to a YAML file, or an inline
    mapping of HardwareSpec fields (memory_gb may stand in for memory_bytes there)."""
    if isinstance(name_or_dict, HardwareSpec):
        return name_or_dict
    if isinstance(name_or_dict, dict):
        return spec_from_mapping(name_or_dict, "inline hardware")
    text = str(name_or_dict).strip()
    path = Path(text).expanduser()
    if not path.is_file():
        folder = hardware_profiles_dir()
        matches = [p for p in folder.glob("*.yaml") if p.stem.lower() == text.lower()]
        if not matches:
            names = list_hardware()
            close = difflib.get_close_matches(text.lower(), names, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(names) or 'none'}"
            raise KvsimError(f"unknown hardware {text!r} (no {text}.yaml in {folder}); {hint}")
        path = matches[0]
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise KvsimError(f"{path}:{where}: {getattr(exc, 'problem', None) or 'invalid YAML'}") from None
    if not isinstance(data, dict):
        raise KvsimError(f"{path}: hardware profile must be a mapping")
    data.setdefault("name", path.stem.lower())
    return spec_from_mapping(data, str(path))


def spec_from_mapping(data: dict[str, Any], source: str) -> HardwareSpec:
    """Validate a mapping of HardwareSpec fields; every error is one line naming `source` and the key."""
    data = dict(data)
    unknown = sorted(set(data) - set(_KNOWN))
    if unknown:
        raise KvsimError(f"{source}: unknown key {unknown[0]!r}; known: {', '.join(_KNOWN)}")
    if "memory_bytes" not in data and "memory_gb" in data:
        data["memory_bytes"] = _positive(data["memory_gb"], "memory_gb", source) * GB
    for key in _REQUIRED:
        if key not in data:
            raise KvsimError(f"{source}: missing key {key!r}")
    flops = data["peak_flops"]
    if not isinstance(flops, dict) or not flops:
        raise KvsimError(f"{source}: peak_flops must map dtypes ({', '.join(_FLOPS_KEYS)}) to FLOP/s")
    bad = [k for k in flops if k not in _FLOPS_KEYS]
    if bad:
        raise KvsimError(f"{source}: peak_flops: unknown dtype {bad[0]!r}; known: {', '.join(_FLOPS_KEYS)}")
    peak = {k: _positive(v, f"peak_flops.{k}", source) for k, v in flops.items()}
    for key in ("sources", "calibration"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise KvsimError(f"{source}: {key} must be a mapping")
    memory = int(_positive(data["memory_bytes"], "memory_bytes", source))
    return HardwareSpec(
        name=str(data.get("name") or "custom"),
        memory_bytes=memory,
        hbm_bandwidth=_positive(data["hbm_bandwidth"], "hbm_bandwidth", source),
        peak_flops=peak,
        host_link_bandwidth=_positive(data["host_link_bandwidth"], "host_link_bandwidth", source),
        host_dram_bytes=int(_positive(data["host_dram_bytes"], "host_dram_bytes", source, zero=True)),
        ssd_bytes=int(_positive(data["ssd_bytes"], "ssd_bytes", source, zero=True)),
        ssd_bandwidth=_positive(data["ssd_bandwidth"], "ssd_bandwidth", source),
        interconnect_bandwidth=_positive(data["interconnect_bandwidth"], "interconnect_bandwidth", source),
        memory_gb=_positive(data.get("memory_gb", memory / GB), "memory_gb", source),
        description=str(data.get("description") or ""),
        sources={str(k): str(v) for k, v in (data.get("sources") or {}).items()},
        calibration=data.get("calibration"),
    )


def _positive(value: Any, key: str, source: str, zero: bool = False) -> float:
    try:
        number = parse_quantity(value)
    except ValueError:
        raise KvsimError(f"{source}: {key}: cannot read {value!r} as a number") from None
    if number < 0 or (number == 0 and not zero):
        raise KvsimError(f"{source}: {key} must be {'>= 0' if zero else '> 0'}, got {value!r}")
    return number
