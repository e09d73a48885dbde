"""What token-level sparsity keeps per decoding group and per request inside the engine (slotted records),
and how a re-read is accounted. The policies themselves are kvsim/kvcache/sparsity/."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(slots=True)
class SeqState:
    """A decoding group under a policy: what one of its sequences holds now."""

    prompt_kv: int          # KV tokens at the end of prefill (the policy's P)
    resident: float = 0.0   # KV tokens kept on the GPU (whole-model token equivalents)
    blocks: int = 0         # blocks one sequence holds
    full_blocks: int = 0    # blocks it would hold without eviction
    holes: int = 0          # evicted slots inside its held blocks
    offloaded: float = 0.0  # entries in the host pool (offload policies)
    written: int = 0        # positions written to host memory so far (offload policies)
    selected: int = 0       # entries selected (prefetched) per decode step: the outside tokens (infinigen)
    lost_cold: float = 0.0  # host entries never selected that the full host pool evicted (gone)
    lost_hot: float = 0.0   # selected entries the full host pool evicted (gone: no longer prefetched)
    offset: int = 0         # n x (KV tokens held - context) at the last step: its term in the held offset
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
    # steady stepping (kvsim/engine/sparse_steady.py)
    seq: int = 0            # order of entry into the sizing's states (their dict order)
    due: int = -1           # iteration of its next real step (-1: the next pass)
    lazy: bool = False      # steady: its steps up to `due` are accounted in bulk
    light: int = -1         # steady: iteration its full_blocks grows by one before `due` (-1: none)
    mass_due: int = -1      # steady: iteration its attention mass is refreshed before `due` (-1: none)
    acc_it: int = 0         # steady: the last iteration accounted
    rate: int = 0           # steady: change of its held-offset term per step
    base: int = 0           # steady: the group's context at iteration 0 (Group.base) and generated
    gen_base: int = 0       # tokens likewise (Group.gen_base) when it went steady


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
    recall_bytes: float = 0.0  # host -> GPU: re-read recalls and per-step prefetch
    prefetch_bytes: float = 0.0  # of which per-step prefetch (infinigen)
    stall_s: float = 0.0     # recall_bytes / host link bandwidth
    host_evicted: float = 0.0  # its host entries the full host pool evicted
    lost_cold: float = 0.0   # SeqState.lost_cold / lost_hot kept while swapped out
    lost_hot: float = 0.0

    def row(self) -> tuple:
        """Values in sparse_columns.REQUEST_COLUMNS order (NaN where a request never decoded)."""
        nan = float("nan")
        steps = self.decode_steps
        return (
            steps, self.full_tokens, self.kept_tokens,
            self.kept_sum / self.full_sum if self.full_sum else nan,
            self.mass_sum / steps if steps else nan,
            self.fired, self.reread_tokens, self.lost_tokens, self.recalled_tokens, self.recall_bytes,
            self.stall_s, self.prefetch_bytes, self.host_evicted,
        )


def next_reread(rs: RequestStats) -> float:
    """Decode step of the request's next re-read (inf when none is left)."""
    return rs.rereads[rs.next_reread][0] if rs.next_reread < len(rs.rereads) else math.inf


def reread_outcome(rs: RequestStats, count: int, kept: float, offload: bool, tok_bytes: float,
                   host_bw: float, lost_share: float = 0.0) -> tuple[float, float]:
    """Account one re-read of `count` tokens of which `kept` are on the GPU: an offload policy recalls
    the rest (bytes and stall on the host link) but for the `lost_share` of it its full host pool
    evicted, a permanent one has lost it all. Returns (tokens recalled, share of the segment available
    during the re-read)."""
    missing = count - kept
    rs.fired += 1
    rs.reread_tokens += count
    if offload:
        lost = missing * min(1.0, max(0.0, lost_share))
        recalled = missing - lost
        rs.recalled_tokens += recalled
        rs.recall_bytes += recalled * tok_bytes
        rs.stall_s += recalled * tok_bytes / host_bw
        rs.lost_tokens += lost
        return recalled, (count - lost) / count
    rs.lost_tokens += missing
    return 0.0, kept / count
