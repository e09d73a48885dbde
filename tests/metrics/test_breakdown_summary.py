"""kv.breakdown and kv.sharing_saving in the summary, worked out by hand on small timelines."""

from __future__ import annotations

import pandas as pd
import pytest

from kvsim.metrics.breakdown import sharing_saving
from kvsim.metrics.recorder import TIMELINE_COLUMNS
from kvsim.metrics.summary import build_summary

META = {"capacity_blocks": 5, "block_size": 4, "kv_bytes_per_token": 10, "bytes_per_block": 40, "replicas": 2}


def timeline() -> pd.DataFrame:
    """Capacity 20 slots. Replica 0: two rows held 1 s and 3 s; replica 1: one row held 2 s."""
    rows = [
        # replica, t_s, hold_s, states, reservation, internal, external, free, used, unshared
        (0, 0.0, 1.0, 8, 4, 4, 0, 4, 4, 6),
        (0, 1.0, 3.0, 4, 0, 0, 2, 14, 2, 2),
        (1, 0.0, 2.0, 10, 0, 2, 0, 8, 3, 3),
    ]
    names = ("replica", "t_s", "hold_s", "kv_token_states", "kv_reservation", "kv_internal_frag",
             "kv_external_frag", "kv_free", "kv_used_blocks", "kv_unshared_blocks")
    df = pd.DataFrame(rows, columns=names)
    for col in TIMELINE_COLUMNS:
        if col not in df.columns:
            df[col] = 0
    df["dt_s"] = df["hold_s"]
    return df


def requests() -> pd.DataFrame:
    return pd.DataFrame({"rid": [0], "replica": [0], "arrival_s": [0.0], "prompt_len": [4], "output_len": [2],
                         "n": [1], "first_scheduled_s": [0.0], "first_token_s": [1.0], "finish_s": [2.0],
                         "preemptions": [0], "cached_tokens": [0], "rejected": [0], "ttft_s": [1.0],
                         "tpot_s": [1.0], "e2e_s": [2.0], "queue_s": [0.0]})


def test_breakdown_means_per_replica():
    kv = build_summary(requests(), timeline(), META)["kv"]
    b = kv["breakdown"]
    # replica 0: states (8*1 + 4*3) / 4 / 20 = 0.25; replica 1: 10 / 20 = 0.5 -> mean 0.375
    assert b["token_states"] == pytest.approx(0.375)
    # reservation: (4*1 + 0) / 4 / 20 = 0.05; replica 1 0 -> 0.025
    assert b["reservation"] == pytest.approx(0.025)
    # internal: replica 0 4/4/20 = 0.05, replica 1 2/20 = 0.1 -> 0.075
    assert b["internal_fragmentation"] == pytest.approx(0.075)
    # external: replica 0 (2*3)/4/20 = 0.075, replica 1 0 -> 0.0375
    assert b["external_fragmentation"] == pytest.approx(0.0375)
    # free: replica 0 (4 + 14*3)/4/20 = 0.575, replica 1 8/20 = 0.4 -> 0.4875
    assert b["free"] == pytest.approx(0.4875)
    assert sum(b.values()) == pytest.approx(1.0)
    # sharing: unshared 6*1 + 2*3 + 3*2 = 18, used 4*1 + 2*3 + 3*2 = 16 -> 2 / 18
    assert kv["sharing_saving"] == pytest.approx(2 / 18)


def test_sharing_saving_edge_cases():
    df = timeline()
    assert sharing_saving(df.drop(columns=["kv_unshared_blocks"])) is None
    df["kv_unshared_blocks"] = 0
    assert sharing_saving(df) is None
    assert sharing_saving(df.iloc[:0]) is None


def test_breakdown_null_without_capacity():
    kv = build_summary(requests(), timeline(), {"replicas": 2})["kv"]
    assert kv["breakdown"] == dict.fromkeys(kv["breakdown"]) and kv["sharing_saving"] is None
