"""The `speculative` section of summary.json and its console rows (docs/speculative.md defines every key)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvsim.specs.footprint import format_bytes

if TYPE_CHECKING:
    import pandas as pd

CONFIG_KEYS: tuple[str, ...] = (
    "method", "num_speculative_tokens", "lookahead_slots", "acceptance_rates", "expected_accepted_per_step",
    "draft_model", "draft_derived", "draft_params", "draft_weight_bytes", "draft_kv_bytes_per_token",
    "draft_kv_layers",
    "kv_capacity_tokens", "kv_capacity_tokens_without_draft", "kv_capacity_tokens_lost", "draft_s")
"""Figures copied from meta `speculative` (the configuration and the draft's run total)."""


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def speculative_section(done: pd.DataFrame, timeline: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
    """Figures of a run with `speculative`: the configuration (meta), over the completed requests `done`
    (their spec_steps and spec_accepted_drafts columns) the verify steps and what they accepted, and the
    iterations' mean time with and without speculation."""
    sp = meta["speculative"]
    out: dict[str, Any] = {k: sp.get(k) for k in CONFIG_KEYS}
    busy = timeline[timeline["iteration"] >= 0] if len(timeline) else timeline
    n = len(busy)
    out["step_s_mean"] = float(busy["dt_s"].sum()) / n if n else None
    out["step_s_mean_without_speculation"] = sp.get("busy_s_without_speculation", 0.0) / n if n else None
    without = sp["kv_capacity_tokens_without_draft"]
    out["kv_capacity_lost_fraction"] = _ratio(sp["kv_capacity_tokens_lost"], without)
    k = sp["num_speculative_tokens"]
    decoded = done[done["spec_steps"] > 0] if len(done) and "spec_steps" in done.columns else done.iloc[:0]
    steps = int(decoded["spec_steps"].sum()) if len(decoded) else 0
    accepted = int(decoded["spec_accepted_drafts"].sum()) if len(decoded) else 0
    tokens = int((decoded["output_len"] - 1).sum()) if len(decoded) else 0
    proposed = k * steps
    mean_accepted = _ratio(accepted, steps)
    out.update({
        "verify_steps": steps,
        "drafts_proposed": proposed,
        "drafts_accepted": accepted,
        "rejected_kv_slots": proposed - accepted,
        "mean_accepted_length": mean_accepted,
        "mean_acceptance_length": None if mean_accepted is None else 1.0 + mean_accepted,
        "acceptance_rate": _ratio(accepted, proposed),
        "tokens_per_step": _ratio(tokens, steps),
    })
    hist = sp.get("steps_by_accepted") or []
    runs = sum(hist)
    # vLLM's "acceptance rate at token i": the share of verify steps that accepted draft i (P(a >= i))
    reached = [sum(hist[i:]) for i in range(1, len(hist))]
    out["position_acceptance"] = [_ratio(r, runs) for r in reached]
    out["position_conditional_rates"] = [_ratio(r, prev) for r, prev in zip(reached, [runs, *reached[:-1]],
                                                                           strict=True)]
    return out


def speculative_rows(sp: dict[str, Any] | None, fmt, pct) -> list[tuple[str, str]]:
    """Console / report.md rows for the section (none without `speculative`)."""
    if not sp:
        return []
    draft = sp["draft_model"] or "none (CPU prompt lookup)"
    return [
        ("speculative method / k / draft", f"{sp['method']} / {sp['num_speculative_tokens']} / {draft}"),
        ("draft weights / KV per token",
         f"{format_bytes(sp['draft_weight_bytes'] or 0)} / "
         f"{format_bytes(sp['draft_kv_bytes_per_token'] or 0)}"),
        ("KV capacity lost to the draft",
         f"{fmt(sp['kv_capacity_tokens_lost'])} tokens ({pct(sp['kv_capacity_lost_fraction'])})"),
        ("mean acceptance length (vLLM) / acceptance rate",
         f"{fmt(sp['mean_acceptance_length'])} / {pct(sp['acceptance_rate'])}"),
        ("verify steps / drafts accepted / rejected KV slots",
         f"{fmt(sp['verify_steps'])} / {fmt(sp['drafts_accepted'])} / {fmt(sp['rejected_kv_slots'])}"),
    ]
