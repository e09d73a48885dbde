"""The consistency checker's lora section (docs/lora.md): the `lora` figures recomputed from the request
columns (adapter, lora_found, lora_loads, lora_load_bytes, lora_load_wait_s, lora_skips) and the timeline
columns (lora_tokens, lora_adapters, lora_load_s), per replica too."""

from __future__ import annotations

from kvsim.metrics.consistency_core import Checker
from kvsim.metrics.consistency_stats import Tables, column, pstats, ratio


def check_lora(c: Checker, t: Tables) -> None:
    sec = c.summary.get("lora")
    if not sec:
        return
    rq, tl = t.rq, t.tl
    src = "requests.parquet (lora columns)"
    adapter = column(rq, "adapter", -1.0)
    found = column(rq, "lora_found", -1.0)
    admitted = found >= 0
    n = int(admitted.sum())
    by = {"gpu": int((found == 0).sum()), "host": int((found == 1).sum()), "disk": int((found == 2).sum())}
    c.eq("lora.adapter_requests", int((adapter >= 0).sum()), src, exact=True)
    c.eq("lora.adapter_admissions", n, src, exact=True)
    c.eq("lora.found", by, src, exact=True)
    c.eq("lora.gpu_hit_rate", ratio(by["gpu"], n), src)
    c.eq("lora.host_hit_rate", ratio(by["host"], n), src)
    loads = column(rq, "lora_loads", 0.0)
    load_bytes = column(rq, "lora_load_bytes", 0.0)
    wait = column(rq, "lora_load_wait_s", 0.0)
    skips = column(rq, "lora_skips", 0.0)
    c.eq("lora.loads", int(loads.sum()), src, exact=True)
    c.eq("lora.load_bytes_per_gpu", float(load_bytes.sum()), src)
    stall = column(tl, "lora_load_s", 0.0)
    c.eq("lora.load_stall_s", float(stall.sum()), "timeline.parquet (lora_load_s)")
    # every load is charged to the request whose admission caused it, and to the iteration that waited
    c.eq("lora.load_stall_s", float(wait.sum()), "requests.parquet (lora_load_wait_s)")
    c.eq("lora.load_wait_s", pstats(wait[admitted]), src)
    c.eq("lora.skips", int(skips.sum()), src, exact=True)
    c.eq("lora.skipped_requests", int((skips > 0).sum()), src, exact=True)
    tokens = column(tl, "lora_tokens", 0.0)[t.busy]
    with_lora = tokens > 0
    adapters = column(tl, "lora_adapters", 0.0)[t.busy][with_lora]
    c.eq("lora.adapters_per_batch_mean", float(adapters.sum()) / len(adapters) if len(adapters) else None,
         "timeline.parquet (lora_adapters)")
    total = float(column(tl, "prefill_tokens", 0.0)[t.busy].sum()
                  + column(tl, "decode_seqs", 0.0)[t.busy].sum())
    c.eq("lora.adapter_tokens_share", ratio(float(tokens.sum()), total), "timeline.parquet (lora_tokens)")
    rep = t.replica
    for i, row in enumerate(sec.get("per_replica") or []):
        k = row["index"]
        mine = rep == k
        c.eq(f"lora.per_replica[{i}]", {
            "gpu_hits": int((found[mine] == 0).sum()), "host_hits": int((found[mine] == 1).sum()),
            "disk_loads": int((found[mine] == 2).sum()), "loads": int(loads[mine].sum()),
            "load_bytes": float(load_bytes[mine].sum()), "skips": int(skips[mine].sum()),
            "load_stall_s": float(stall[t.t_replica == k].sum())}, src, exact=False)
