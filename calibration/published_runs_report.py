"""Print the published-runs tables of docs/cost_model.md with both cost models: the vLLM CI latency runs
(roofline, the kernel model, and the kernel model's leave-one-out ratio with the overheads refitted on the
other five) and the throughput runs (the mean of each case's seeds): `.venv/bin/python
calibration/published_runs_report.py` (a few minutes: 120 simulations of 200 requests)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvsim.cost.overhead_fit import case_terms, leave_one_out, ratio_summary  # noqa: E402
from kvsim.cost.published import load_published_runs, predict_ms, predict_req_s  # noqa: E402
from kvsim.engine.simulation import Simulation  # noqa: E402
from kvsim.scenario import build_scenario  # noqa: E402


def makespan_s(scenario: dict) -> float:
    requests = Simulation(build_scenario(scenario)).run().requests
    return float(requests["finish_s"].max() - requests["arrival_s"].min())


def main() -> None:
    cases = load_published_runs()
    latency = [c for c in cases if c["kind"] == "latency"]
    terms = [case_terms(c["case"], c["published_ms"] / 1e3,
                        lambda ov, c=c: predict_ms(c, "kernels", **ov) / 1e3, 1e-5) for c in latency]
    loo = leave_one_out(terms)
    print("| case | device | published ms | roofline | kernels | kernels, leave-one-out |")
    print("|---|---|---:|---:|---:|---:|")
    rl, kn = [], []
    for c, (_, out, _) in zip(latency, loo, strict=True):
        r, k = predict_ms(c) / c["published_ms"], predict_ms(c, "kernels") / c["published_ms"]
        rl.append(r)
        kn.append(k)
        print(f"| {c['case']} | {c['hardware']} | {c['published_ms']:,.1f} | {r:.3f} | {k:.3f} | {out:.3f} |")
    outs = [x for _, x, _ in loo]
    for name, ratios in (("roofline", rl), ("kernels", kn), ("kernels, leave-one-out", outs)):
        s = ratio_summary(ratios)
        print(f"\n{name}: median abs error {s['median_abs_err']:.1%}, max {s['max_abs_err']:.1%}", end="")
    print("\n\n| case | device | published req/s | roofline | kernels | kernels' seeds, min-max |")
    print("|---|---|---:|---:|---:|---:|")
    rl, kn = [], []
    for c in (c for c in cases if c["kind"] == "throughput"):
        k = predict_req_s(c, makespan_s, model="kernels")
        p = c["published_req_s"]
        rl.append(c["kvsim_req_s"] / p)
        kn.append(k["mean"] / p)
        print(f"| {c['case']} | {c['hardware']} | {p:.3f} | {c['kvsim_req_s']:.3f} ({rl[-1]:.3f}) | "
              f"{k['mean']:.3f} ({kn[-1]:.3f}) | {k['min']:.2f}-{k['max']:.2f} |")
    for name, ratios in (("roofline", rl), ("kernels", kn)):
        s = ratio_summary(ratios)
        mean = sum(abs(x - 1) for x in ratios) / len(ratios)
        print(f"\n{name}: mean abs error {mean:.1%}, median {s['median_abs_err']:.1%}, "
              f"max {s['max_abs_err']:.1%}", end="")
    print()


if __name__ == "__main__":
    main()
