"""summary.json's `bench_serve` section (kind bench_serve only): the figures `vllm bench serve` prints, under
the names of its result JSON, computed with its definitions from kvsim's request and timeline records.
docs/metrics.md ("bench_serve") defines each one and gives the vLLM source it follows."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.metrics.frames import completed_mask, rejected
from kvsim.metrics.stats import plain

if TYPE_CHECKING:
    import pandas as pd

METRICS: tuple[tuple[str, str, str], ...] = (
    ("ttft", "TTFT", "Time to First Token"),
    ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
    ("itl", "ITL", "Inter-token Latency"),
    ("e2el", "E2EL", "End-to-end Latency"),
)
"""(key, short name, vLLM's header) of each latency the section gives mean, median, std and percentiles of."""
CLIENT_QUEUE = ("client_queue_time", "Client Queue Time", "Client-side Queueing")
_RTOL = 1e-9


def p_word(p: float) -> str:
    """vLLM's name of percentile p in a key: 99 -> '99', 99.9 -> '99.9'."""
    return str(int(p)) if int(p) == p else str(p)


def _stats(name: str, values_s: np.ndarray, percentiles: list[float]) -> dict[str, float | None]:
    """mean / median / std / p<P> of values in seconds, as milliseconds (numpy's mean, median, population
    std and linear percentiles, as vLLM; an empty list gives vLLM's 0)."""
    x = values_s if len(values_s) else np.zeros(1)
    out = {f"mean_{name}_ms": plain(np.mean(x) * 1000), f"median_{name}_ms": plain(np.median(x) * 1000),
           f"std_{name}_ms": plain(np.std(x) * 1000)}
    for p in percentiles:
        out[f"p{p_word(p)}_{name}_ms"] = plain(np.percentile(x, p) * 1000)
    return out


def _nones(name: str, percentiles: list[float]) -> dict[str, None]:
    keys = [f"mean_{name}_ms", f"median_{name}_ms", f"std_{name}_ms", *(f"p{p_word(p)}_{name}_ms"
                                                                         for p in percentiles)]
    return dict.fromkeys(keys)


def token_gaps(timeline: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(gap_s, count) per engine iteration: the decode tokens the iteration emits (decode_seqs) and the
    time since the same replica's previous iteration ended, which is each of those tokens' inter-token
    latency when its sequence emitted a token in that previous iteration too."""
    import pandas as pd  # (a frame came in: pandas is loaded)

    tl = timeline[timeline["iteration"] >= 0]
    if not len(tl):
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    tl = tl.sort_values(["replica", "t_s", "iteration"], kind="stable")
    end = (tl["t_s"] + tl["dt_s"]).to_numpy(np.float64)
    prev = pd.Series(end, index=tl.index).groupby(tl["replica"].to_numpy(), sort=False).shift(1)
    gap = end - prev.to_numpy(np.float64)
    count = tl["decode_seqs"].to_numpy(np.int64)
    keep = count > 0
    return gap[keep], count[keep]


def weighted_percentile(values: np.ndarray, counts: np.ndarray, p: float) -> float:
    """np.percentile(np.repeat(values, counts), p) (linear method) without building the repeated array."""
    order = np.argsort(values, kind="stable")
    v, c = values[order], counts[order]
    cum = np.cumsum(c)
    total = int(cum[-1])
    h = (total - 1) * p / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, total - 1)
    x_lo = v[int(np.searchsorted(cum, lo, side="right"))]
    x_hi = v[int(np.searchsorted(cum, hi, side="right"))]
    return float(x_lo + (h - lo) * (x_hi - x_lo))


def _itl(done: pd.DataFrame, timeline: pd.DataFrame, percentiles: list[float]) -> tuple[dict[str, Any], bool]:
    """The ITL figures and whether the timeline gave every inter-token gap exactly. The mean is exact
    always: a request's gaps sum to e2el - ttft over output_len - 1 gaps. Median, std and percentiles come
    from the timeline's per-iteration gaps when they account for every token and every second of the
    requests' decode time (no preemption or pause between a sequence's tokens) and no request moved from a
    prefill to a decode replica (its first gap spans two replicas' clocks), else None."""
    out_len = done["output_len"].to_numpy(np.int64)
    decode_s = (done["finish_s"] - done["first_token_s"]).to_numpy(np.float64)
    n_gaps = int(np.maximum(out_len - 1, 0).sum())
    total_s = float(decode_s[out_len > 1].sum())
    gaps, counts = token_gaps(timeline)
    handed_off = "prefill_replica" in done.columns and bool((done["prefill_replica"] >= 0).any())
    exact = (n_gaps > 0 and not handed_off and int(counts.sum()) == n_gaps
             and math.isclose(float(np.multiply(gaps, counts).sum()), total_s, rel_tol=_RTOL, abs_tol=1e-12))
    if n_gaps == 0:
        return _stats("itl", np.zeros(0), percentiles), True
    out: dict[str, Any] = _nones("itl", percentiles)
    out["mean_itl_ms"] = plain(total_s / n_gaps * 1000)
    if exact:
        mean = total_s / n_gaps
        var = float(np.multiply(counts, (gaps - mean) ** 2).sum()) / n_gaps
        out["median_itl_ms"] = plain(weighted_percentile(gaps, counts, 50.0) * 1000)
        out["std_itl_ms"] = plain(math.sqrt(var) * 1000)
        for p in percentiles:
            out[f"p{p_word(p)}_itl_ms"] = plain(weighted_percentile(gaps, counts, p) * 1000)
    return out, exact


def peak_concurrency(start: np.ndarray, end: np.ndarray) -> int:
    """Most requests in flight at once over half-open intervals [start, end) (an end at t before a start
    at t), vLLM's max_concurrent_requests."""
    if not len(start):
        return 0
    s, e = np.sort(start), np.sort(end)
    after = np.searchsorted(s, s, side="right") - np.searchsorted(e, s, side="right")
    return int(after.max())


def peak_output_per_s(done: pd.DataFrame, timeline: pd.DataFrame, exact: bool) -> float | None:
    """vLLM's max_output_tokens_per_s: output tokens counted in whole-second buckets from the first send
    (bucket int(t - first send), over ceil(last end - first send) + 1 buckets), the most in one bucket.
    A token's time: its request's first_token_s for the first, the end of the iteration that emits it for
    the rest (None unless the timeline accounts for every token, `exact`)."""
    if not len(done):
        return 0.0
    if not exact:
        return None
    start = done["arrival_s"].to_numpy(np.float64)
    t0 = float(start.min())
    n_buckets = int(np.ceil(float(done["finish_s"].max()) - t0)) + 1
    tl = timeline[(timeline["iteration"] >= 0) & (timeline["decode_seqs"] > 0)]
    times = np.concatenate([done["first_token_s"].to_numpy(np.float64),
                            (tl["t_s"] + tl["dt_s"]).to_numpy(np.float64)])
    weights = np.concatenate([np.ones(len(done), dtype=np.int64), tl["decode_seqs"].to_numpy(np.int64)])
    bucket = np.floor(times - t0).astype(np.int64)
    keep = (bucket >= 0) & (bucket < n_buckets)
    return float(np.bincount(bucket[keep], weights=weights[keep], minlength=n_buckets).max())


def bench_serve_section(requests: pd.DataFrame, timeline: pd.DataFrame, cfg: dict[str, Any]
                        ) -> dict[str, Any]:
    """The section (docs/metrics.md, bench_serve); cfg: the scenario's workload.bench_serve as data."""
    percentiles = [float(p) for p in cfg.get("metric_percentiles") or [99.0]]
    done = requests[completed_mask(requests)]
    end = [float(done["finish_s"].max())] if len(done) else []
    failed = requests[rejected(requests) != 0]
    if len(failed):
        end.append(float(failed["arrival_s"].max()))
    duration = max(end) if end else 0.0
    total_in = int(done["prompt_len"].sum())
    total_out = int(done["output_len"].sum())

    def rate(count: int) -> float | None:
        return count / duration if duration > 0 else None

    out: dict[str, Any] = {
        "completed": int(len(done)),
        "failed": int(len(failed)),
        "max_concurrency": cfg.get("max_concurrency"),
        "metric_percentiles": percentiles,
        "request_rate": cfg.get("request_rate"),
        "duration_s": plain(duration),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": rate(len(done)),
        "output_throughput": rate(total_out),
        "total_token_throughput": rate(total_in + total_out),
    }
    multi = done["output_len"].to_numpy(np.int64) > 1
    out.update(_stats("ttft", done["ttft_s"].to_numpy(np.float64), percentiles))
    out.update(_stats("tpot", done["tpot_s"].to_numpy(np.float64)[multi], percentiles))
    itl, exact = _itl(done, timeline, percentiles)
    out.update(itl)
    out["itl_exact"] = exact
    out.update(_stats("e2el", done["e2e_s"].to_numpy(np.float64), percentiles))
    if cfg.get("max_concurrency") is not None and "client_wait_s" in done.columns:
        out.update(_stats(CLIENT_QUEUE[0], done["client_wait_s"].to_numpy(np.float64), percentiles))
    out["max_concurrent_requests"] = peak_concurrency(done["arrival_s"].to_numpy(np.float64),
                                                      done["finish_s"].to_numpy(np.float64))
    out["max_output_tokens_per_s"] = peak_output_per_s(done, timeline, exact)
    return out


def bench_serve_rows(section: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The section as `vllm bench serve` prints it (its labels, two decimals), for the console and
    report.md."""
    if section is None:
        return []

    def f2(x: Any) -> str:
        return "-" if x is None else f"{x:.2f}"

    rows = [("Successful requests:", str(section["completed"])), ("Failed requests:", str(section["failed"]))]
    if section.get("max_concurrency") is not None:
        rows.append(("Maximum request concurrency:", str(section["max_concurrency"])))
    if section.get("request_rate") not in (None, "inf"):
        rows.append(("Request rate configured (RPS):", f2(section["request_rate"])))
    rows += [
        ("Benchmark duration (s):", f2(section["duration_s"])),
        ("Total input tokens:", str(section["total_input_tokens"])),
        ("Total generated tokens:", str(section["total_output_tokens"])),
        ("Request throughput (req/s):", f2(section["request_throughput"])),
        ("Output token throughput (tok/s):", f2(section["output_throughput"])),
        ("Peak output token throughput (tok/s):", f2(section["max_output_tokens_per_s"])),
        ("Peak concurrent requests:", f2(section["max_concurrent_requests"])),
        ("Total token throughput (tok/s):", f2(section["total_token_throughput"])),
    ]
    names = [m[:2] for m in METRICS]
    if f"mean_{CLIENT_QUEUE[0]}_ms" in section:
        names.append(CLIENT_QUEUE[:2])
    for key, short in names:
        rows += [(f"Mean {short} (ms):", f2(section[f"mean_{key}_ms"])),
                 (f"Median {short} (ms):", f2(section[f"median_{key}_ms"]))]
        rows += [(f"P{p_word(p)} {short} (ms):", f2(section[f"p{p_word(p)}_{key}_ms"]))
                 for p in section["metric_percentiles"]]
    return rows
