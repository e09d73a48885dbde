"""The `lora` section of summary.json (multi-LoRA serving, docs/lora.md): where admissions found their
adapter, adapter loads and the time they stalled iterations, the distinct-adapter limit's skips, and the
KV capacity the adapter slots cost."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.metrics.stats import percentiles, plain

if TYPE_CHECKING:
    import pandas as pd

GPU, HOST, DISK = 0, 1, 2


def lora_section(requests: pd.DataFrame, timeline: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
    """From the request columns (adapter, lora_found, lora_loads, lora_load_bytes, lora_load_wait_s,
    lora_skips), the timeline's (lora_tokens, lora_adapters, lora_load_s) and meta `lora`."""
    info = meta["lora"]
    adapter = _col(requests, "adapter")
    found = _col(requests, "lora_found")
    admitted = found >= 0
    n = int(admitted.sum())
    by = {k: int((found == v).sum()) for k, v in (("gpu", GPU), ("host", HOST), ("disk", DISK))}
    wait = _col(requests, "lora_load_wait_s", float)[admitted]
    busy = _col(timeline, "iteration") >= 0 if len(timeline) else np.zeros(0, bool)
    tokens = _col(timeline, "lora_tokens")[busy]
    with_lora = tokens > 0
    adapters = _col(timeline, "lora_adapters")[busy][with_lora]
    skips = _col(requests, "lora_skips")
    return {
        "max_loras": info["max_loras"], "max_lora_rank": info["max_lora_rank"],
        "max_cpu_loras": info["max_cpu_loras"], "adapters": info["adapters"],
        "base_fraction": info["base_fraction"],
        "slot_bytes_per_gpu": info["slot_bytes_per_gpu"],
        "kv_capacity_lost": {"bytes_per_gpu": info["slots_bytes_per_gpu"], "blocks": info["kv_blocks_lost"],
                             "tokens": info["kv_tokens_lost"]},
        "adapter_requests": int((adapter >= 0).sum()),
        "adapter_admissions": n,
        "found": by,
        "gpu_hit_rate": by["gpu"] / n if n else None,
        "host_hit_rate": by["host"] / n if n else None,
        "loads": int(_col(requests, "lora_loads").sum()),
        "load_bytes_per_gpu": float(_col(requests, "lora_load_bytes", float).sum()),
        "load_stall_s": float(_col(timeline, "lora_load_s", float).sum()),
        "load_wait_s": percentiles(wait),
        "skips": int(skips.sum()),
        "skipped_requests": int((skips > 0).sum()),
        "adapters_per_batch_mean": float(adapters.mean()) if len(adapters) else None,
        "adapter_tokens_share": (float(tokens.sum()) / total if (total := _tokens(timeline, busy)) else None),
        "per_replica": [{k: plain(v) for k, v in r.items()} for r in info["per_replica"]],
    }


def _tokens(timeline: pd.DataFrame, busy: np.ndarray) -> float:
    if not len(timeline):
        return 0.0
    tokens = timeline["prefill_tokens"].to_numpy() + timeline["decode_seqs"].to_numpy()
    return float(tokens[busy].sum())


def _col(df: pd.DataFrame, name: str, dtype: type = np.int64) -> np.ndarray:
    if name not in df.columns or not len(df):
        return np.zeros(0, dtype=dtype)
    return df[name].to_numpy(dtype)


def lora_rows(sec: dict[str, Any] | None, fmt: Callable, pct: Callable) -> list[tuple[str, str]]:
    """Console / report lines of the lora section (none without one)."""
    if not sec:
        return []
    lost = sec["kv_capacity_lost"]
    w = sec["load_wait_s"]
    return [
        ("LoRA slots (max_loras x rank) / KV lost",
         f"{fmt(sec['max_loras'])} x {fmt(sec['max_lora_rank'])}: {fmt(lost['bytes_per_gpu'] / 2**20)} MiB = "
         f"{fmt(lost['blocks'])} blocks = {fmt(lost['tokens'])} tokens"),
        ("LoRA adapter found in GPU / host / disk",
         f"{pct(sec['gpu_hit_rate'])} / {pct(sec['host_hit_rate'])} / "
         f"{fmt(sec['found']['disk'])} of {fmt(sec['adapter_admissions'])}"),
        ("LoRA loads / stall (s) / wait p99 (s)",
         f"{fmt(sec['loads'])} / {fmt(sec['load_stall_s'])} / {fmt(w.get('p99'))}"),
        ("LoRA skips / skipped requests", f"{fmt(sec['skips'])} / {fmt(sec['skipped_requests'])}"),
        ("LoRA adapters per batch mean", fmt(sec["adapters_per_batch_mean"])),
    ]
