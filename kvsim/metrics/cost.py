"""The summary's `cost` section: what the simulated fleet costs to rent and per token served.

Prices are USD per GPU-hour, per pool (kvsim/engine/simulation.py meta `pricing`: the scenario's
`pricing` or the hardware profile's `usd_per_gpu_hour`, with its source). docs/metrics.md (cost) defines
every key.
"""

from __future__ import annotations

from typing import Any


def cost_section(pricing: list[dict[str, Any]] | None, throughput: dict[str, Any]) -> dict[str, Any] | None:
    """Fleet USD per hour and per day, GPU-hours per day, USD per million output / total tokens at the
    simulated throughput (None where a price or the throughput is unknown), and the prices used."""
    if not pricing:
        return None
    gpus = sum(p["gpus"] for p in pricing)
    known = all(p["usd_per_gpu_hour"] is not None for p in pricing)
    per_hour = sum(p["gpus"] * p["usd_per_gpu_hour"] for p in pricing) if known else None

    def per_million(tokens_per_s: float | None) -> float | None:
        if per_hour is None or not tokens_per_s:
            return None
        return per_hour / (tokens_per_s * 3600) * 1e6

    return {
        "gpus": gpus,
        "gpu_hours_per_day": gpus * 24,
        "usd_per_hour": per_hour,
        "usd_per_day": None if per_hour is None else per_hour * 24,
        "usd_per_million_output_tokens": per_million(throughput.get("output_tokens_per_s")),
        "usd_per_million_tokens": per_million(throughput.get("total_tokens_per_s")),
        "pools": [dict(p) for p in pricing],
    }


def cost_rows(cost: dict[str, Any] | None, fmt) -> list[tuple[str, str]]:
    """Console / report.md rows of the cost section."""
    if cost is None:
        return []

    def usd(x: float | None) -> str:
        return "-" if x is None else f"${fmt(x)}"

    return [
        ("GPUs / GPU-hours per day", f"{fmt(cost['gpus'])} / {fmt(cost['gpu_hours_per_day'])}"),
        ("cost per hour / per day (USD)", f"{usd(cost['usd_per_hour'])} / {usd(cost['usd_per_day'])}"),
        ("USD per 1M output / total tokens",
         f"{usd(cost['usd_per_million_output_tokens'])} / {usd(cost['usd_per_million_tokens'])}"),
    ]
