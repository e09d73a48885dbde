"""The adapters of a `lora` section as arrays (names, ranks, popularity), and which adapter each request
of a stream asks for: drawn by popularity once per session (a conversation's follow-ups keep it), or
named by a trace's adapter column.

vLLM's prefix cache keys a block by its tokens and the request's adapter
(vllm/v1/core/kv_cache_utils.py `_gen_lora_extra_hash_keys`: an extra key of every block hash), so
requests of different adapters never share cached KV. kvsim does the same by moving an adapter request's
content ids (prompt segments, output id, re-read ids) into a band of its own: id + (adapter + 1) x 2^64,
above every generator's band and kind mix's component shift (c x 2^52); the base model's ids are unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kvsim.errors import KvsimError, excerpt
from kvsim.lora.config import AdapterGroup, LoraConfig
from kvsim.workload.request import Request, RequestTable

ADAPTER_ID_SHIFT = 64
"""Content ids of adapter a's requests are shifted by (a + 1) << ADAPTER_ID_SHIFT (module docstring)."""
DRAW_STREAM = 0x10A4
"""The adapter draws' own numpy stream: default_rng([seed, DRAW_STREAM]) (the workload's draws are
unchanged by a lora section)."""


@dataclass(frozen=True, slots=True)
class AdapterTable:
    """Every adapter of a `lora` section, in the order it lists them (a group's adapters in index order):
    `names`, `ranks` (int64) and `probs`, each adapter's share of the adapter requests (popularity over
    the sum; a group weighs 1 in all, split uniformly or by Zipf (i + 1)^-s inside it)."""

    names: tuple[str, ...]
    ranks: np.ndarray
    probs: np.ndarray

    def __len__(self) -> int:
        return len(self.names)

    def index(self) -> dict[str, int]:
        """name -> adapter index."""
        return {n: i for i, n in enumerate(self.names)}


def adapter_table(cfg: LoraConfig) -> AdapterTable:
    names: list[str] = []
    ranks: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for a in cfg.adapters:
        if isinstance(a, AdapterGroup):
            names += [f"{a.prefix}{j}" for j in range(a.count)]
            ranks.append(np.full(a.count, a.rank, dtype=np.int64))
            if a.popularity == "zipf":
                w = np.arange(1, a.count + 1, dtype=np.float64) ** -a.zipf_s
            else:
                w = np.ones(a.count)
            weights.append(w / w.sum())
        else:
            names.append(a.name)
            ranks.append(np.array([a.rank], dtype=np.int64))
            weights.append(np.array([a.popularity], dtype=np.float64))
    if not names:
        return AdapterTable((), np.zeros(0, dtype=np.int64), np.zeros(0))
    w = np.concatenate(weights)
    total = w.sum()
    probs = w / total if total > 0 else w
    return AdapterTable(tuple(names), np.concatenate(ranks), probs)


def tag_requests(stream: Sequence[Request], cfg: LoraConfig, table: AdapterTable, seed: int,
                 where: str = "workload.trace") -> Sequence[Request]:
    """`stream` with each request's adapter set: from the trace's adapter names where the stream carries
    any (a name that is not among the adapters is an error naming it; an empty name is the base model),
    else drawn: one draw per session (a request without a session is its own), the base model with
    probability base_fraction, else adapter i with probability probs[i]."""
    if isinstance(stream, RequestTable):
        stream.adapter = _draw(_keys(stream), cfg, table, seed)
        _shift_table(stream)
        return stream
    if any(r.adapter_name for r in stream):
        index = table.index()
        for r in stream:
            name = r.adapter_name
            if not name:
                r.adapter = -1
                continue
            a = index.get(name)
            if a is None:
                raise KvsimError(f"{where}: request {r.rid} asks for LoRA adapter {excerpt(name)}, which "
                                 "lora.adapters does not name")
            r.adapter = a
        _shift_list(stream)
        return stream
    session = np.fromiter((r.session for r in stream), dtype=np.int64, count=len(stream))
    rid = np.fromiter((r.rid for r in stream), dtype=np.int64, count=len(stream))
    drawn = _draw(np.where(session >= 0, session, -1 - rid), cfg, table, seed)
    for r, a in zip(stream, drawn.tolist(), strict=True):
        r.adapter = a
    _shift_list(stream)
    return stream


def _shift_list(stream: Sequence[Request]) -> None:
    for r in stream:
        if r.adapter < 0:
            continue
        shift = (r.adapter + 1) << ADAPTER_ID_SHIFT
        r.segments = tuple((cid + shift, n) for cid, n in r.segments)
        r.rereads = tuple(cid + shift for cid in r.rereads)
        if r.output_id >= 0:
            r.output_id += shift


def _shift_table(t: RequestTable) -> None:
    adapter = t.adapter
    if adapter is None or not (adapter >= 0).any():
        return
    if t.output_id is not None:  # (Python ints: the shifted ids do not fit int64)
        out = t.output_id.astype(object)
        mask = (adapter >= 0) & (t.output_id >= 0)
        out[mask] = out[mask] + np.array([(a + 1) << ADAPTER_ID_SHIFT for a in adapter[mask].tolist()],
                                         dtype=object)
        t.output_id = out
    if t.segments is not None:
        build = t.segments

        def shifted(i: int, build=build, adapter=adapter) -> tuple:
            a = adapter.item(i)
            segs = build(i)
            if a < 0:
                return segs
            shift = (a + 1) << ADAPTER_ID_SHIFT
            return tuple((cid + shift, n) for cid, n in segs)

        t.segments = shifted


def _keys(t: RequestTable) -> np.ndarray:
    rid = np.arange(len(t), dtype=np.int64)
    if t.session is None:
        return -1 - rid
    session = np.asarray(t.session, dtype=np.int64)
    return np.where(session >= 0, session, -1 - rid)


def _draw(keys: np.ndarray, cfg: LoraConfig, table: AdapterTable, seed: int) -> np.ndarray:
    """The adapter of each key's requests (-1: the base model), one draw per distinct key in key order."""
    if not len(table) or not len(keys) or not table.probs.sum() > 0:
        return np.full(len(keys), -1, dtype=np.int64)
    rng = np.random.default_rng([seed, DRAW_STREAM])
    uniq, inverse = np.unique(keys, return_inverse=True)
    base = rng.random(len(uniq)) < cfg.base_fraction
    choice = rng.choice(len(table), size=len(uniq), p=table.probs)
    return np.where(base, -1, choice).astype(np.int64)[inverse]
