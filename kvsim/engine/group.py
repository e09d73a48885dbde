"""Per-request engine state: a sequence group (one request, n parallel samples)."""

from __future__ import annotations

from kvsim.workload.request import Request

WAITING, RUNNING, SWAPPED, FINISHED = 0, 1, 2, 3
PREFILL, DECODE = 0, 1
_NAN = float("nan")


class Group:
    """One request inside the engine (an extension type with C integer fields when compiled: group.pxd).

    Prefill phase: `computed` of `prompt` tokens have KV. `prompt` is the request's prompt plus, after a
    recompute preemption, the tokens generated before it. Decode phase: after iteration i every sequence of
    the group holds `base + i` KV tokens and the group has generated `gen_base + i` tokens per sample; the
    n samples of a group advance in lockstep (same output length).

    past_windows: decode only, bit i set once its context has reached the KV manager's window cap i.
    ready_s: KV tiers, blocking load: its prefill starts no earlier than this (its blocks have arrived).
    hit_by_tier: prompt tokens its first admission found, by tier (Hit.by_tier).
    load_wait_s: seconds its prefill waited for KV loaded from the tiers (over all admissions).
    tier_loaded: prompt tokens loaded from each tier below the GPU (medium -> tokens), over all its
    admissions on every replica (a re-admission after preemption, a P/D decode replica's); None while it
    loaded none.
    remote_tokens: P/D, on a decode replica: prompt tokens whose KV a prefill replica holds for it (until
    admitted). prefill_done_s: P/D, when its prefill finished on the prefill replica. last_chunk_s: P/D,
    when the prefill replica's iteration that finished its prefill began (layerwise streaming).
    decode_admit_s: P/D, when the decode replica admitted it (its blocks reserved). kv_transfer_s: P/D,
    seconds from asking the link for the transfer to the KV's arrival (queueing included).
    """

    __slots__ = ("req", "order", "seqs", "output", "prompt", "n", "computed", "generated", "state", "phase",
                 "base", "gen_base", "epoch", "forked", "chunk", "first_scheduled_s", "first_token_s",
                 "finish_s", "preemptions", "cached_tokens", "seq_blocks", "replica", "past_windows",
                 "ready_s", "hit_by_tier", "load_wait_s", "tier_loaded", "remote_tokens", "prefill_replica",
                 "prefill_done_s", "last_chunk_s", "decode_admit_s", "kv_arrival_s", "kv_transfer_bytes",
                 "kv_transfer_s")

    def __init__(self, req: Request, order: int, seqs: list[int], output: int, prompt: int, n: int = 1,
                 computed: int = 0, generated: int = 0, state: int = WAITING, phase: int = PREFILL,
                 base: int = 0, gen_base: int = 0, epoch: int = 0, forked: bool = False, chunk: int = 0,
                 first_scheduled_s: float = _NAN, first_token_s: float = _NAN, finish_s: float = _NAN,
                 preemptions: int = 0, cached_tokens: int = 0, seq_blocks: int = 0, replica: int = 0,
                 past_windows: int = 0, ready_s: float = 0.0, hit_by_tier: tuple[tuple[str, int], ...] = (),
                 load_wait_s: float = 0.0, tier_loaded: dict[str, int] | None = None, remote_tokens: int = 0,
                 prefill_replica: int = -1, prefill_done_s: float = _NAN, last_chunk_s: float = _NAN,
                 decode_admit_s: float = _NAN, kv_arrival_s: float = _NAN, kv_transfer_bytes: float = 0.0,
                 kv_transfer_s: float = 0.0) -> None:
        self.req = req
        self.order = order
        self.seqs = seqs
        self.output = output
        self.prompt = prompt
        self.n = n
        self.computed = computed
        self.generated = generated
        self.state = state
        self.phase = phase
        self.base = base
        self.gen_base = gen_base
        self.epoch = epoch
        self.forked = forked
        self.chunk = chunk
        self.first_scheduled_s = first_scheduled_s
        self.first_token_s = first_token_s
        self.finish_s = finish_s
        self.preemptions = preemptions
        self.cached_tokens = cached_tokens
        self.seq_blocks = seq_blocks
        self.replica = replica
        self.past_windows = past_windows
        self.ready_s = ready_s
        self.hit_by_tier = hit_by_tier
        self.load_wait_s = load_wait_s
        self.tier_loaded = tier_loaded
        self.remote_tokens = remote_tokens
        self.prefill_replica = prefill_replica
        self.prefill_done_s = prefill_done_s
        self.last_chunk_s = last_chunk_s
        self.decode_admit_s = decode_admit_s
        self.kv_arrival_s = kv_arrival_s
        self.kv_transfer_bytes = kv_transfer_bytes
        self.kv_transfer_s = kv_transfer_s

    def __repr__(self) -> str:
        return f"Group(req={self.req!r}, order={self.order!r}, state={self.state!r}, phase={self.phase!r})"
