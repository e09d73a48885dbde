"""How the scheduler sizes a decoding sequence's KV: the DecodeSizing interface and its default.

The Scheduler (kvsim/engine/scheduler.py) owns the running set, the KV manager calls, preemption and its
sums (decode sequences, context tokens, blocks). A DecodeSizing decides how many KV tokens and blocks a
decoding group holds, and the scheduler calls it at these points:

- `on_join_decode(g, resize) -> int`: g's prefill ended (the scheduler has counted its sequences and
  blocks); returns the change of the held offset.
- `on_leave_decode(g) -> int`: g stops decoding (finished or preempted); the change of the held offset.
- `before_decode(it, resize) -> int`: iteration it, after the scheduler's block-boundary allocations;
  the change of the held offset.
- `swap_in_blocks(g, length, held) -> int`: a swapped-out group of context `length`, `held` blocks in
  host memory, asks to come back: the free blocks it needs (the scheduler adds one per sequence).
- `on_swap_in(g, it, resize) -> int`: g came back and decodes in iteration it; the change of the offset.
- `batch_extras(figures) -> Extras`: the iteration's batch is being built; closes the strategy's
  accounting of the iteration: (re-read recall, offload, compaction copy, prefetch bytes, extra KV tokens
  the decodes read beyond the held offset: prefetched entries read as they arrive).
- `record_overlap(compute_s, transfer_s, exposed_s)`: the cost model's split of the iteration's prefetch
  (CostModel.prefetch_overlap), called only for a batch with prefetch bytes.
- `decode_steps(g, remaining) -> int`: g starts decoding with `remaining` output
  tokens to go; the iterations it decodes (one token each: `remaining`; speculative decoding: fewer).
- `progress(g, done) -> int` (not by context only): g is preempted after iteration `done`; the tokens it
  generated beyond one per iteration (0 but for speculative decoding).

`decode_tokens` is the query tokens a decoding sequence brings to an iteration: 1, or k + 1 with k draft
tokens to verify (kvsim/engine/spec_sizing.py); the scheduler charges its token budget that many.

The **held offset** is the sum over decoding sequences of (KV tokens held and read - context length):
the scheduler adds it to its context sum for `Batch.decode_context_tokens` and the token states. It is 0
for the default. A strategy never writes scheduler attributes: to change a group's blocks it calls
`resize(g, blocks, may_preempt=True) -> bool`, the scheduler's own operation (grow through
allocate-or-preempt, shrink by re-mapping onto fresh blocks; False when g was preempted, or when a
preemption was needed and not allowed: then nothing changed). `figures()` gives the scheduler's
(context tokens of its sequences, blocks of the decoding sequences, blocks of the prefilling ones). A
strategy with recorder columns also answers `timeline_values()` and `request_values(rid)` (their column
groups are registered before the run: kvsim/engine/sparse_columns.py for sparsity).

`by_context` says which growth the scheduler runs: True, every decoding sequence holds its whole context,
grown one block at a time when it crosses a block boundary (the scheduler's heap, O(changes) per
iteration) and given room for its next token when swapped in; False, the strategy sizes every decoding
group itself, each iteration in `before_decode` (token-level sparsity: kvsim/engine/sparse_sizing.py).
A sizing by context is the default, ContextSizing: the scheduler skips its hooks on the hot path (each is a
no-op, and decode_steps is the tokens left).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kvsim.engine.group import Group

Resize = Callable[..., bool]
"""The scheduler's `resize(g, blocks, may_preempt=True) -> bool` (blocks per sequence)."""
Figures = Callable[[], tuple[int, int, int]]
"""The scheduler's `() -> (context tokens, decode blocks, prefill blocks)` of the iteration scheduled."""

Extras = tuple[float, float, float, float, int]
"""(recall, offload, kv copy, prefetch bytes, extra decode-read tokens) of one iteration."""
NO_EXTRAS: Extras = (0.0, 0.0, 0.0, 0.0, 0)


def resize_each(states: dict, size: Callable[..., int], it: int, resize: Resize) -> int:
    """`size(g, state, it, resize)` for each group of `states` still there when its turn comes (an earlier
    group's growth may have preempted it), in insertion order; the summed change of the held offset. The
    before_decode of a sizing that resizes every decoding group each iteration."""
    delta = 0
    for g, st in list(states.items()):
        if g in states:
            delta += size(g, st, it, resize)
    return delta


class DecodeSizing(Protocol):
    """What the scheduler asks about its decoding groups' KV (see the module docstring). A sizing with
    `by_context` True has its join / leave hooks and decode_steps skipped (the scheduler assumes
    ContextSizing's: no-ops, and the tokens left); a strategy that needs them sets `by_context` False."""

    by_context: bool
    decode_tokens: int

    def on_join_decode(self, g: Group, resize: Resize) -> int: ...
    def on_leave_decode(self, g: Group) -> int: ...
    def before_decode(self, it: int, resize: Resize) -> int: ...
    def swap_in_blocks(self, g: Group, length: int, held: int) -> int: ...
    def on_swap_in(self, g: Group, it: int, resize: Resize) -> int: ...
    def batch_extras(self, figures: Figures) -> Extras: ...
    def record_overlap(self, compute_s: float, transfer_s: float, exposed_s: float) -> None: ...
    def decode_steps(self, g: Group, remaining: int) -> int: ...
    def progress(self, g: Group, done: int) -> int: ...


class ContextSizing:
    """The default: a decoding sequence holds (and reads) its whole context. Growth is the scheduler's
    block-boundary heap (`by_context`); nothing here changes a size or charges anything."""

    __slots__ = ()

    by_context = True
    decode_tokens = 1

    def on_join_decode(self, g: Group, resize: Resize) -> int:
        return 0

    def on_leave_decode(self, g: Group) -> int:
        return 0

    def before_decode(self, it: int, resize: Resize) -> int:
        return 0

    def swap_in_blocks(self, g: Group, length: int, held: int) -> int:
        return held

    def on_swap_in(self, g: Group, it: int, resize: Resize) -> int:
        return 0

    def batch_extras(self, figures: Figures) -> Extras:
        return NO_EXTRAS

    def record_overlap(self, compute_s: float, transfer_s: float, exposed_s: float) -> None:
        return None

    def decode_steps(self, g: Group, remaining: int) -> int:
        return remaining

    def progress(self, g: Group, done: int) -> int:
        return 0
