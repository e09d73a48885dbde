"""Hardware profiles: one YAML file per device in hardware_profiles/, loaded into HardwareSpec."""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import kvsim
from kvsim.errors import KvsimError, excerpt
from kvsim.inputs import load_yaml

GB = 1e9
MAX_BYTES = 2.0**60
"""Largest memory_bytes, host_dram_bytes or ssd_bytes accepted (an exbibyte)."""
MAX_RATE = 1e21
"""Largest bandwidth (bytes/s) or peak FLOP/s accepted (a zetta-: a thousand times any device)."""


@dataclass(frozen=True, slots=True)
class HardwareSpec:
    """One accelerator (or a CPU standing in for one) and the host around it, per GPU.

    memory_bytes: device memory as the runtime reports it (CUDA/HIP total, what vLLM multiplies by
        gpu_memory_utilization); memory_gb: the datasheet figure in GB (1e9 bytes), informational.
    hbm_bandwidth, host_link_bandwidth (GPU<->host, one direction), interconnect_bandwidth (GPU<->GPU
        for tensor-parallel all-reduce, one direction), network_bandwidth (the GPU's scale-out NIC, one
        direction; optional), ssd_bandwidth (read): bytes/s.
    peak_flops: dtype -> dense FLOP/s (no sparsity); keys among fp32, tf32, bf16, fp16, fp8, fp4, int8.
    host_dram_bytes, ssd_bytes: this GPU's share of the host's DRAM and local NVMe.
    sources: field -> citation. calibration: raw mapping from a kernel-measurement fit, or None
        (kvsim.cost.calibrated checks the parts it reads).

    Profiles loaded through load_hardware / spec_from_mapping hold finite numbers only: byte counts
    <= MAX_BYTES, bandwidths and FLOP/s <= MAX_RATE; name, description and every source strings.
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
    network_bandwidth: float = 0.0
    """Scale-out network per GPU, one direction (RDMA NIC), bytes/s: KV transfer between nodes (P/D);
    0 when the profile does not say."""
    interconnect_bandwidth_by_tp: dict[int, float] | None = None
    """Optional: tensor-parallel size -> the GPU<->GPU bandwidth (bytes/s, per GPU, one direction) an
    all-reduce across that many GPUs gets, for a direct mesh whose tp GPUs use only the links among them
    (MI300X's Infinity Fabric); a TP size it does not list uses interconnect_bandwidth. None on switched
    fabrics (NVSwitch), where every TP size gets interconnect_bandwidth."""
    nvlink_domain: int = 0
    """GPUs one scale-up fabric joins (an NVLink / NVSwitch domain: 8 in a DGX or HGX node, 72 in a GB200
    NVL72 rack); a tensor-parallel group larger than it all-reduces over network_bandwidth. 0: not
    stated, no limit."""
    memory_gb: float = 0.0
    usd_per_gpu_hour: float = 0.0
    """Rental price of one GPU for an hour, US dollars (0: unknown; the scenario's `pricing` overrides
    it); its citation in sources."""
    description: str = ""
    sources: dict[str, str] | None = None
    calibration: dict[str, Any] | None = None

    def __hash__(self) -> int:  # the dict fields are not hashable; equal specs share these
        return hash((self.name, self.memory_bytes, self.hbm_bandwidth))

    def flops(self, dtype: str) -> float:
        """Peak dense FLOP/s for math in `dtype`, falling back to the nearest format the device has
        (fp8 -> bf16 on devices without fp8, int4 -> int8). FP4 weights (nvfp4, mxfp4) run at the fp4 rate
        where the device has FP4 tensor cores (Blackwell), else as vLLM runs them on older GPUs: 4-bit weights
        dequantized to bf16 for the math (W4A16, Marlin), at the bf16 rate."""
        chain = {"fp16": ("fp16", "bf16"), "bf16": ("bf16", "fp16"), "fp8": ("fp8", "bf16", "fp16"),
                 "int8": ("int8", "fp8", "bf16"), "int4": ("int8", "fp8", "bf16"),
                 "fp8_block": ("fp8", "bf16", "fp16"), "nvfp4": ("fp4", "bf16"), "mxfp4": ("fp4", "bf16"),
                 "fp32": ("fp32", "tf32"), "tf32": ("tf32", "fp32")}.get(dtype, (dtype,))
        for key in (*chain, "bf16", "fp16", "fp32"):
            if key in self.peak_flops:
                return self.peak_flops[key]
        raise KvsimError(f"hardware {self.name}: no peak_flops entry for {dtype}")


_REQUIRED = ("memory_bytes", "hbm_bandwidth", "peak_flops", "host_link_bandwidth", "host_dram_bytes",
             "ssd_bytes", "ssd_bandwidth", "interconnect_bandwidth")
_KNOWN = tuple(f.name for f in fields(HardwareSpec))
_FLOPS_KEYS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8", "int4")

_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15,
           "ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40, "pi": 2.0**50}
_QUANTITY = re.compile(r"^\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*"
                       r"(?:([kKmMgGtTpP]i?)?(B|FLOPS|FLOP/s|OPS|OP/s|B/s)?)?\s*$")


def parse_quantity(value: Any) -> float:
    """A number, or a string such as '4.8e12', '4.8 TB/s', '139.81 GiB', '989.5 TFLOPS'. Decimal
    prefixes are powers of 1000, binary ones (Ki, Mi, Gi, Ti) powers of 1024. ValueError if not, or
    if the result is not finite (nan, inf, '1e999')."""
    if isinstance(value, bool):
        raise ValueError("not a number")
    if isinstance(value, (int, float)):
        number = _as_float(value)
    elif isinstance(value, str) and len(value) <= 64 and (m := _QUANTITY.match(value)) and (
            m.group(3) or not m.group(2)):
        number = _as_float(m.group(1)) * _PREFIX[(m.group(2) or "").lower()]
    else:
        raise ValueError(f"cannot read {excerpt(value)} as a quantity")
    if not math.isfinite(number):
        raise ValueError(f"{excerpt(value)} is not a finite number")
    return number


def _as_float(value: int | float | str) -> float:
    try:
        return float(value)
    except OverflowError:  # an int beyond the float range
        return math.inf
    except ValueError:
        raise ValueError(f"cannot read {excerpt(value)} as a number") from None


def hardware_profiles_dir() -> Path:
    """The folder of device YAML files: $KVSIM_HARDWARE_DIR, else hardware_profiles/ at the repo root."""
    env = os.environ.get("KVSIM_HARDWARE_DIR")
    return Path(env) if env else Path(kvsim.__file__).resolve().parents[1] / "hardware_profiles"


def _profile_files() -> list[Path]:
    folder = hardware_profiles_dir()
    try:
        return sorted(folder.glob("*.yaml"), key=lambda p: p.stem.lower()) if folder.is_dir() else []
    except OSError:  # an unreadable folder lists nothing
        return []


def list_hardware() -> list[str]:
    """Names of the profiles in hardware_profiles_dir(), sorted."""
    return [p.stem.lower() for p in _profile_files()]


def scan_hardware() -> Iterator[tuple[Path, HardwareSpec | KvsimError]]:
    """(file, profile) for every *.yaml in hardware_profiles_dir(), sorted by name; a file that does
    not load (binary, not UTF-8, bad YAML, bad numbers, a folder) comes with its one-line KvsimError
    instead, so a listing can show the good profiles and one error line per bad file."""
    for path in _profile_files():
        try:
            yield path, _load_file(path)
        except KvsimError as exc:
            yield path, exc


def load_hardware(name_or_dict: str | Path | dict[str, Any] | HardwareSpec) -> HardwareSpec:
    """A HardwareSpec from a profile name (case-insensitive), a path to a YAML file, or an inline
    mapping of HardwareSpec fields (memory_gb may stand in for memory_bytes there)."""
    if isinstance(name_or_dict, HardwareSpec):
        return name_or_dict
    if isinstance(name_or_dict, dict):
        return spec_from_mapping(name_or_dict, "inline hardware")
    if not isinstance(name_or_dict, (str, Path)):
        raise KvsimError(f"hardware: expected a name, a path or a mapping, got {type(name_or_dict).__name__}")
    text = str(name_or_dict).strip()
    path = _existing(text)
    if path is None:
        matches = [p for p in _profile_files() if p.stem.lower() == text.lower()]
        if not matches:
            names = list_hardware()
            close = difflib.get_close_matches(text.lower()[:200], names, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(names) or 'none'}"
            file = f"{text}.yaml" if text.isprintable() and len(text) <= 100 else "such profile"
            raise KvsimError(f"unknown hardware {excerpt(text)} (no {file} in {hardware_profiles_dir()});"
                             f" {hint}")
        path = matches[0]
    return _load_file(path)


def _existing(text: str) -> Path | None:
    """The path `text` names when something is there (a file, or a folder named *.yaml), else None."""
    try:
        path = Path(text).expanduser()
        if path.is_file() or (path.suffix.lower() in (".yaml", ".yml") and path.exists()):
            return path
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a name too long for a path ...
        pass
    return None


def _load_file(path: Path) -> HardwareSpec:
    """One profile YAML, read through kvsim.inputs (size, UTF-8, bounded YAML)."""
    data = load_yaml(path, "hardware profile")
    if not isinstance(data, dict):
        raise KvsimError(f"{path}: hardware profile must be a mapping")
    data.setdefault("name", path.stem.lower())
    return spec_from_mapping(data, str(path))


def spec_from_mapping(data: dict[str, Any], source: str) -> HardwareSpec:
    """Validate a mapping of HardwareSpec fields; every error is one line naming `source` and the key."""
    data = dict(data)
    unknown = [k for k in data if k not in _KNOWN]
    if unknown:
        raise KvsimError(f"{source}: unknown key {excerpt(unknown[0])}; known: {', '.join(_KNOWN)}")
    if "memory_bytes" not in data and "memory_gb" in data:
        data["memory_bytes"] = _positive(data["memory_gb"], "memory_gb", source, MAX_BYTES / GB) * GB
    for key in _REQUIRED:
        if key not in data:
            raise KvsimError(f"{source}: missing key {key!r}")
    flops = data["peak_flops"]
    if not isinstance(flops, dict) or not flops:
        raise KvsimError(f"{source}: peak_flops must map dtypes ({', '.join(_FLOPS_KEYS)}) to FLOP/s")
    bad = [k for k in flops if k not in _FLOPS_KEYS]
    if bad:
        raise KvsimError(f"{source}: peak_flops: unknown dtype {excerpt(bad[0])};"
                         f" known: {', '.join(_FLOPS_KEYS)}")
    peak = {k: _positive(v, f"peak_flops.{k}", source, MAX_RATE) for k, v in flops.items()}
    by_tp = _bandwidth_by_tp(data.get("interconnect_bandwidth_by_tp"), source)
    if data.get("calibration") is not None and not isinstance(data["calibration"], dict):
        raise KvsimError(f"{source}: calibration must be a mapping")
    memory = int(_positive(data["memory_bytes"], "memory_bytes", source, MAX_BYTES))

    def rate(key: str) -> float:
        return _positive(data[key], key, source, MAX_RATE)

    return HardwareSpec(
        name=_name(_text(data.get("name"), "name", source), source) or "custom",
        memory_bytes=memory,
        hbm_bandwidth=rate("hbm_bandwidth"),
        peak_flops=peak,
        host_link_bandwidth=rate("host_link_bandwidth"),
        host_dram_bytes=int(_positive(data["host_dram_bytes"], "host_dram_bytes", source, MAX_BYTES, True)),
        ssd_bytes=int(_positive(data["ssd_bytes"], "ssd_bytes", source, MAX_BYTES, True)),
        ssd_bandwidth=rate("ssd_bandwidth"),
        interconnect_bandwidth=rate("interconnect_bandwidth"),
        network_bandwidth=(_positive(data["network_bandwidth"], "network_bandwidth", source, MAX_RATE)
                           if data.get("network_bandwidth") is not None else 0.0),
        interconnect_bandwidth_by_tp=by_tp,
        nvlink_domain=_domain(data.get("nvlink_domain", 0), source),
        memory_gb=_positive(data.get("memory_gb", memory / GB), "memory_gb", source, MAX_BYTES / GB),
        usd_per_gpu_hour=_positive(data.get("usd_per_gpu_hour", 0.0), "usd_per_gpu_hour", source, MAX_USD,
                                   True),
        description=_text(data.get("description"), "description", source),
        sources=_sources(data.get("sources"), source),
        calibration=data.get("calibration"),
    )


def _domain(value: Any, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TP:
        raise KvsimError(f"{source}: nvlink_domain must be an integer in [0, {MAX_TP}] (GPUs one NVLink "
                         f"domain joins; 0: not stated), got {excerpt(value)}")
    return value


MAX_USD = 1e6
"""Largest usd_per_gpu_hour a profile may give."""

MAX_TP = 1024
"""Largest tensor-parallel size a profile's interconnect_bandwidth_by_tp may list (as the scenario's)."""


def _bandwidth_by_tp(value: Any, source: str) -> dict[int, float] | None:
    """interconnect_bandwidth_by_tp: None when absent, else a non-empty mapping of TP sizes (integers in
    [2, MAX_TP], or their decimal strings: JSON keys) to bandwidths (quantities > 0, at most MAX_RATE)."""
    key = "interconnect_bandwidth_by_tp"
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise KvsimError(f"{source}: {key} must map tensor-parallel sizes (2, 4, 8, ...) to bandwidths,"
                         f" got {excerpt(value)}")
    out = {}
    for key_tp, bw in value.items():
        digits = isinstance(key_tp, str) and key_tp.isascii() and key_tp.isdigit() and len(key_tp) <= 4
        tp = int(key_tp) if digits else key_tp
        if isinstance(tp, bool) or not isinstance(tp, int) or not 2 <= tp <= MAX_TP:
            raise KvsimError(f"{source}: {key}: {excerpt(key_tp)} is not a tensor-parallel size (an integer"
                             f" in [2, {MAX_TP}])")
        out[tp] = _positive(bw, f"{key}.{tp}", source, MAX_RATE)
    return dict(sorted(out.items()))


def _text(value: Any, key: str, source: str) -> str:
    """A string field: "" when absent (None), else it must be a string."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KvsimError(f"{source}: {key} must be a string, got {excerpt(value)}")
    return value


MAX_NAME_CHARS = 256


def _name(value: str, source: str) -> str:
    """A profile name: at most MAX_NAME_CHARS characters, no control characters (it is echoed)."""
    if len(value) > MAX_NAME_CHARS or not value.isprintable():
        raise KvsimError(f"{source}: name must be at most {MAX_NAME_CHARS} printable characters, got "
                         f"{excerpt(value)}")
    return value


def _sources(value: Any, source: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KvsimError(f"{source}: sources must be a mapping of field -> citation")
    for key, cite in value.items():
        if not isinstance(key, str) or not isinstance(cite, str):
            raise KvsimError(f"{source}: sources: {excerpt(key)} must map a field name to a string,"
                             f" got {excerpt(cite)}")
    return dict(value)


def _positive(value: Any, key: str, source: str, maximum: float, zero: bool = False) -> float:
    """A finite quantity in (0, maximum] ([0, maximum] with zero=True)."""
    try:
        number = parse_quantity(value)
    except ValueError:
        raise KvsimError(f"{source}: {key}: cannot read {excerpt(value)} as a finite number") from None
    if number < 0 or (number == 0 and not zero):
        raise KvsimError(f"{source}: {key} must be {'>= 0' if zero else '> 0'}, got {excerpt(value)}")
    if number > maximum:
        raise KvsimError(f"{source}: {key} {excerpt(value)} is out of range (at most {maximum:.3g})")
    return number
