"""The summary's `tiers` section (kvsim/metrics/tiers.py) on requests small enough to add up by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from kvsim.metrics.tiers import tiers_section


def _meta() -> dict:
    tiers = {"cpu": {"capacity_blocks": 10, "stores": 0, "loads": 0}}
    return {"tiers": {"tiers": tiers, "links": {}, "placement": "gpu-first", "store": "on-evict",
                      "load": "blocking", "chunk_blocks": 1, "min_uses": 1, "dropped_blocks": 0}}


def test_load_wait_total_is_the_sum_over_completed_requests():
    # request 0: a cpu hit at first admission, waited 0.5 s; request 1: no hit at first admission, waited
    # 0.25 s after a re-admission; request 2: no hit, no wait
    done = pd.DataFrame({"prompt_len": [100, 100, 100], "hit_tokens_gpu": [0, 0, 0],
                         "hit_tokens_cpu": [32, 0, 0], "load_wait_s": [0.5, 0.25, 0.0]})
    section = tiers_section(done, pd.DataFrame(), _meta(), 10.0, lambda tl, s: None)
    assert section["load_wait_s"]["total"] == pytest.approx(0.75) == done["load_wait_s"].sum()
    assert section["requests_with_tier_hits"] == 1
    assert section["prompt_tokens_by_source"] == {"gpu": 0, "cpu": 32, "computed": 268}


def test_loaded_tokens_is_the_sum_of_the_request_column():
    # request 0 loaded 32 cpu tokens at its first admission; request 1 none at first, 48 at a re-admission
    # (or on a P/D decode replica): its hit column stays 0, its loaded column counts them
    done = pd.DataFrame({"prompt_len": [100, 100], "hit_tokens_gpu": [0, 0], "hit_tokens_cpu": [32, 0],
                         "load_wait_s": [0.5, 0.25], "loaded_tokens_cpu": [32, 48]})
    section = tiers_section(done, pd.DataFrame(), _meta(), 10.0, lambda tl, s: None)
    assert section["per_tier"]["cpu"]["loaded_tokens"] == 80
    assert section["prompt_tokens_by_source"] == {"gpu": 0, "cpu": 32, "computed": 168}
