"""The per-request columns of disaggregated prefill / decode (kvsim/engine/fleet/cluster.py), registered only
when the fleet has prefill and decode replicas. docs/fleet.md defines them."""

from __future__ import annotations

from kvsim.engine.group import Group
from kvsim.metrics.recorder import ColumnGroup, Recorder

REQUEST_COLUMNS: dict[str, str] = {
    "prefill_replica": "q",     # the replica that ran the prefill (-1: not handed off; NaN: refused)
    "prefill_done_s": "d",      # when the prefill finished there
    "decode_admit_s": "d",      # when the decode replica admitted it, blocks reserved
    "kv_arrival_s": "d",        # when its KV had arrived at the decode replica
    "kv_transfer_bytes": "d",   # bytes moved
    "kv_transfer_s": "d",       # transfer time after the prefill ended (queueing on the NICs included)
}


def register_columns(recorder: Recorder) -> None:
    """Add the P/D request columns (before the run); a refused request gets -1 / NaN."""
    recorder.add_request_columns(ColumnGroup(REQUEST_COLUMNS, default=float("nan")))


def request_values(g: Group) -> tuple:
    """The request's values in REQUEST_COLUMNS order (a request of one output token never leaves its
    prefill replica: no transfer)."""
    return (g.prefill_replica, g.prefill_done_s, g.decode_admit_s, g.kv_arrival_s, g.kv_transfer_bytes,
            g.kv_transfer_s)
