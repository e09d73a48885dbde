"""Where the KV capacity goes at one instant: token states, reservation, internal and external
fragmentation, free (they sum to the capacity), plus the blocks sequences would hold without sharing.

Managers with explicit reservations (contiguous layouts) provide `breakdown_slots` and `unshared_blocks`;
any other manager is treated as paged: no reservation, no external fragmentation, and every allocated
slot not holding KV is internal fragmentation (the unfilled tail of each sequence's last block, plus, with
sharing, nothing else). Every figure comes from running sums, so a row costs O(1) plus one term per
prefilling request.
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


_EXPLICIT: dict[type, bool] = {}  # manager class -> has breakdown_slots (looked up once per class)


def breakdown_row(sched, token_states: int) -> tuple[int, int, int, int, int]:
    """The BREAKDOWN_COLUMNS values for the scheduler's current state (token_states as
    `sched.token_states()` reports them)."""
    kv = sched.kv
    cls = type(kv)
    explicit = _EXPLICIT.get(cls)
    if explicit is None:
        explicit = _EXPLICIT[cls] = hasattr(cls, "breakdown_slots")
    if explicit:
        head = sched.waiting[0] if sched.waiting else None
        if head is None:
            reservation, internal, external, free = kv.breakdown_slots(token_states)
        else:
            reservation, internal, external, free = kv.breakdown_slots(token_states, head.req, head.output)
        return reservation, internal, external, free, kv.unshared_blocks(sched)
    bs = kv.block_size
    allocated = kv.used_blocks * bs
    return 0, allocated - token_states, 0, kv.num_blocks * bs - allocated, paged_unshared_blocks(sched)


def paged_unshared_blocks(sched) -> int:
    """Sum of block-table lengths over the sequences on the GPU: decoding sequences (a running sum in
    the scheduler) plus each prefilling request's one sequence."""
    kv = sched.kv
    total = sched.dec_blocks
    for g in sched.prefilling:
        seq = g.seqs[0]
        if kv.has(seq):
            total += kv.num_blocks_of(seq)
    return total


def check_breakdown(sched) -> None:
    """Raise AssertionError unless the breakdown is non-negative and sums to the capacity."""
    kv = sched.kv
    states = sched.token_states()
    row = breakdown_row(sched, states)
    parts = (states, *row[:4])
    capacity = kv.num_blocks * kv.block_size
    assert min(parts) >= 0, f"negative breakdown part {parts}"
    assert sum(parts) == capacity, f"breakdown {parts} does not sum to capacity {capacity}"
    assert row[4] >= kv.used_blocks, "sequences hold fewer blocks than are in use"
