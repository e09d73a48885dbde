"""Per-request engine state: a sequence group (one request, n parallel samples)."""

from __future__ import annotations

from dataclasses import dataclass

from kvsim.workload.request import Request

WAITING, RUNNING, SWAPPED, FINISHED = 0, 1, 2, 3
PREFILL, DECODE = 0, 1


@dataclass(slots=True, eq=False)
class Group:
    """One request inside the engine.

    Prefill phase: `computed` of `prompt` tokens have KV. `prompt` is the request's prompt plus, after a
    recompute preemption, the tokens generated before it. Decode phase: after iteration i every sequence of
    the group holds `base + i` KV tokens and the group has generated `gen_base + i` tokens per sample; the
    n samples of a group advance in lockstep (same output length).
    """

    req: Request
    order: int
    seqs: list[int]
    output: int
    prompt: int
    n: int = 1
    computed: int = 0
    generated: int = 0
    state: int = WAITING
    phase: int = PREFILL
    base: int = 0
    gen_base: int = 0
    epoch: int = 0
    forked: bool = False
    chunk: int = 0
    first_scheduled_s: float = float("nan")
    first_token_s: float = float("nan")
    finish_s: float = float("nan")
    preemptions: int = 0
    cached_tokens: int = 0
    seq_blocks: int = 0
    replica: int = 0
    past_windows: int = 0
    """Decode only: bit i set once its context has reached the KV manager's window cap i."""
    ready_s: float = 0.0
    """KV tiers, blocking load: its prefill starts no earlier than this (its blocks have arrived)."""
    hit_by_tier: tuple[tuple[str, int], ...] = ()
    """Prompt tokens its first admission found, by tier (Hit.by_tier)."""
    load_wait_s: float = 0.0
    """Seconds its prefill waited for KV loaded from the tiers (over all admissions)."""
    tier_loaded: dict[str, int] | None = None
    """Prompt tokens loaded from each tier below the GPU (medium -> tokens), over all its admissions on
    every replica (a re-admission after preemption, a P/D decode replica's); None while it loaded none."""
    remote_tokens: int = 0
    """P/D, on a decode replica: prompt tokens whose KV a prefill replica holds for it (until admitted)."""
    prefill_replica: int = -1
    prefill_done_s: float = float("nan")
    """P/D: when its prefill finished on the prefill replica."""
    last_chunk_s: float = float("nan")
    """P/D: when the prefill replica's iteration that finished its prefill began (layerwise streaming)."""
    decode_admit_s: float = float("nan")
    """P/D: when the decode replica admitted it (its blocks reserved)."""
    kv_arrival_s: float = float("nan")
    kv_transfer_bytes: float = 0.0
    kv_transfer_s: float = 0.0
    """P/D: seconds from asking the link for the transfer to the KV's arrival (queueing included)."""
