"""`workload.rereads`: mark requests that re-read earlier prompt content while decoding.

An agent step that consults an old tool output, or a chat answer that quotes an earlier turn, moves
attention back onto KV that a token-level eviction policy may have dropped (kvsim/kvcache/sparsity). This
annotator sets `Request.rereads` to content ids of the request's own prompt segments: each request (whose
`source` is listed in `sources`, or any when the list is empty) gets a Poisson(`mean`) number of re-reads,
at most one per segment, drawn uniformly without replacement from its eligible segments: all but the first
`skip_first` and the last `skip_last`, at least `min_tokens` long. The engine spreads a request's re-reads
evenly over its decode steps (kvsim/kvcache/sparsity/tracker.py). With mean 0 nothing is drawn, so the
request stream is exactly that of the generator.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from kvsim.schema import MAX_COUNT, MAX_TOKENS, Strict


class RereadConfig(Strict):
    """How many re-reads a request makes and which prompt segments it may re-read."""

    mean: float = Field(default=0.0, ge=0, le=1000)
    """Mean re-reads per request, at most 1000 (a request re-reads each segment at most once)."""
    min_tokens: int = Field(default=32, ge=1, le=MAX_TOKENS)
    skip_first: int = Field(default=1, ge=0, le=MAX_COUNT)
    skip_last: int = Field(default=1, ge=0, le=MAX_COUNT)
    sources: list[str] = Field(default_factory=list, max_length=64)


def annotate_rereads(requests: list, cfg: RereadConfig, rng: np.random.Generator) -> list:
    """Set `rereads` on the requests (in place) as the module docstring says; return the list."""
    if cfg.mean <= 0 or not requests:
        return requests
    child = np.random.default_rng(int(rng.integers(0, 2**63 - 1)))
    counts = child.poisson(cfg.mean, size=len(requests))
    wanted = set(cfg.sources)
    for r, k in zip(requests, counts.tolist(), strict=True):
        if k == 0 or (wanted and r.source not in wanted):
            continue
        segs = r.segments[cfg.skip_first: max(cfg.skip_first, len(r.segments) - cfg.skip_last)]
        ids = list(dict.fromkeys(cid for cid, length in segs if length >= cfg.min_tokens))
        if not ids:
            continue
        pick = child.choice(len(ids), size=min(k, len(ids)), replace=False)
        r.rereads = tuple(ids[i] for i in sorted(pick.tolist()))
    return requests
