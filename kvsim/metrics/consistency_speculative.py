"""The consistency checker's speculative section: the verify-step figures of summary `speculative`
recomputed from the request table's spec_steps / spec_accepted_drafts columns (a second implementation,
apart from kvsim/metrics/speculative.py)."""

from __future__ import annotations

import math

from kvsim.metrics.consistency_core import Checker
from kvsim.metrics.consistency_stats import Tables, column, ratio_pos


def check_speculative(c: Checker, t: Tables) -> None:
    sec = c.summary.get("speculative")
    if not sec:
        return
    k = sec["num_speculative_tokens"]
    steps_col = column(t.rq, "spec_steps", 0.0)
    mask = t.done & (steps_col > 0)
    steps = math.fsum(steps_col[mask])
    accepted = math.fsum(column(t.rq, "spec_accepted_drafts", 0.0)[mask])
    tokens = math.fsum(t.out_len[mask] - 1)
    mean = ratio_pos(accepted, steps)
    busy = column(t.tl, "dt_s")[t.busy]
    c.eq("speculative.step_s_mean", math.fsum(busy) / len(busy) if len(busy) else None,
         "timeline.parquet dt_s")
    c.eq("speculative", {
        "verify_steps": int(steps), "drafts_proposed": int(k * steps), "drafts_accepted": int(accepted),
        "rejected_kv_slots": int(k * steps - accepted), "mean_accepted_length": mean,
        "mean_acceptance_length": None if mean is None else mean + 1.0,
        "acceptance_rate": ratio_pos(accepted, k * steps), "tokens_per_step": ratio_pos(tokens, steps),
    }, "requests.parquet spec_steps / spec_accepted_drafts")
