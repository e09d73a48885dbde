"""Kernel timing tables of a hardware profile: calibration/<profile>/kernels/<table>.parquet.

One schema (TABLES: each table's columns, kvsim's names and types) and one loader (`load_kernel_tables`)
for timings measured on real GPUs. The shipped tables are NVIDIA AIConfigurator's measurements of vLLM's
own kernels (github.com/ai-dynamo/aiconfigurator, Apache-2.0; the licence and PROVENANCE.json with the
source commit, paths, vLLM versions and kernel names sit beside them), copied by
calibration/import_aiconfigurator.py. Every row is one measured call of one layer's kernel;
`latency_s` is its time in seconds. docs/calibration.md describes each table.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kvsim
from kvsim.errors import KvsimError

MAX_TABLE_BYTES = 64 * 2**20
INT, STR = "int64", "str"


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One table: where the source keeps it (`where`, `file`), kvsim's columns and types (`columns`, the
    measured `latency_s` last) and the source's name of each (`source_columns`: source -> kvsim)."""

    where: str
    file: str
    columns: dict[str, str]
    source_columns: dict[str, str] = field(default_factory=dict)
    summary: str = ""


def _spec(where: str, file: str, summary: str, **cols: tuple[str, str]) -> TableSpec:
    """cols: kvsim name -> (type, source name)."""
    columns = {name: kind for name, (kind, _) in cols.items()} | {"latency_s": "float64"}
    return TableSpec(where, file, columns, {src: name for name, (_, src) in cols.items()}, summary)


KERNEL = (STR, "kernel_source")
TABLES: dict[str, TableSpec] = {
    "prefill_attention": _spec(
        "attention/vllm", "context_attention_perf.parquet",
        "prefill attention of `batch` sequences of `tokens` new tokens after `prefix` cached ones, one layer",
        kernel=KERNEL, batch=(INT, "batch_size"), tokens=(INT, "isl"), prefix=(INT, "step"),
        q_heads=(INT, "num_heads"), kv_heads=(INT, "num_key_value_heads"), head_dim=(INT, "head_dim"),
        dtype=(STR, "attn_dtype"), kv_dtype=(STR, "kv_cache_dtype"), window=(INT, "window_size")),
    "decode_attention": _spec(
        "attention/vllm", "generation_attention_perf.parquet",
        "one decode step of `batch` sequences, `context` KV tokens cached each (query 1 token), one layer",
        kernel=KERNEL, batch=(INT, "batch_size"), context=(INT, "step"), query=(INT, "isl"),
        q_heads=(INT, "num_heads"), kv_heads=(INT, "num_key_value_heads"), head_dim=(INT, "head_dim"),
        dtype=(STR, "attn_dtype"), kv_dtype=(STR, "kv_cache_dtype"), window=(INT, "window_size")),
    "gemm": _spec(
        "gemm/vllm", "gemm_perf.parquet", "x[m, k] @ W[n, k]^T at the weights' precision `dtype`",
        kernel=KERNEL, dtype=(STR, "gemm_dtype"), m=(INT, "m"), n=(INT, "n"), k=(INT, "k")),
    "allreduce": _spec(
        "comm/vllm", "custom_allreduce_perf.parquet", "vLLM's custom all-reduce of `elements` over `gpus`",
        kernel=KERNEL, backend=(STR, "backend"), dtype=(STR, "allreduce_dtype"), gpus=(INT, "num_gpus"),
        elements=(INT, "message_size")),
    "nccl": _spec(
        "comm/nccl", "nccl_perf.parquet", "NCCL collectives (`op`) of `elements` over `gpus`",
        kernel=KERNEL, op=(STR, "op_name"), dtype=(STR, "nccl_dtype"), gpus=(INT, "num_gpus"),
        elements=(INT, "message_size")),
    "moe": _spec(
        "moe/vllm", "moe_perf.parquet", "one fused MoE layer of `tokens` tokens, top-`topk` of `experts`",
        kernel=KERNEL, dtype=(STR, "moe_dtype"), tokens=(INT, "num_tokens"), hidden=(INT, "hidden_size"),
        inter=(INT, "inter_size"), topk=(INT, "topk"), experts=(INT, "num_experts"), tp=(INT, "moe_tp_size"),
        ep=(INT, "moe_ep_size"), distribution=(STR, "distribution")),
    "mla_prefill": _spec(
        "mla/vllm", "mla_context_module_perf.parquet",
        "DeepSeek MLA attention module, prefill, one layer",
        kernel=KERNEL, model=(STR, "model"), dtype=(STR, "mla_dtype"), kv_dtype=(STR, "kv_cache_dtype"),
        gemm_dtype=(STR, "gemm_type"), heads=(INT, "num_heads"), batch=(INT, "batch_size"),
        tokens=(INT, "isl"), prefix=(INT, "step"), tp=(INT, "tp_size")),
    "mla_decode": _spec(
        "mla/vllm", "mla_generation_module_perf.parquet",
        "DeepSeek MLA attention module, decode, one layer",
        kernel=KERNEL, model=(STR, "model"), dtype=(STR, "mla_dtype"), kv_dtype=(STR, "kv_cache_dtype"),
        gemm_dtype=(STR, "gemm_type"), heads=(INT, "num_heads"), batch=(INT, "batch_size"),
        query=(INT, "isl"), context=(INT, "step"), tp=(INT, "tp_size")),
    "gdn": _spec(
        "linear_attention/vllm", "gdn_perf.parquet",
        "Gated-DeltaNet layer parts (`kernel`) by `phase`",
        kernel=KERNEL, phase=(STR, "phase"), model=(STR, "model_name"), batch=(INT, "batch_size"),
        seq_len=(INT, "seq_len"), tokens=(INT, "num_tokens"), d_model=(INT, "d_model"),
        d_conv=(INT, "d_conv"),
        k_heads=(INT, "num_k_heads"), k_dim=(INT, "head_k_dim"), v_heads=(INT, "num_v_heads"),
        v_dim=(INT, "head_v_dim")),
}
"""Every kernel table kvsim reads, by name (the file is calibration/<profile>/kernels/<name>.parquet)."""

SYSTEMS = {"a100_sxm": "a100-80gb", "h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200",
           "gb200": "gb200", "l40s": "l40s", "rtx_pro_6000_server": "rtx-pro-6000"}
"""AIConfigurator's system name -> kvsim's hardware profile with its tables."""


def calibration_dir() -> Path:
    """The folder of per-profile calibration data: $KVSIM_CALIBRATION_DIR, else calibration/ at the repo
    root."""
    env = os.environ.get("KVSIM_CALIBRATION_DIR")
    return Path(env) if env else Path(kvsim.__file__).resolve().parents[1] / "calibration"


def kernels_dir(profile: str) -> Path:
    return calibration_dir() / profile / "kernels"


@dataclass(frozen=True, slots=True)
class KernelTables:
    """A profile's kernel tables (table name -> DataFrame in TABLES' columns) and their provenance;
    `tables` is a dict, or a `LazyTables` that reads each file on first use."""

    profile: str
    tables: Mapping[str, Any]
    provenance: dict[str, Any]

    def __contains__(self, name: str) -> bool:
        return name in self.tables

    def __getitem__(self, name: str):
        return self.tables[name]


def has_kernel_tables(profile: str) -> bool:
    return (kernels_dir(profile) / "PROVENANCE.json").is_file()


def _check_frame(path: Path, df, spec: TableSpec) -> None:
    import numpy as np

    for name, kind in spec.columns.items():
        if name not in df.columns:
            raise KvsimError(f"{path}: missing column {name!r} (docs/calibration.md, kernel tables)")
        col = df[name]
        if kind == INT and col.dtype.kind not in "iu":
            raise KvsimError(f"{path}: column {name!r} must hold integers, has {col.dtype}")
        if kind == "float64" and col.dtype.kind != "f":
            raise KvsimError(f"{path}: column {name!r} must hold numbers, has {col.dtype}")
    lat = df["latency_s"].to_numpy(np.float64)
    bad = ~(np.isfinite(lat) & (lat > 0))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise KvsimError(f"{path}: row {row + 1}: latency_s must be a finite number of seconds > 0, got "
                         f"{float(lat[row])!r}")
    for name, kind in spec.columns.items():
        if kind == INT and len(df) and int(df[name].min()) < 0:
            raise KvsimError(f"{path}: column {name!r} holds a negative value")


def _pandas_frame(path: Path):
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as file:  # (pq.read_table: a dataset layer, slower to import)
        return file.read().to_pandas()


def read_table(path: Path, name: str, columns: bool = False):
    """One table file checked against its TableSpec: a one-line KvsimError naming the file when it is
    missing, too large, not Parquet, truncated, or its columns or latencies are wrong. A pandas DataFrame,
    or with `columns` the same rows as numpy columns (kvsim/specs/table_columns.py: no pandas import)."""
    spec = TABLES[name]
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise KvsimError(f"{path}: cannot read the kernel table ({exc.strerror})") from None
    if size > MAX_TABLE_BYTES:
        raise KvsimError(f"{path}: kernel table over {MAX_TABLE_BYTES // 2**20} MiB")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kvsim.specs.table_columns import Columns, strings_as_dictionary

    try:
        if columns:  # the string columns read as dictionaries: numpy arrays without pyarrow's pandas path
            with pq.ParquetFile(path) as file:
                strings = strings_as_dictionary(file.schema_arrow)
            with pq.ParquetFile(path, read_dictionary=strings) as file:
                table = file.read()
            df = Columns.from_arrow(table, table.column_names, lambda: _pandas_frame(path))
        else:
            df = _pandas_frame(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise KvsimError(f"{path}: not a readable Parquet kernel table ({type(exc).__name__})") from None
    _check_frame(path, df, spec)
    return df[list(spec.columns)]


def load_kernel_tables(profile: str, verify: bool = True, lazy: bool = False,
                       columns: bool = False) -> KernelTables:
    """Every table of calibration/<profile>/kernels/ that PROVENANCE.json lists, checked (with `verify`,
    each file's SHA-256 against the provenance too): all now, or with `lazy` each on first use (a bad
    file's one-line KvsimError comes then). Each a pandas DataFrame, or with `columns` a `Columns`
    (kvsim/specs/table_columns.py: what the cost models' construction reads, without pandas)."""
    folder = kernels_dir(profile)
    prov_path = folder / "PROVENANCE.json"
    try:
        text = prov_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KvsimError(f"hardware profile '{profile}' has no kernel tables ({prov_path} is missing)"
                         ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KvsimError(f"{prov_path}: cannot read it ({type(exc).__name__})") from None
    try:
        prov = json.loads(text)
        listed = prov["tables"]
        assert isinstance(listed, dict)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise KvsimError(f"{prov_path}: not a provenance file (a JSON object with a 'tables' map)") from None
    for name in listed:
        if name not in TABLES:
            raise KvsimError(f"{prov_path}: unknown kernel table {name!r} (kvsim reads {', '.join(TABLES)})")
    tables = LazyTables(folder, listed, verify, columns)
    if not lazy:
        for name in listed:
            tables[name]
    return KernelTables(profile, tables, prov)


_READ: dict[tuple[str, bool, bool], tuple[tuple[int, int], Any]] = {}
"""(table file, verified, as columns) -> ((mtime_ns, size) when read, its frame): a process reads a file
once while it is unchanged (a sweep or a test session builds many cost models of one profile)."""


class LazyTables(Mapping):
    """The tables PROVENANCE.json lists, each read and checked (`read_table`, and its SHA-256 with
    `verify`) when first looked up, so a run reads only the tables its model needs."""

    __slots__ = ("folder", "listed", "verify", "columns", "_frames")

    def __init__(self, folder: Path, listed: dict[str, Any], verify: bool, columns: bool = False) -> None:
        self.folder, self.listed, self.verify, self.columns = folder, listed, verify, columns
        self._frames: dict[str, Any] = {}

    def __getitem__(self, name: str):
        frame = self._frames.get(name)
        if frame is None:
            if name not in self.listed:
                raise KeyError(name)
            frame = self._frames[name] = _read_listed(self.folder / f"{name}.parquet", name,
                                                      self.listed[name], self.verify, self.columns)
        return frame

    def __iter__(self) -> Iterator[str]:
        return iter(self.listed)

    def __len__(self) -> int:
        return len(self.listed)

    def __contains__(self, name: object) -> bool:
        return name in self.listed


def _read_listed(path: Path, name: str, info: Any, verify: bool, columns: bool = False):
    try:
        st = path.stat()
        signature = (st.st_mtime_ns, st.st_size)
    except OSError:
        signature = None
    key = (str(path), verify, columns)
    cached = _READ.get(key)
    if signature is not None and cached is not None and cached[0] == signature:
        # a copy: a caller that changes its frame cannot change the next one's (Columns never change)
        return cached[1] if columns else cached[1].copy()
    if verify and isinstance(info, dict) and "file_sha256" in info and path.is_file():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != info["file_sha256"]:
            raise KvsimError(f"{path}: contents differ from PROVENANCE.json's file_sha256 (changed or "
                             "truncated)")
    frame = read_table(path, name, columns)
    if signature is not None:
        _READ[key] = (signature, frame if columns else frame.copy())
    return frame
