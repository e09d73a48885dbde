"""The request record every workload generator and trace reader produces, and `RequestTable`: a stream
held as columns, its requests built as they are read."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

Segment = tuple[int, int]
"""(content_id, length in tokens). Equal content ids mean equal token content, so two prompts that start
with the same segments share a prefix. A prompt is a tuple of segments whose lengths sum to prompt_len."""


@dataclass(slots=True)
class Request:
    """One inference request as the engine sees it.

    arrival_s is the open-loop arrival time. A request with ``after >= 0`` is a follow-up (the next turn of a
    session, the next request of a closed-loop user): it is released ``think_s`` seconds after request
    ``after`` completes, and its arrival_s is set then. ``segments`` describes prompt content for prefix
    caching; an empty tuple means content unique to this request. ``output_id`` is the content id of the
    tokens the request generates, for workloads whose later prompts quote them (a chat answer, an agent's
    tool call); -1 means content unique to this request. ``beam_width`` > 1 asks for beam search with that
    many beams (the engine then runs beam_width sequences; ``n`` stays 1). ``rereads`` lists content ids
    of prompt segments the request re-reads while decoding (an agent consulting an old tool output);
    token-level sparsity policies move attention back onto them (kvsim/workload/rereads.py marks them).
    ``adapter`` is the LoRA adapter the request asks for (its index in the scenario's `lora` adapters,
    set by kvsim/lora/adapters.py), -1 for the base model; ``adapter_name`` is the name a trace's adapter
    column gives ("" for none), which that module turns into ``adapter``.
    """

    rid: int
    arrival_s: float
    prompt_len: int
    output_len: int
    n: int = 1
    segments: tuple[Segment, ...] = ()
    session: int = -1
    after: int = -1
    think_s: float = 0.0
    source: str = ""
    output_id: int = -1
    beam_width: int = 1
    rereads: tuple[int, ...] = ()
    adapter: int = -1
    adapter_name: str = ""


class RequestTable(Sequence[Request]):
    """A request stream held as columns, a `Request` built each time one is read: the memory of a stream
    of N requests is a few numpy arrays, not N objects. Row i is the request with rid i.

    The columns are 1-d numpy arrays of one length (`after` None: no follow-ups; `think_s` None: 0;
    `session` / `output_id` / `adapter` None: -1); `segments(i)`, when given, builds row i's segments. A
    Request read from the table is a new object each time: changes to it do not reach the table (the engine
    reads each request once, `follow_ups` releases each follow-up once)."""

    __slots__ = ("arrival_s", "prompt_len", "output_len", "after", "think_s", "session", "output_id", "n",
                 "source", "beam_width", "segments", "adapter", "_cols")

    def __init__(self, arrival_s: np.ndarray, prompt_len: np.ndarray, output_len: np.ndarray, *,
                 after: np.ndarray | None = None, think_s: np.ndarray | None = None,
                 session: np.ndarray | None = None, output_id: np.ndarray | None = None, n: int = 1,
                 source: str = "", beam_width: int = 1,
                 segments: Callable[[int], tuple[Segment, ...]] | None = None) -> None:
        self.arrival_s = arrival_s
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.after = after
        self.think_s = think_s
        self.session = session
        self.output_id = output_id
        self.n = n
        self.source = source
        self.beam_width = beam_width
        self.segments = segments
        self.adapter: np.ndarray | None = None
        """The LoRA adapter of each row (kvsim/lora/adapters.py sets it), None: every row the base model."""

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name != "_cols":  # (a column set: request() reads the columns afresh)
            object.__setattr__(self, "_cols", None)

    def __getstate__(self) -> dict:
        """Copies and pickles: the fields, not the columns' views (request() makes them again)."""
        return {name: getattr(self, name) for name in RequestTable.__slots__
                if name != "_cols" and hasattr(self, name)}

    def __setstate__(self, state: dict) -> None:
        object.__setattr__(self, "_cols", None)
        for name, value in state.items():
            setattr(self, name, value)

    def _columns(self) -> tuple:
        """What request() reads: the columns, each indexable (see item_view), None where the column is;
        then segments, n, source and beam_width (read once, not per request: a field set clears it)."""
        cols = (*(None if a is None else item_view(a) for a in (
            self.arrival_s, self.prompt_len, self.output_len, self.session, self.after, self.think_s,
            self.output_id, self.adapter)), self.segments, self.n, self.source, self.beam_width)
        self._cols = cols
        return cols

    def __len__(self) -> int:
        return len(self.arrival_s)

    @overload
    def __getitem__(self, i: int) -> Request: ...

    @overload
    def __getitem__(self, i: slice) -> list[Request]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.request(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"request index {i} out of range ({n} requests)")
        return self.request(j)

    def __iter__(self) -> Iterator[Request]:
        return map(self.request, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (RequestTable, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-looking sequence, like a list

    def request(self, i: int) -> Request:
        """Row i as a new Request (i in 0..len-1)."""
        cols = self._cols
        if cols is None:
            cols = self._columns()
        (arrival_s, prompt_len, output_len, session, after, think_s, output_id, adapter, segments, n, source,
         beam_width) = cols
        # (positional, in Request's field order: once per request)
        return Request(
            i, arrival_s[i], prompt_len[i], output_len[i], n, () if segments is None else segments(i),
            -1 if session is None else session[i], -1 if after is None else after[i],
            0.0 if think_s is None else think_s[i], source, -1 if output_id is None else output_id[i],
            beam_width, (), -1 if adapter is None else adapter[i])

    def open_loop(self) -> Iterator[Request]:
        """The requests that are not follow-ups (after < 0), in rid order, built as they are read."""
        if self.after is None:
            return iter(self)
        return map(self.request, np.flatnonzero(self.after < 0).tolist())

    def follow_ups(self) -> FollowUps:
        """rid -> its follow-ups, each handed out once (see FollowUps)."""
        return FollowUps(self)


class FollowUps:
    """The follow-ups of a RequestTable by the rid they wait for, as the engine's dict of lists was:
    `pop(rid, default)` returns that rid's follow-ups (new Requests, in rid order) the first time, then
    `default`. Held as two arrays (offsets by parent rid, children) and one byte per request. (Compiled, an
    extension type, request.pxd: its int64 arrays read through typed views.)"""

    __slots__ = ("table", "offsets", "children", "taken", "_offsets", "_children")

    def __init__(self, table: RequestTable) -> None:
        self.table = table
        n = len(table)
        after = table.after
        if after is None:
            after = np.zeros(0, dtype=np.int64)
        kids = np.flatnonzero(after >= 0)
        parents = after[kids]
        order = np.argsort(parents, kind="stable")
        self.children = kids[order]
        counts = np.bincount(parents, minlength=n) if len(parents) else np.zeros(n, dtype=np.int64)
        self.offsets = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(counts)])
        self.taken = bytearray(len(self.offsets) - 1)
        self._offsets = item_view(self.offsets)
        self._children = item_view(self.children)

    def pop(self, rid: int, default=()):
        """rid's follow-ups the first time it is asked, else `default`."""
        taken = self.taken
        if not 0 <= rid < len(taken) or taken[rid]:
            return default
        taken[rid] = 1
        offsets = self._offsets  # (compiled: a typed view of int64s, C reads; request.pxd)
        lo = offsets[rid]
        hi = offsets[rid + 1]
        if lo == hi:
            return default
        if hi == lo + 1:  # (a session's next turn: one follow-up)
            return [self.table.request(self._children[lo])]
        return [self.table.request(j) for j in self.children[lo:hi].tolist()]


_VIEW_FORMATS = frozenset(("d", "f", "q", "l", "i", "h", "b", "Q", "L", "I", "H", "B", "?"))
"""Buffer formats (native byte order) whose memoryview items are the Python values numpy's item() gives."""


def item_view(a: np.ndarray):
    """An indexable over the 1-d array a whose [i] is a.item(i): a memoryview of it where its format allows
    (a C read per item instead of a method call), else a wrapper calling item()."""
    try:
        view = memoryview(a)
    except TypeError:
        return _Items(a)
    if view.ndim == 1 and view.format in _VIEW_FORMATS:
        return view
    view.release()
    return _Items(a)


class _Items:
    """a[i] as a.item(i) (item_view's fallback)."""

    __slots__ = ("a",)

    def __init__(self, a) -> None:
        self.a = a

    def __getitem__(self, i: int):
        return self.a.item(i)


def requests_per_arrival(stream: Sequence[Request]) -> float:
    """Requests per open-loop arrival (a request that is no follow-up) of a stream: what one arrival counted
    by `workload.arrival.rate` brings (1 for synthetic and rag, turns per session for chat, steps and
    branches per episode for agentic). 1.0 for an empty stream."""
    if isinstance(stream, RequestTable):
        fresh = len(stream) if stream.after is None else int((stream.after < 0).sum())
    else:
        fresh = sum(1 for r in stream if r.after < 0)
    return len(stream) / fresh if fresh else 1.0
