"""The `sparsity` section of summary.json and its console rows (docs/sparsity.md defines every key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvsim.metrics.stats import plain
from kvsim.specs.footprint import format_bytes

if TYPE_CHECKING:
    import pandas as pd


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def _col_sum(df: pd.DataFrame, col: str) -> float:
    return float(df[col].sum(skipna=True)) if col in df.columns and len(df) else 0.0


def sparsity_section(requests: pd.DataFrame, timeline: pd.DataFrame, meta: dict[str, Any],
                     mean: Callable[[pd.DataFrame, pd.Series], float | None],
                     concurrency_mean: float | None) -> dict[str, Any]:
    """Figures of a run with a token-level policy. `mean` is the summary's per-replica time-weighted
    mean; `concurrency_mean` the summary's concurrency.mean."""
    sp = meta["sparsity"]
    out: dict[str, Any] = {k: sp[k] for k in ("policy", "reclaim", "budget_tokens", "budget_fraction",
                                              "offload")}
    out.update({k: sp.get(k, d) for k, d in (("block_tables", "shared"), ("selection", "shared"),
                                             ("kv_heads", 1), ("pool_kernel", None), ("prefetch", False))})
    has = len(timeline) and "kv_full_tokens" in timeline.columns

    def tmean(col: str) -> float | None:
        return mean(timeline, timeline[col].astype("float64")) if has else None

    full_tok, kept_tok = tmean("kv_full_tokens"), tmean("kv_token_states")
    full_blk, held_blk = tmean("kv_full_blocks"), tmean("kv_table_blocks")
    cap_blocks = meta.get("capacity_blocks")
    cap_tokens = cap_blocks * meta["block_size"] if cap_blocks else None
    holes = mean(timeline, timeline["kv_hole_slots"] / cap_tokens) if has and cap_tokens else None
    saved = _ratio(held_blk, full_blk)
    per_req_held = _ratio(held_blk, concurrency_mean)
    per_req_full = _ratio(full_blk, concurrency_mean)
    out.update({
        "kv_tokens_full_mean": full_tok,
        "kv_tokens_retained_mean": kept_tok,
        "retained_fraction": _ratio(kept_tok, full_tok),
        "kv_blocks_full_mean": full_blk,
        "kv_blocks_held_mean": held_blk,
        "memory_saved_fraction": None if saved is None else 1.0 - saved,
        "concurrency_gain": _ratio(full_blk, held_blk),
        "max_concurrency_supported": _ratio(cap_blocks, per_req_held),
        "max_concurrency_supported_full": _ratio(cap_blocks, per_req_full),
        "hole_fraction_mean": holes,
        "decode_kv_read_fraction": _ratio(sp["decode_kv_tokens_kept"], sp["decode_kv_tokens_full"]),
    })
    steps = _col_sum(requests, "sparsity_decode_steps")
    mass = (requests["sparsity_mass"] * requests["sparsity_decode_steps"]).sum(skipna=True) \
        if "sparsity_mass" in requests.columns else 0.0
    reread_tokens = _col_sum(requests, "sparsity_reread_tokens")
    lost = _col_sum(requests, "sparsity_reread_lost_tokens")
    recalled = _col_sum(requests, "sparsity_recalled_tokens")
    out.update({
        "attention_mass_retained": _ratio(float(mass), steps),
        "rereads": int(_col_sum(requests, "sparsity_rereads")),
        "reread_tokens": int(reread_tokens),
        "reread_lost_tokens": lost,
        "reread_lost_fraction": _ratio(lost, reread_tokens),
        "recalled_tokens": recalled,
        "recall_bytes": sp["recall_bytes"],
        "stall_s": _col_sum(requests, "sparsity_stall_s"),
        "offload_bytes": sp["offload_bytes"],
        "host_bytes_max": sp["host_bytes_max"],
        "compaction_copy_bytes": sp["compaction_copy_bytes"],
        "prefetch_bytes": sp.get("prefetch_bytes", 0.0),
        "host_pool_bytes": sp.get("host_pool_bytes"),
        "host_evicted_bytes": sp.get("host_evicted_bytes", 0.0),
    })
    out.update(_stalls(timeline) if sp["offload"] and has else
               {"stall_iterations": 0, "stall_iteration_fraction": None, "stall_exposed_s": 0.0})
    return {k: plain(v) if isinstance(v, float) else v for k, v in out.items()}


def _stalls(timeline: pd.DataFrame) -> dict[str, Any]:
    """Busy iterations whose prefetch transfer exceeded the forward-pass compute it overlaps
    (`transfer_bound`, as the cost model splits it: CostModel.prefetch_overlap), their share of the busy
    iterations, and the seconds of prefetch that compute did not hide, summed over every busy iteration
    (`prefetch_exposed_s`: each iteration's first-layer fetch, and in a transfer-bound one the excess
    too). Re-read recalls and offload writes are serial, not counted here."""
    if "transfer_bound" not in timeline.columns or "prefetch_exposed_s" not in timeline.columns:
        return {"stall_iterations": 0, "stall_iteration_fraction": None, "stall_exposed_s": 0.0}
    cols = ["transfer_bound", "prefetch_exposed_s"]  # only these: not a copy of the whole timeline
    busy = timeline.loc[timeline["iteration"] >= 0, cols] if "iteration" in timeline.columns \
        else timeline[cols]
    stalled = busy["transfer_bound"] > 0
    return {"stall_iterations": int(stalled.sum()),
            "stall_iteration_fraction": float(stalled.mean()) if len(busy) else None,
            "stall_exposed_s": float(busy["prefetch_exposed_s"].sum())}


def sparsity_rows(sp: dict[str, Any] | None, fmt, pct) -> list[tuple[str, str]]:
    """Console / report.md rows for the section (none without a policy)."""
    if not sp:
        return []
    budget = (f"{fmt(sp['budget_tokens'])} tokens" if sp["budget_tokens"] is not None
              else f"{pct(sp['budget_fraction'])} of context")
    gain = sp["concurrency_gain"]
    rows = [
        ("sparsity policy / budget / reclaim", f"{sp['policy']} / {budget} / {sp['reclaim']}"),
        ("KV tokens kept / full (mean)",
         f"{fmt(sp['kv_tokens_retained_mean'])} / {fmt(sp['kv_tokens_full_mean'])}"),
        ("KV memory saved / concurrency gain",
         f"{pct(sp['memory_saved_fraction'])} / {'-' if gain is None else f'{gain:.2f}x'}"),
        ("attention mass retained", pct(sp["attention_mass_retained"])),
    ]
    if sp["reclaim"] == "block":
        rows.append(("KV hole slots mean (of capacity)", pct(sp["hole_fraction_mean"])))
    if sp["rereads"]:
        rows.append(("re-reads / tokens / lost", f"{fmt(sp['rereads'])} / {fmt(sp['reread_tokens'])} / "
                     f"{pct(sp['reread_lost_fraction'])}"))
    if sp["offload"]:
        rows.append(("recalled KV / stall (s)",
                     f"{format_bytes(sp['recall_bytes'] or 0)} / {fmt(sp['stall_s'])}"))
        rows.append(("transfer-bound iterations / exposed (s)",
                     f"{pct(sp.get('stall_iteration_fraction'))} / {fmt(sp.get('stall_exposed_s'))}"))
        if sp.get("host_evicted_bytes"):
            rows.append(("host pool evicted", format_bytes(sp["host_evicted_bytes"])))
    return rows
