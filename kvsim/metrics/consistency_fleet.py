"""The consistency checker's fleet section (kvsim/metrics/consistency.py): per-replica figures, load
imbalance, per role, the P/D KV transfer."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kvsim.metrics.consistency_core import Checker
from kvsim.metrics.consistency_stats import (
    Tables,
    column,
    finite,
    percentile,
    pstats,
    tw_mean,
)


def check_fleet(c: Checker, t: Tables, thr: dict[str, Any]) -> None:
    sec = c.summary.get("fleet")
    if not sec:
        return
    prefill = column(t.rq, "prefill_replica")
    cached = column(t.rq, "cached_tokens", 0.0)
    dt = column(t.tl, "dt_s")
    states, used = column(t.tl, "kv_token_states"), column(t.tl, "kv_used_blocks")
    running = column(t.tl, "running_reqs")
    src = "requests.parquet / timeline.parquet"
    per = sec["per_replica"]
    out_sum = []
    for i, p in enumerate(per):
        idx = p["index"]
        served = (t.replica == idx) | (prefill == idx)
        done = served & t.done
        made = (t.replica == idx) & t.done
        prompt = float(t.prompt[done].sum())
        rows = t.replica_rows.get(idx, np.array([], dtype=np.int64))
        blocks = p.get("capacity_blocks") or math.nan
        bs = p.get("block_size") or math.nan
        ttft = sorted(finite(t.ttft[served]))
        out_rate = t.rate(math.fsum((t.out_len * t.n)[made]))
        out_sum.append(out_rate or 0.0)
        c.eq(f"fleet.per_replica[{i}]", {
            "finished": int(done.sum()),
            # (decode replicas prefill nothing: their requests' hits are the prefill replica's)
            "hit_rate": float(cached[done].sum()) / prompt if prompt > 0 and p["role"] != "decode" else None,
            "ttft_p50_s": percentile(ttft, 50) if ttft else None,
            "ttft_p99_s": percentile(ttft, 99) if ttft else None,
            "output_tokens_per_s": out_rate,
            "busy_fraction": t.rate(math.fsum(dt[rows][t.busy[rows]])),
            "kv_utilization_mean": tw_mean(states[rows] / (blocks * bs), t.hold[rows]),
            "kv_used_blocks_mean": tw_mean(used[rows] / blocks, t.hold[rows]),
            "running_mean": tw_mean(running[rows], t.hold[rows]),
        }, src)
    if thr["output_tokens_per_s"] is not None:
        c.eq("throughput.output_tokens_per_s", math.fsum(out_sum), "fleet.per_replica[].output_tokens_per_s")
    front = [p for p in per if p["role"] != "decode"]
    c.eq("fleet.load_imbalance", {"routed": _imbalance([p["routed"] for p in front]),
                                  "finished": _imbalance([p["finished"] for p in front])},
         "fleet.per_replica")
    handed = prefill >= 0
    pd_run = any(p["role"] in ("prefill", "decode") for p in per)
    if not pd_run:
        c.eq("fleet.per_role", None, "fleet.per_replica roles (no prefill or decode replica)")
    if "prefill_replica" not in t.rq.columns:
        c.eq("fleet.kv_transfer", None, "requests.parquet (no P/D columns)")
    if sec.get("per_role"):
        for role, mask_of, wait in (
                ("prefill", lambda ids: np.isin(t.replica, ids) | np.isin(prefill, ids), t.queue),
                ("decode", lambda ids: np.isin(t.replica, ids) & handed,
                 column(t.rq, "decode_admit_s") - column(t.rq, "prefill_done_s"))):
            members = [p for p in per if p["role"] == role]
            busy = [p["busy_fraction"] for p in members if p["busy_fraction"] is not None]
            c.eq(f"fleet.per_role.{role}", {
                "busy_fraction_mean": math.fsum(busy) / len(busy) if busy else None,
                "queue_s": pstats(wait[mask_of([p["index"] for p in members])])}, src)
    kt = sec.get("kv_transfer")
    if kt:
        moved = column(t.rq, "kv_transfer_bytes")[handed]
        secs = column(t.rq, "kv_transfer_s")[handed]
        ttft = t.ttft[handed]
        ok = ~np.isnan(secs) & (ttft > 0)
        bw = kt.get("bandwidth_bytes_per_s")
        nics = len(bw) if isinstance(bw, dict) and bw else None
        admit_wait = column(t.rq, "decode_admit_s") - column(t.rq, "prefill_done_s")
        c.eq("fleet.kv_transfer", {
            "handed_off": int(handed.sum()), "nics": nics,
            "link_utilization": (2 * kt["busy_s"] / nics / t.makespan
                                 if kt.get("busy_s") is not None and nics and t.makespan else None),
            "bytes_per_request_mean": (math.fsum(finite(moved)) / len(finite(moved)) if finite(moved)
                                       else None),
            "transfer_s": pstats(secs),
            "decode_admission_wait_s": pstats(admit_wait[handed]),
            "ttft_share_mean": (math.fsum(secs[ok] / ttft[ok]) / int(ok.sum()) if ok.any() else None),
        }, "requests.parquet")
        c.eq("fleet.kv_transfer.bytes", math.fsum(finite(moved)), "requests.parquet (kv_transfer_bytes)")
        c.eq("fleet.kv_transfer.transfers", int((np.nan_to_num(moved) > 0).sum()),
             "requests.parquet (requests with kv_transfer_bytes > 0)", exact=True)


def _imbalance(values: list[Any]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    mean = math.fsum(values) / len(values)
    return max(values) / mean if mean > 0 else None
