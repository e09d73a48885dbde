"""Where the KV capacity goes at one instant: token states, reservation, internal and external
fragmentation, free (they sum to the capacity), plus the blocks sequences would hold without sharing.

Every KV manager answers `breakdown(token_states, table_blocks, head_req, head_output)` (the KVManager
protocol). Paged managers use `paged_breakdown`: no reservation, no external fragmentation, and every
allocated slot not holding KV is internal fragmentation (the unfilled tail of each sequence's last block,
plus, with sharing, nothing else). Contiguous layouts account their reservations themselves. Managers take
plain figures, never the scheduler: the engine gathers them (kvsim/engine/breakdown.py) from running sums,
so a row costs O(1) plus one term per prefilling request.
"""

from __future__ import annotations

BREAKDOWN_COLUMNS: tuple[str, ...] = (
    "kv_reservation",      # slots reserved for tokens not generated yet (contiguous layouts)
    "kv_internal_frag",    # allocated slots that hold no KV: never will (contiguous), not yet (paged)
    "kv_external_frag",    # free slots in holes too small for the next waiting request's region
    "kv_free",             # the remaining free slots
    "kv_unshared_blocks",  # blocks the sequences' tables would hold without sharing
)

SUMMARY_KEYS: dict[str, str] = {
    "token_states": "kv_token_states",
    "reservation": "kv_reservation",
    "internal_fragmentation": "kv_internal_frag",
    "external_fragmentation": "kv_external_frag",
    "free": "kv_free",
}
"""kv.breakdown key in summary.json -> timeline column."""


def paged_breakdown(kv, token_states: int, table_blocks: int) -> tuple[int, int, int, int, int]:
    """The breakdown of a paged manager (no reservation, no external fragmentation): every allocated slot
    not holding KV is internal fragmentation; the unshared blocks are the sum of the tables' lengths."""
    bs = kv.block_size
    allocated = kv.used_blocks * bs
    return 0, allocated - token_states, 0, kv.num_blocks * bs - allocated, table_blocks


def check_breakdown(kv, token_states: int, row: tuple[int, int, int, int, int]) -> None:
    """Raise AssertionError unless breakdown `row` (kv.breakdown's, at token_states) is non-negative,
    sums to kv's capacity with the token states, and counts at least the blocks in use."""
    parts = (token_states, *row[:4])
    capacity = kv.num_blocks * kv.block_size
    assert min(parts) >= 0, f"negative breakdown part {parts}"
    assert sum(parts) == capacity, f"breakdown {parts} does not sum to capacity {capacity}"
    assert row[4] >= kv.used_blocks, "sequences hold fewer blocks than are in use"
