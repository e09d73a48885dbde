"""The consistency checker's bench_serve section (kvsim/metrics/consistency.py): vLLM's benchmark figures,
ITL gaps and output peaks recomputed from the timeline."""

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
)


def check_bench_serve(c: Checker, t: Tables) -> None:
    sec = c.summary.get("bench_serve")
    if not sec:
        return
    d = t.done
    ends = [float(t.finish[d].max())] if d.any() else []
    if t.rejected.any():
        ends.append(float(t.arrival[t.rejected].max()))
    duration = max(ends) if ends else 0.0
    tin, tout = int(t.prompt[d].sum()), int(t.out_len[d].sum())

    def rate(x: float) -> float | None:
        return x / duration if duration > 0 else None

    fig: dict[str, Any] = {"completed": int(d.sum()), "failed": int(t.rejected.sum()), "duration_s": duration,
                           "total_input_tokens": tin, "total_output_tokens": tout,
                           "request_throughput": rate(int(d.sum())), "output_throughput": rate(tout),
                           "total_token_throughput": rate(tin + tout)}
    pcts = sec["metric_percentiles"]

    def stats(name: str, values: np.ndarray) -> None:
        x = sorted(finite(values)) or [0.0]
        mean = math.fsum(x) / len(x)
        fig[f"mean_{name}_ms"] = mean * 1000
        fig[f"median_{name}_ms"] = percentile(x, 50) * 1000
        fig[f"std_{name}_ms"] = math.sqrt(math.fsum((v - mean) ** 2 for v in x) / len(x)) * 1000
        for p in pcts:
            word = str(int(p)) if int(p) == p else str(p)
            fig[f"p{word}_{name}_ms"] = percentile(x, p) * 1000

    stats("ttft", t.ttft[d])
    stats("tpot", t.tpot[d & (t.out_len > 1)])
    stats("e2el", t.e2e[d])
    if "mean_client_queue_time_ms" in sec:
        stats("client_queue_time", column(t.rq, "client_wait_s")[d])
    # ITL: the gaps between one replica's consecutive iteration ends, one per decode token
    tl = t.tl[t.busy].sort_values(["replica", "t_s", "iteration"], kind="stable")
    gaps: list[float] = []
    prev: dict[float, float] = {}
    for rep, ts, dts, k in zip(tl["replica"].tolist(), tl["t_s"].tolist(), tl["dt_s"].tolist(),
                               tl["decode_seqs"].tolist(), strict=True):
        end = ts + dts
        if k > 0 and rep in prev:
            gaps += [end - prev[rep]] * int(k)
        elif k > 0:
            gaps += [math.nan] * int(k)
        prev[rep] = end
    n_gaps = int(np.maximum(t.out_len[d] - 1, 0).sum())
    decode_s = math.fsum((t.finish - t.first_token)[d & (t.out_len > 1)])
    handed = bool((column(t.rq, "prefill_replica", -1.0)[d] >= 0).any())
    exact = (n_gaps > 0 and not handed and len(gaps) == n_gaps and not any(map(math.isnan, gaps))
             and math.isclose(math.fsum(gaps), decode_s, rel_tol=1e-9, abs_tol=1e-12))
    if n_gaps == 0:
        stats("itl", np.zeros(0))
        exact = True
    elif exact:
        stats("itl", np.array(gaps))
        fig["mean_itl_ms"] = decode_s / n_gaps * 1000
    else:
        fig["mean_itl_ms"] = decode_s / n_gaps * 1000
        fig["median_itl_ms"] = fig["std_itl_ms"] = None
        for p in pcts:
            fig[f"p{str(int(p)) if int(p) == p else str(p)}_itl_ms"] = None
    fig["itl_exact"] = exact
    start, finish = t.arrival[d], t.finish[d]
    events = sorted([(e, 0) for e in finish.tolist()] + [(s, 1) for s in start.tolist()])
    live = top = 0
    for _, kind in events:
        live += 1 if kind else -1
        top = max(top, live)
    fig["max_concurrent_requests"] = top
    if not d.any():
        fig["max_output_tokens_per_s"] = 0.0
    elif not exact:
        fig["max_output_tokens_per_s"] = None
    else:
        t0 = float(start.min())
        n_buckets = int(math.ceil(float(finish.max()) - t0)) + 1
        counts = [0] * n_buckets
        stamps = list(t.first_token[d]) + [e for e, k in zip((tl["t_s"] + tl["dt_s"]).tolist(),
                                                             tl["decode_seqs"].tolist(), strict=True)
                                           for _ in range(int(k))]
        for s in stamps:
            b = math.floor(s - t0)
            if 0 <= b < n_buckets:
                counts[b] += 1
        fig["max_output_tokens_per_s"] = float(max(counts))
    c.eq("bench_serve", fig, "requests.parquet / timeline.parquet")
