"""The roofline charges offload traffic over the host link and compaction copies at HBM bandwidth."""

from __future__ import annotations

import pytest

from kvsim.cost.batch import Batch
from kvsim.cost.roofline import RooflineCost
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware


def test_sparsity_terms():
    hw = load_hardware("h100-sxm")
    cost = RooflineCost(get_model("llama-3-8b"), hw, 1, "bf16", 16 * 131072.0)
    base = Batch(decode_seqs=4, decode_context_tokens=4000)
    t0 = cost.step_time(base)
    moved = Batch(decode_seqs=4, decode_context_tokens=4000, recall_bytes=2e9, offload_bytes=1e9)
    assert cost.step_time(moved) - t0 == pytest.approx(3e9 / hw.host_link_bandwidth)
    copied = Batch(decode_seqs=4, decode_context_tokens=4000, kv_copy_bytes=1e9)
    assert cost.step_time(copied) - t0 == pytest.approx(2e9 / (hw.hbm_bandwidth * 0.85))
