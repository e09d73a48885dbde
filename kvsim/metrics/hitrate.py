"""Prefix-cache hit rate against cache capacity for an LRU block cache, in one pass (Mattson stack
distances), with optional spatial sampling (SHARDS) for huge traces.

The cache model. Requests are taken in order (`request_order`). Request r with prompt P and output O has
chained block keys (kvsim/kvcache/hashing.py) for its full blocks; it *looks up* its first
floor((P - 1) / block_size) blocks (the last prompt token is always computed, as in the engine), then
*touches* its first floor((P + O - 1) / block_size) blocks (prompt and generated KV; the last output
token's KV is never written) from the deepest to the first, so a block is always more recent than any
block after it in a prompt. A lookup hits when the block is in the cache. Because every access of a block
also accesses all blocks before it, later, the hits of a request are always a prefix of its blocks, as in
a prefix cache. An LRU cache of C blocks holds exactly the C most recently touched distinct blocks, so a
lookup hits iff its stack distance (1 + distinct blocks touched since the block's last touch) is <= C:
one pass gives the hit counts of every capacity.

Distances come from a Fenwick tree over touch times holding a 1 at each block's latest touch (O(log n) per
access, vectorised per request). Sampling at rate R < 1 keeps only blocks whose key hashes below R (the
same blocks in every request) and scales their distances by 1/R.

Tiers (`tier_bounds`, `tier_hits`): a chain of caches below the GPU (CPU DRAM, SSD, ...) serves from the
same distances: in an exclusive chain tier k serves the lookups with distance in (C_1+..+C_{k-1},
C_1+..+C_k], in an inclusive one those in (max(C_1..C_{k-1}), C_k]; `tier_replay_hits` checks both.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from kvsim.kvcache.hashing import request_content
from kvsim.workload.request import Request

_MASK64 = (1 << 64) - 1
_SAMPLE_BITS = 24


def request_order(requests: list[Request]) -> list[Request]:
    """Requests by estimated arrival: a follow-up arrives think_s after its parent's estimated arrival
    (service time ignored); ties by rid."""
    at: dict[int, float] = {}
    for r in requests:  # a follow-up comes after its parent in a request list
        at[r.rid] = at[r.after] + r.think_s if r.after >= 0 and r.after in at else r.arrival_s
    return sorted(requests, key=lambda r: (at[r.rid], r.rid))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 arrays (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _fold(pieces: list[tuple[int, int, int]]) -> int:
    """Fingerprint of a block made of several segment pieces (cid, offset, length)."""
    h = 0
    for cid, off, take in pieces:
        x = np.array([(h * _K2 + cid * _K1 + off * 31 + take) & _MASK64], dtype=np.uint64)
        h = int(_mix(x)[0])
    return h


_K1 = 0xD6E8FEB86659FD93
_K2 = 0xA0761D6478BD642F
_P = 0x100000001B3 | 1
_P_INV = pow(_P, -1, 1 << 64)


def block_fingerprints(segments: tuple[tuple[int, int], ...], n: int, block_size: int) -> np.ndarray:
    """uint64 fingerprints of the first n full blocks' contents (a block inside one segment: its content
    id and offset; one across segments: all its pieces). Fewer if the content ends first."""
    parts: list[np.ndarray] = []   # pre-mix values of runs of whole blocks, in block order
    multi: dict[int, int] = {}     # block index -> fingerprint of a block across segments
    filled = 0
    pieces: list[tuple[int, int, int]] = []
    for cid, length in segments:
        if filled == n:
            break
        off = 0
        if pieces:   # finish the block that straddles into this segment
            need = block_size - sum(p[2] for p in pieces)
            take = min(need, length)
            pieces.append((cid, 0, take))
            off = take
            if take == need:
                multi[filled] = _fold(pieces)
                parts.append(np.zeros(1, dtype=np.uint64))
                filled += 1
                pieces = []
        whole = min((length - off) // block_size, n - filled)
        if whole > 0:
            parts.append(np.arange(off, off + whole * block_size, block_size, dtype=np.uint64)
                         + np.uint64(cid * _K1 & _MASK64))
            filled += whole
            off += whole * block_size
        if off < length and filled < n:
            pieces.append((cid, off, length - off))
    if not parts:
        return np.zeros(0, dtype=np.uint64)
    out = _mix(np.concatenate(parts))
    for i, h in multi.items():
        out[i] = h
    return out


def chain(fingerprints: np.ndarray) -> np.ndarray:
    """Prefix keys: key_i = mix(sum_{j<=i} f_j P^(i-j) mod 2^64), so equal keys mean equal blocks 0..i."""
    n = len(fingerprints)
    if n == 0:
        return fingerprints
    p = np.full(n, _P, dtype=np.uint64)
    p[0] = 1
    pw = np.cumprod(p)                       # P^i
    q = np.full(n, _P_INV, dtype=np.uint64)
    q[0] = 1
    inv = np.cumprod(q)                      # P^-i
    return _mix(pw * np.cumsum(fingerprints * inv))


def request_blocks(r: Request, block_size: int) -> tuple[np.ndarray, int]:
    """(keys of the blocks r touches, how many leading ones it looks up)."""
    touch = (r.prompt_len + r.output_len - 1) // block_size
    keys = chain(block_fingerprints(request_content(r), touch, block_size))
    return keys, min((r.prompt_len - 1) // block_size, len(keys))


def sampled(keys: np.ndarray, rate: float) -> np.ndarray:
    """SHARDS: a key is kept iff its top 24 bits, read as a fraction, are below rate."""
    return (keys >> np.uint64(64 - _SAMPLE_BITS)) < np.uint64(round(rate * (1 << _SAMPLE_BITS)))


class _Fenwick:
    """Prefix sums over positions 1..n; vectorised update and prefix over index arrays."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.tree = np.zeros(n + 1, dtype=np.int64)

    def update(self, idx: np.ndarray, delta: np.ndarray) -> None:
        while len(idx):
            np.add.at(self.tree, idx, delta)
            idx = idx + (idx & -idx)
            keep = idx <= self.n
            idx, delta = idx[keep], delta[keep]

    def prefix(self, idx: np.ndarray) -> np.ndarray:
        out = np.zeros(len(idx), dtype=np.int64)
        pos = np.arange(len(idx))
        while len(idx):
            out[pos] += self.tree[idx]
            idx = idx - (idx & -idx)
            keep = idx > 0
            idx, pos = idx[keep], pos[keep]
        return out


@dataclass(slots=True)
class HitCurveData:
    """What one pass collected: stack distances of the sampled lookups that had one (cold lookups have
    none), and the totals the rates divide by."""

    distances: np.ndarray      # sorted, already scaled by 1 / sample_rate
    sampled_lookups: int
    lookups: int               # blocks looked up, all requests
    prompt_blocks: int         # sum of ceil(prompt_len / block_size)
    prompt_tokens: int
    distinct_blocks: int       # distinct blocks touched (estimated when sampling)
    block_size: int
    sample_rate: float

    def hits(self, capacity_blocks: int) -> float:
        """Expected lookup hits in an LRU cache of capacity_blocks blocks."""
        n = int(np.searchsorted(self.distances, capacity_blocks, side="right"))
        return n / self.sample_rate

    def hit_rate_blocks(self, capacity_blocks: int) -> float | None:
        """Hit blocks / prompt blocks (sum of ceil(prompt / block_size)), as the engine's summary."""
        return self.hits(capacity_blocks) / self.prompt_blocks if self.prompt_blocks else None

    def hit_rate_tokens(self, capacity_blocks: int) -> float | None:
        """Hit blocks x block_size / prompt tokens."""
        return self.hits(capacity_blocks) * self.block_size / self.prompt_tokens if self.prompt_tokens \
            else None


def stack_distances(requests: Iterable[Request], block_size: int, sample_rate: float = 1.0) -> HitCurveData:
    """One pass over requests (in the order given) collecting LRU stack distances of their lookups."""
    keys_of: list[np.ndarray] = []
    looks: list[int] = []
    lookups = prompt_blocks = prompt_tokens = 0
    for r in requests:
        keys, look = request_blocks(r, block_size)
        lookups += look
        prompt_blocks += -(-r.prompt_len // block_size)
        prompt_tokens += r.prompt_len
        if sample_rate < 1.0:
            keep = sampled(keys, sample_rate)
            look = int(keep[:look].sum())
            keys = keys[keep]
        keys_of.append(keys)
        looks.append(look)
    sizes = np.array([len(k) for k in keys_of], dtype=np.int64)
    total = int(sizes.sum())
    ends = np.cumsum(sizes)
    # touch time (1-based) of every block, request by request, each request's block 0 last
    times = np.repeat(ends, sizes) - (np.arange(total) - np.repeat(ends - sizes, sizes))
    ids = np.unique(np.concatenate(keys_of), return_inverse=True)[1] if total else np.zeros(0, np.int64)
    by_time = np.empty(total, dtype=np.int64)
    by_time[times - 1] = ids
    order = np.argsort(by_time, kind="stable")
    same = by_time[order[1:]] == by_time[order[:-1]]
    prev_by_time = np.zeros(total, dtype=np.int64)
    prev_by_time[order[1:][same]] = order[:-1][same] + 1
    prev = prev_by_time[times - 1]           # previous touch of the same block, 0 if none
    fen = _Fenwick(total)
    distinct = 0
    found: list[np.ndarray] = []
    start = 0
    for n, look in zip(sizes.tolist(), looks, strict=True):
        pv = prev[start:start + n]
        seen = pv[:look]
        seen = seen[seen > 0]
        if len(seen):
            found.append(distinct - fen.prefix(seen) + 1)
        old = pv[pv > 0]
        new = times[start:start + n]
        fen.update(np.concatenate([old, new]),
                   np.concatenate([np.full(len(old), -1, np.int64), np.ones(n, np.int64)]))
        distinct += n - len(old)
        start += n
    dist = np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    return HitCurveData(distances=dist / sample_rate, sampled_lookups=sum(looks), lookups=lookups,
                        prompt_blocks=prompt_blocks, prompt_tokens=prompt_tokens,
                        distinct_blocks=round(distinct / sample_rate), block_size=block_size,
                        sample_rate=sample_rate)


def lru_replay_hits(requests: Iterable[Request], block_size: int, capacity_blocks: int) -> int:
    """Reference: replay the cache model above through an explicit LRU cache of capacity_blocks blocks
    and count lookup hits. O(blocks) per request; used to check `stack_distances`."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for r in requests:
        keys, look = request_blocks(r, block_size)
        keys = keys.tolist()
        hits += sum(1 for k in keys[:look] if k in cache)
        for k in reversed(keys):
            if k in cache:
                cache.move_to_end(k)
            else:
                cache[k] = None
                if len(cache) > capacity_blocks:
                    cache.popitem(last=False)
    return hits


PLACEMENTS = ("exclusive", "inclusive")


def tier_bounds(capacities: list[int], placement: str) -> list[tuple[int, int]]:
    """The stack distances (lo, hi] each tier of a chain serves, top (GPU) first.

    exclusive: a block lives in one tier; a touch puts it on top of tier 1, a tier's least recent block
    overflows to the top of the next, the last tier's is dropped. The tiers, read top to bottom, are then
    always one LRU stack cut at the cumulative capacities, so tier k serves (C_1+..+C_{k-1}, C_1+..+C_k].
    inclusive: every tier is an LRU cache of its own capacity over every touch (write-through), and a
    lookup is served by the highest tier holding the block, so tier k serves (max(C_1..C_{k-1}), C_k]
    (empty when C_k is not larger than every tier above)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    out = []
    lo = 0
    for c in capacities:
        hi = lo + c if placement == "exclusive" else max(lo, c)
        out.append((lo, hi))
        lo = hi
    return out


def tier_hits(data: HitCurveData, capacities: list[int], placement: str) -> list[float]:
    """Expected lookup hits each tier serves (tier_bounds); they sum to the hits of an LRU cache of the
    chain's last bound (the total capacity if exclusive, the largest tier if inclusive)."""
    return [data.hits(hi) - data.hits(lo) for lo, hi in tier_bounds(capacities, placement)]


def tier_replay_hits(requests: Iterable[Request], block_size: int, capacities: list[int],
                     placement: str) -> list[int]:
    """Reference: replay the cache model through explicit tiers (tier_bounds' definitions: exclusive with
    demotion to the next tier and promotion to the top on a hit, or inclusive write-through LRUs) and
    count the lookup hits each tier serves. Used to check `tier_hits`."""
    tier_bounds(capacities, placement)  # validates placement
    tiers: list[OrderedDict[int, None]] = [OrderedDict() for _ in capacities]
    hits = [0] * len(capacities)
    for r in requests:
        keys, look = request_blocks(r, block_size)
        keys = keys.tolist()
        for k in keys[:look]:
            for i, t in enumerate(tiers):
                if k in t:
                    hits[i] += 1
                    break
        for k in reversed(keys):
            if placement == "inclusive":
                for t, cap in zip(tiers, capacities, strict=True):
                    if k in t:
                        t.move_to_end(k)
                    else:
                        t[k] = None
                        if len(t) > cap:
                            t.popitem(last=False)
                continue
            for t in tiers:
                t.pop(k, None)
            moving = [k]
            for t, cap in zip(tiers, capacities, strict=True):
                for m in moving:
                    t[m] = None
                moving = [t.popitem(last=False)[0] for _ in range(len(t) - cap)] if len(t) > cap else []
    return hits
