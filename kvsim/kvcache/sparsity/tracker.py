"""Per-sequence and per-request bookkeeping of a token-level policy inside the engine (slotted records)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

REQUEST_COLUMNS: dict[str, str] = {
    # name: array typecode ('q' int64, 'd' float64); docs/sparsity.md defines them
    "sparsity_decode_steps": "q",
    "sparsity_full_tokens": "q",
    "sparsity_kept_tokens": "d",
    "sparsity_kept_fraction": "d",
    "sparsity_mass": "d",
    "sparsity_rereads": "q",
    "sparsity_reread_tokens": "q",
    "sparsity_reread_lost_tokens": "d",
    "sparsity_recalled_tokens": "d",
    "sparsity_recall_bytes": "d",
    "sparsity_stall_s": "d",
}
"""Columns added to requests.parquet when a policy is on, in `RequestStats.row()` order; a request that
never decoded has no RequestStats and gets NaN (an int column with a NaN in it is float64)."""


@dataclass(slots=True)
class SeqState:
    """A decoding group under a policy: what one of its sequences holds now."""

    prompt_kv: int          # KV tokens at the end of prefill (the policy's P)
    resident: float = 0.0   # KV tokens kept on the GPU (whole-model token equivalents)
    blocks: int = 0         # blocks one sequence holds
    full_blocks: int = 0    # blocks it would hold without eviction
    holes: int = 0          # evicted slots inside its held blocks
    offloaded: int = 0      # tokens in host memory (offload policies)
    contrib: int = 0        # this group's term in the scheduler's dec_base_sum
    seg_len: int = 0        # resident = seg_resident + seg_slope * (L - seg_len) for L < seg_until
    seg_resident: float = 0.0
    seg_slope: int = 0
    seg_until: float = 0.0
    length: int = 0         # context at the last decode step accounted
    base_mass: float = 1.0  # attention mass retained, refreshed every MASS_STRIDE (32) decode steps
    mass_step: float = -math.inf  # decode step of the last refresh
    next_reread: float = math.inf  # decode step of the request's next re-read
    rs: RequestStats | None = None  # the request's running totals
    reread_until: int = 0   # decode step up to which a re-read is active
    reread_avail: float = 1.0  # share of the re-read segment available during it


@dataclass(slots=True)
class RequestStats:
    """What a policy did to one request, summed over its decode steps (and over preemptions)."""

    prompt_kv: int = 0       # KV tokens at the end of (the latest) prefill: the policy's P
    rereads: list[tuple[int, int, int]] = field(default_factory=list)  # (decode step, start, tokens)
    next_reread: int = 0
    decode_steps: int = 0
    full_sum: int = 0        # sum over decode steps of the context length
    kept_sum: float = 0.0    # sum over decode steps of the tokens kept on the GPU
    mass_sum: float = 0.0    # sum over decode steps of the attention mass retained
    full_tokens: int = 0     # context at the last decode step
    kept_tokens: float = 0.0  # tokens kept at the last decode step
    fired: int = 0
    reread_tokens: int = 0
    lost_tokens: float = 0.0
    recalled_tokens: float = 0.0
    recall_bytes: float = 0.0
    stall_s: float = 0.0

    def row(self) -> tuple:
        """Values in REQUEST_COLUMNS order (NaN where a request never decoded)."""
        nan = float("nan")
        steps = self.decode_steps
        return (
            steps, self.full_tokens, self.kept_tokens,
            self.kept_sum / self.full_sum if self.full_sum else nan,
            self.mass_sum / steps if steps else nan,
            self.fired, self.reread_tokens, self.lost_tokens, self.recalled_tokens, self.recall_bytes,
            self.stall_s,
        )


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


TIMELINE_COLUMNS: dict[str, str] = {
    # name: array typecode; idle rows get 0
    "kv_full_tokens": "q",    # KV tokens the running sequences would hold without eviction
    "kv_full_blocks": "q",    # blocks their tables would hold without eviction
    "kv_table_blocks": "q",   # blocks their tables hold
    "kv_hole_slots": "q",     # evicted slots inside held blocks (reclaim: block)
    "kv_host_tokens": "q",    # KV tokens offloaded to host memory
    "recall_bytes": "d",      # KV recalled from host this iteration
    "offload_bytes": "d",     # KV written to host this iteration
    "kv_copy_bytes": "d",     # KV copied on device by compaction this iteration
}
"""Columns added to timeline.parquet when a policy is on, in the order the sparse scheduler's
`timeline_values()` gives them."""


def private_blocks(kv, seq: int) -> int:
    """Blocks of seq's table no other table (or cache entry) references: what free(seq) returns to the
    pool. Managers without PagedKVManager's tables and refcounts count every block."""
    tables = getattr(kv, "tables", None)
    if tables is None:
        return kv.num_blocks_of(seq)
    rc = kv.pool.refcount
    return sum(1 for b in tables[seq] if rc[b] == 1)


def next_reread(rs: RequestStats) -> float:
    return rs.rereads[rs.next_reread][0] if rs.next_reread < len(rs.rereads) else math.inf


def reread_outcome(rs: RequestStats, count: int, kept: float, offload: bool, tok_bytes: float,
                   host_bw: float) -> tuple[float, float]:
    """Account one re-read of `count` tokens of which `kept` are on the GPU: an offload policy recalls
    the rest (bytes and stall on the host link), a permanent one has lost it. Returns (tokens recalled,
    share of the segment available during the re-read)."""
    missing = count - kept
    rs.fired += 1
    rs.reread_tokens += count
    if offload:
        rs.recalled_tokens += missing
        rs.recall_bytes += missing * tok_bytes
        rs.stall_s += missing * tok_bytes / host_bw
        return missing, 1.0
    rs.lost_tokens += missing
    return 0.0, kept / count
