"""The published multi-LoRA cases of docs/lora.md (calibration/lora_published_runs.yaml), kvsim's
throughput for each, and the fit of `lora.kernel_overhead_s` per punica era with leave-one-out errors.

For each case kvsim runs the offline throughput scenario of the published runs
(kvsim/cost/published.py throughput_scenario: every prompt at t = 0) without and with the case's lora
section, over `seeds` draws of the ShareGPT lengths, and reports req/s (num_prompts / makespan, the mean
over seeds). A case with a published run without LoRA has a measured slowdown, lora / base req/s; its
error is kvsim's slowdown ratio over the published one, minus 1 (the base model's own error cancels).
A case without one is checked on its absolute LoRA req/s (that error includes the base model's).

The fit: per era, kernel_overhead_s minimising the sum of squared slowdown-ratio errors over the era's
cases with a base (golden-section search on [0, 2e-4] s; the error is monotone in it). Leave-one-out:
each such case predicted with the value fitted on the era's other cases (none left: not predicted).
A held-out case (no base) is predicted with the era's value fitted on every case with a base.

`.venv/bin/python calibration/lora_published_check.py [seeds] [cost model] [kernel_overhead_s]`:
seeds (default 3); roofline (default: the published runs' model) or kernels (a100-80gb's kernel tables);
a kernel_overhead_s given skips the fit and reports every case at that value.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvsim.cost.published import throughput_scenario  # noqa: E402
from kvsim.engine.simulation import Simulation  # noqa: E402
from kvsim.scenario import build_scenario  # noqa: E402

RUNS = Path(__file__).with_name("lora_published_runs.yaml")
BOUNDS = (0.0, 2e-4)


def load() -> tuple[dict, list[dict]]:
    data = yaml.safe_load(RUNS.read_text())
    return data, data["cases"]


def _scenario(case: dict, lengths: str, seed: int, model: str, lora: dict | None) -> dict:
    spec = {"model": case["model"], "hardware": case["hardware"],
            "tensor_parallel_size": case["tensor_parallel_size"], "num_prompts": case["num_prompts"],
            "engine": case["engine"], "lengths": lengths}
    sc = throughput_scenario(spec, seed, model=model)
    if lora is not None:
        sc["lora"] = lora
    return sc


def req_s(case: dict, lengths: str, seed: int, model: str, k_s: float | None) -> float:
    """kvsim's req/s for one seed: without the lora section when k_s is inf, else with it at kernel_overhead_s
    k_s (None: the era's default)."""
    lora = None if k_s is math.inf else lora_section(case, k_s)
    requests = Simulation(build_scenario(_scenario(case, lengths, seed, model, lora))).run().requests
    return len(requests) / float(requests["finish_s"].max() - requests["arrival_s"].min())


def lora_section(case: dict, k_s: float | None) -> dict:
    lo = case["lora"]
    sec = {"max_loras": lo["max_loras"], "max_lora_rank": lo["max_lora_rank"],
           "adapters": [{"count": lo["adapters"], "rank": lo["rank"]}]}
    if k_s is not None:
        sec["kernel_overhead_s"] = k_s
    return sec


class Runner:
    """Memoised kvsim runs: the base (k_s = inf) and the LoRA run at a k_s, mean over seeds."""

    def __init__(self, lengths: str, seeds: int, model: str) -> None:
        self.lengths, self.seeds, self.model = lengths, seeds, model
        self.memo: dict[tuple, list[float]] = {}

    def rates(self, case: dict, k_s: float | None) -> list[float]:
        key = (case["id"], k_s)
        if key not in self.memo:
            self.memo[key] = [req_s(case, self.lengths, s, self.model, k_s) for s in range(self.seeds)]
        return self.memo[key]

    def lora_rate(self, case: dict, k_s: float | None) -> float:
        return statistics.fmean(self.rates(case, k_s))

    def base_rate(self, case: dict) -> float:
        return statistics.fmean(self.rates(case, math.inf))

    def slowdown(self, case: dict, k_s: float | None) -> float:
        """Mean over seeds of kvsim's lora / base req/s."""
        return statistics.fmean(r / b for r, b in zip(self.rates(case, k_s), self.rates(case, math.inf),
                                                      strict=True))

    def error(self, case: dict, k_s: float | None) -> float:
        """The case's relative error at k_s: of the slowdown where it has a base, else of req/s."""
        if "base_req_s" in case:
            return self.slowdown(case, k_s) / (case["lora_req_s"] / case["base_req_s"]) - 1
        return self.lora_rate(case, k_s) / case["lora_req_s"] - 1


def fit(runner: Runner, cases: list[dict]) -> float:
    """kernel_overhead_s minimising the sum of squared errors over `cases` (golden section, 1e-8 s)."""
    def sse(k: float) -> float:
        return sum(runner.error(c, k) ** 2 for c in cases)

    lo, hi = BOUNDS
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = sse(a), sse(b)
    while hi - lo > 1e-8:
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = sse(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = sse(b)
    return round((lo + hi) / 2, 8)


def main() -> None:
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    model = sys.argv[2] if len(sys.argv) > 2 else "roofline"
    fixed = float(sys.argv[3]) if len(sys.argv) > 3 else None
    data, cases = load()
    runner = Runner(data["lengths"], seeds, model)
    print(f"cost model {model}, {seeds} seeds, cases from {RUNS.relative_to(ROOT)}")
    fitted: dict[str, float] = {}
    loo: dict[str, float | None] = {}
    if fixed is None:
        for era in sorted({c["era"] for c in cases}):
            with_base = [c for c in cases if c["era"] == era and "base_req_s" in c]
            if not with_base:
                print(f"era {era}: no case with a base run, nothing fitted (the default stays)")
                continue
            fitted[era] = fit(runner, with_base)
            print(f"era {era}: kernel_overhead_s fitted on {len(with_base)} cases = {fitted[era]:.3g} s")
            for c in with_base:
                others = [o for o in with_base if o is not c]
                loo[c["id"]] = fit(runner, others) if others else None
    print("| case | era | published lora req/s (base) | kvsim default: lora req/s (base), error | "
          "fitted k_s: error | leave-one-out k_s: held-out error |")
    print("|---|---|---|---|---|---|")
    for c in cases:
        base = f" ({c['base_req_s']:.2f})" if "base_req_s" in c else ""
        k0 = fixed  # None: the era's default
        kb = f" ({runner.base_rate(c):.2f})" if "base_req_s" in c else ""
        row = [c["id"], c["era"], f"{c['lora_req_s']:.2f}{base}",
               f"{runner.lora_rate(c, k0):.2f}{kb}, {runner.error(c, k0):+.1%}"]
        k = fitted.get(c["era"])
        row.append("" if k is None else f"{k:.3g}: {runner.error(c, k):+.1%}")
        if c["id"] in loo:
            kl = loo[c["id"]]
            row.append("no other case" if kl is None else f"{kl:.3g}: {runner.error(c, kl):+.1%}")
        elif k is not None:
            row.append(f"(held out) {k:.3g}: {runner.error(c, k):+.1%}")
        else:
            row.append("")
        print("| " + " | ".join(row) + " |")
    print("errors: of the slowdown (kvsim lora/base over published lora/base, minus 1) where the case has "
          "a base run, else of the absolute LoRA req/s")


if __name__ == "__main__":
    main()
