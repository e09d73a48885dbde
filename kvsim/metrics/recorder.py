"""Append-only columns the engine writes during a run; DataFrames are built once at the end."""

from __future__ import annotations

from array import array

import pandas as pd

TIMELINE_COLUMNS: dict[str, str] = {
    # name: array typecode ('d' float64, 'q' int64)
    "replica": "q",
    "iteration": "q",
    "t_s": "d",            # iteration start (simulated seconds)
    "dt_s": "d",           # iteration duration from the cost model
    "running_reqs": "q",   # requests holding KV on the GPU and scheduled this iteration
    "num_seqs": "q",       # sequences in the batch
    "prefill_seqs": "q",
    "prefill_tokens": "q",
    "decode_seqs": "q",
    "waiting": "q",        # requests queued (arrived, not admitted, incl. recompute-preempted)
    "swapped": "q",        # requests swapped out to host memory
    "kv_used_blocks": "q",  # blocks referenced by sequences (excludes cached-free blocks)
    "kv_token_states": "q",  # slots holding real KV, shared slots counted once
    "kv_cached_blocks": "q",  # blocks with refcount 0 kept for prefix reuse
    "preempted": "q",      # sequences preempted in this iteration
    "cow_copies": "q",     # copy-on-write block copies in this iteration
    # KV breakdown in token slots (kvsim/kvcache/breakdown.py); with kv_token_states they sum to capacity
    "kv_reservation": "q",      # reserved for tokens not generated yet (contiguous layouts)
    "kv_internal_frag": "q",    # allocated, holding no KV (never will: contiguous; not yet: paged)
    "kv_external_frag": "q",    # free, in holes too small for the next waiting request (contiguous)
    "kv_free": "q",             # the rest of the free slots
    "kv_unshared_blocks": "q",  # blocks the sequences would hold without sharing
}

REQUEST_COLUMNS: dict[str, str] = {
    "rid": "q",
    "replica": "q",
    "arrival_s": "d",
    "prompt_len": "q",
    "output_len": "q",
    "n": "q",
    "first_scheduled_s": "d",
    "first_token_s": "d",
    "finish_s": "d",
    "preemptions": "q",
    "cached_tokens": "q",  # prompt tokens served from the prefix cache (0 without one)
    "rejected": "q",       # 1 if the engine refused the request (longer than max_model_len or KV capacity)
}


class Recorder:
    """Column store for one run. `iteration(**row)` and `request(**row)` append one row each."""

    __slots__ = ("timeline", "requests", "_timeline_names", "_request_names")

    def __init__(self) -> None:
        self.timeline = {k: array(t) for k, t in TIMELINE_COLUMNS.items()}
        self.requests = {k: array(t) for k, t in REQUEST_COLUMNS.items()}
        self._timeline_names = tuple(TIMELINE_COLUMNS)
        self._request_names = tuple(REQUEST_COLUMNS)

    def iteration(self, values: tuple) -> None:
        """Append one timeline row; values in TIMELINE_COLUMNS order."""
        for col, v in zip(self.timeline.values(), values, strict=True):
            col.append(v)

    def request(self, values: tuple) -> None:
        """Append one request row; values in REQUEST_COLUMNS order."""
        for col, v in zip(self.requests.values(), values, strict=True):
            col.append(v)

    def timeline_frame(self) -> pd.DataFrame:
        """Timeline rows plus hold_s: how long each row's state holds, i.e. until the same replica's next
        iteration starts (dt_s plus any idle gap); the replica's last row holds for its dt_s."""
        df = pd.DataFrame({k: pd.Series(v, dtype=_dtype(v)) for k, v in self.timeline.items()})
        nxt = df.groupby("replica", sort=False)["t_s"].shift(-1)
        df["hold_s"] = (nxt - df["t_s"]).fillna(df["dt_s"])
        return df

    def requests_frame(self) -> pd.DataFrame:
        df = pd.DataFrame({k: pd.Series(v, dtype=_dtype(v)) for k, v in self.requests.items()})
        df = df.sort_values("rid", kind="stable").reset_index(drop=True)
        df["ttft_s"] = df["first_token_s"] - df["arrival_s"]
        df["e2e_s"] = df["finish_s"] - df["arrival_s"]
        decode_tokens = (df["output_len"] - 1).clip(lower=0)
        tpot = (df["finish_s"] - df["first_token_s"]) / decode_tokens.where(decode_tokens > 0)
        df["tpot_s"] = tpot
        df["queue_s"] = df["first_scheduled_s"] - df["arrival_s"]
        return df


def _dtype(col: array) -> str:
    return "float64" if col.typecode == "d" else "int64"
