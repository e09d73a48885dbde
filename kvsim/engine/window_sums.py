"""The scheduler's context sums at each window cap (sliding and compressed layers): how many decoding
sequences are below each cap and what their contexts add up to, kept in O(changes) per iteration."""

from __future__ import annotations

import heapq

from kvsim.engine.group import DECODE, RUNNING, Group


class WindowSums:
    """Per window cap: the decoding sequences below it (count, sum of base) and past it (count), and a heap
    of when each sequence below reaches it. A decoding group's context at decode iteration `it` is
    `base + it`; one past cap `c` holds `c` tokens of that group's layers, one below it its context."""

    __slots__ = ("windows", "below_n", "below_base", "past_n", "_heap", "_push_no", "_running")

    def __init__(self, windows: tuple[int, ...], running=None) -> None:
        self.windows = windows
        self._running = {} if running is None else running
        """The scheduler's running groups (read only in an iteration of prompts only: context)."""
        self.below_n = [0] * len(windows)
        self.below_base = [0] * len(windows)
        self.past_n = [0] * len(windows)
        self._heap: list[tuple[int, int, int, Group, int]] = []
        self._push_no = 0

    def join(self, g: Group, it_next: int) -> None:
        """g decodes from iteration it_next with context base + it: below or past each window cap."""
        g.past_windows = 0
        for i, cap in enumerate(self.windows):
            if g.base + it_next >= cap:
                g.past_windows |= 1 << i
                self.past_n[i] += g.n
            else:
                self.below_n[i] += g.n
                self.below_base[i] += g.n * g.base
                self._push_no += 1
                heapq.heappush(self._heap, (cap - g.base, self._push_no, g.epoch, g, i))

    def leave(self, g: Group) -> None:
        for i in range(len(self.windows)):
            if g.past_windows >> i & 1:
                self.past_n[i] -= g.n
            else:
                self.below_n[i] -= g.n
                self.below_base[i] -= g.n * g.base
        g.past_windows = 0

    def cross(self, it: int) -> None:
        """Move the decode sequences whose context reaches a window cap at iteration it past it."""
        heap = self._heap
        while heap and heap[0][0] <= it:
            _, _, epoch, g, i = heapq.heappop(heap)
            if epoch != g.epoch or g.state != RUNNING or g.past_windows >> i & 1:
                continue
            g.past_windows |= 1 << i
            self.below_n[i] -= g.n
            self.below_base[i] -= g.n * g.base
            self.past_n[i] += g.n

    def context(self, it: int, prefilling, paused: bool = False) -> tuple[int, ...]:
        """Per cap, what every sequence on the GPU holds at decode iteration it: the decoding ones plus
        each prefilling group's computed and scheduled tokens, up to the cap. paused: an iteration of
        prompts only (vLLM V0), in which the decode clock stands at it and no decoding sequence writes its
        token: each holds min(base + it - 1, cap), one less below the cap, and one less past it for those
        whose base + it is the cap (they reached it at it; O(running groups) then)."""
        if paused:
            windowed = list(self.context(it - 1, prefilling))
            for g in self._running:
                if g.phase == DECODE:
                    for i, cap in enumerate(self.windows):
                        if g.base + it == cap:
                            windowed[i] -= g.n
            return tuple(windowed)
        windowed = [b + n * it + p * cap for b, n, p, cap in
                    zip(self.below_base, self.below_n, self.past_n, self.windows, strict=True)]
        for g in prefilling:
            held = g.computed + g.chunk
            for i, cap in enumerate(self.windows):
                windowed[i] += min(held, cap)
        return tuple(windowed)

    def batch_figures(self, it: int, prefills: list[Group]) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """Batch.decode_window_tokens (per cap, the KV tokens the decoding sequences hold in that cap's
        layers at iteration it) and Batch.prefill_window_pairs (per cap, the (query, key) pairs of this
        iteration's prefill chunks inside the window)."""
        decode = tuple(b + n * it + p * cap for b, n, p, cap in
                       zip(self.below_base, self.below_n, self.past_n, self.windows, strict=True))
        pairs = []
        for cap in self.windows:
            w = cap + 1
            total = 0.0
            for g in prefills:
                c, p = g.chunk, g.computed
                inside = max(0, min(c, w - p))  # queries that still see every earlier key
                total += inside * p + inside * (inside + 1) / 2 + (c - inside) * w
            pairs.append(total)
        return decode, tuple(pairs)
