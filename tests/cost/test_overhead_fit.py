"""kvsim/cost/overhead_fit.py: the kernel model's overhead terms are the fit to the six vLLM CI latency
runs, and each run's leave-one-out error stays within what docs/cost_model.md reports."""

from __future__ import annotations

import pytest

from kvsim.cost.kernels import KERNEL_DEFAULTS
from kvsim.cost.overhead_fit import CaseTerms, case_terms, fit, leave_one_out, ratio_summary
from kvsim.cost.published import load_published_runs, predict_ms


def test_fit_recovers_terms_by_hand():
    # two cases built from iteration 1e-3 and layer 2e-5: the fit returns them exactly
    cases = [CaseTerms("a", 1.0 + 128e-3 + 4096 * 2e-5, 1.0, 128.0, 4096.0),
             CaseTerms("b", 2.0 + 64e-3 + 10240 * 2e-5, 2.0, 64.0, 10240.0)]
    x, y = fit(cases)
    assert (x, y) == (pytest.approx(1e-3, rel=1e-9), pytest.approx(2e-5, rel=1e-9))


def test_fit_keeps_both_terms_non_negative():
    # a case already slower than published with no overhead: the best non-negative terms are zero
    assert fit([CaseTerms("slow", 1.0, 1.2, 100.0, 1000.0)]) == (0.0, 0.0)
    # one that needs only the per-layer term
    x, y = fit([CaseTerms("p", 1.1, 1.0, 0.0, 1000.0), CaseTerms("q", 2.2, 2.0, 0.0, 2000.0)])
    assert x == 0.0 and y == pytest.approx(1e-4)


def test_ratio_summary_by_hand():
    assert ratio_summary([0.97, 1.02, 1.06]) == {"median_abs_err": pytest.approx(0.03),
                                                 "max_abs_err": pytest.approx(0.06)}


def _latency_terms() -> list[CaseTerms]:
    return [case_terms(f"{c['case']}/{c['hardware']}", c["published_ms"] / 1e3,
                       lambda ov, c=c: predict_ms(c, "kernels", **ov) / 1e3, 1e-5)
            for c in load_published_runs() if c["kind"] == "latency"]


def test_kernel_defaults_are_the_fit_on_all_six_latency_runs_and_leave_one_out_is_reported():
    terms = _latency_terms()
    assert len(terms) == 6
    it, layer = fit(terms)
    assert KERNEL_DEFAULTS["iteration_overhead_s"] == pytest.approx(it, rel=0.01, abs=1e-8)
    assert KERNEL_DEFAULTS["layer_overhead_s"] == pytest.approx(layer, rel=0.01)
    assert KERNEL_DEFAULTS["eager_layer_overhead_s"] == pytest.approx(KERNEL_DEFAULTS["layer_overhead_s"]
                                                                      + 2.8e-5)
    loo = {name: ratio for name, ratio, _ in leave_one_out(terms)}
    # docs/cost_model.md: leave-one-out kvsim / published
    want = {"latency_llama8B_tp1/h200": 0.995, "latency_llama70B_tp4/h200": 0.968,
            "latency_llama8B_tp1/h100-sxm": 0.969, "latency_llama70B_tp4/h100-sxm": 0.974,
            "latency_llama8B_tp1/a100-80gb": 1.053, "latency_llama70B_tp4/a100-80gb": 1.060}
    assert loo == pytest.approx(want, abs=6e-4)
    s = ratio_summary(list(loo.values()))
    assert s["median_abs_err"] <= 0.035 and s["max_abs_err"] <= 0.065
