"""When a request's re-reads land among its decode steps (a property of the workload and the policy model,
not of the engine: the engine's per-sequence bookkeeping is kvsim/engine/sparse_state.py)."""

from __future__ import annotations


def reread_schedule(segments, rereads, decode_steps: int) -> list[tuple[int, int, int]]:
    """(decode step, start position, tokens) of each re-read: the i-th of m re-reads happens at decode
    step ceil((i + 1) * D / (m + 1)) (at least 1) of the D = output - 1 decode steps, on the first prompt
    segment with that content id. Content ids not in the prompt, and all re-reads when D = 0, are skipped."""
    if not rereads or decode_steps <= 0:
        return []
    where: dict[int, tuple[int, int]] = {}
    pos = 0
    for cid, length in segments:
        where.setdefault(cid, (pos, length))
        pos += length
    m = len(rereads)
    out = []
    for i, cid in enumerate(rereads):
        seg = where.get(cid)
        if seg is None or seg[1] <= 0:
            continue
        step = max(1, -(-(i + 1) * decode_steps // (m + 1)))
        out.append((step, seg[0], seg[1]))
    out.sort()
    return out
