"""The token-level methods: StreamingLLM, H2O, SnapKV, ScissorHands, PyramidKV and InfiniGen-style offload.

Each turns (context L, prompt KV P at prefill end) into what every layer group keeps. B is the policy's
budget; s = min(sink_tokens, L) the sink positions; `recent_fraction` splits B into a recent window and a
heavy part for the score-based methods. A context within the budget is kept whole.
"""

from __future__ import annotations

import math

from kvsim.kvcache.sparsity.keep import Keep, full_keep
from kvsim.kvcache.sparsity.policies import Policy, register


def _score_keep(total: int, window: int, length: int, sink_tokens: int) -> Keep:
    """`total` tokens: the sinks (their accumulated scores are the highest), the recent window, then the
    best-scoring outside tokens."""
    s = min(sink_tokens, length)
    sinks = min(s, total)
    window = min(window, total - sinks, length - s)
    return Keep(sinks, window, total - window - sinks)


@register
class Streaming(Policy):
    """StreamingLLM: the sink tokens plus a sliding window of the most recent B - sinks tokens."""

    name = "streaming"
    summary = "attention sinks + sliding window"

    def horizon(self, length: int, prompt: int) -> tuple[int, float]:
        return self._budget_horizon(length)

    def keeps(self, length: int, prompt: int) -> list[Keep]:
        b = self.budget(length)
        if length <= b:
            return [full_keep(length, self.sink_tokens)] * self.groups
        sinks = min(self.sink_tokens, b)
        return [Keep(sinks, b - sinks, 0)] * self.groups


@register
class H2O(Policy):
    """H2O: the recent window (recent_fraction of B) plus the heavy hitters by accumulated attention;
    evicted KV is gone for good."""

    name = "h2o"
    summary = "heavy hitters by accumulated attention + recent window"

    def horizon(self, length: int, prompt: int) -> tuple[int, float]:
        return self._budget_horizon(length)

    def keeps(self, length: int, prompt: int) -> list[Keep]:
        b = self.budget(length)
        if length <= b:
            return [full_keep(length, self.sink_tokens)] * self.groups
        window = int(self.cfg.recent_fraction * b)
        return [_score_keep(b, window, length, self.sink_tokens)] * self.groups


@register
class InfiniGen(H2O):
    """InfiniGen: the KV lives in host (CPU) memory but for the sinks and the recent window, which the
    GPU holds for every layer; each decode step the entries a speculation on partial query / key selects
    (the best-scoring outside tokens of an H2O-sized budget) are prefetched over the host link layer by
    layer into a double buffer (`prefetch_layers`), overlapped with compute. The host pool is capped;
    when it is full its least-used entries are evicted for good (kvsim/engine/sparse_sizing.py)."""

    name = "infinigen"
    summary = "KV in host memory, the selected entries prefetched every step; capped host pool"
    offload = True
    prefetch = True


@register
class ScissorHands(Policy):
    """ScissorHands: tokens important in the recent history stay important (persistence counts pick the
    outside tokens). When the cache reaches B it drops m = drop_fraction * B tokens at once, so it holds
    between B - m and B tokens: R(L) = B - m + ((L - L0) mod (m + 1)), L0 = max(B + 1, P)."""

    name = "scissorhands"
    summary = "persistence of importance, drops in bursts at the budget"

    def retained(self, length: int, prompt: int) -> int:
        b = self.budget(length)
        if length <= b:
            return length
        m = max(1, int(self.cfg.drop_fraction * b))
        origin = max(b + 1, prompt)
        return b - m + (length - origin) % (m + 1)

    def horizon(self, length: int, prompt: int) -> tuple[int, float]:
        if self._fraction is not None:
            return 0, length + 1
        b = self._tokens
        if length <= b:
            return 1, b + 1
        m = max(1, int(self.cfg.drop_fraction * b))
        phase = (length - max(b + 1, prompt)) % (m + 1)
        return 1, length + (m + 1 - phase)

    def keeps(self, length: int, prompt: int) -> list[Keep]:
        r = self.retained(length, prompt)
        if r >= length:
            return [full_keep(length, self.sink_tokens)] * self.groups
        window = int(self.cfg.recent_fraction * self.budget(length))
        return [_score_keep(r, window, length, self.sink_tokens)] * self.groups


def _snap_keep(budget: int, obs_window: int, length: int, prompt: int, sink_tokens: int,
               pool: int = 1) -> Keep:
    """SnapKV selection made at prefill end: `budget` prompt tokens (the sinks, whose attention is the
    highest, then the observation window, then the best prompt tokens by their observation-window scores
    max-pooled over `pool` neighbours), plus every token generated since."""
    if prompt <= budget:
        return full_keep(length, sink_tokens)
    sinks = min(sink_tokens, budget)
    obs = min(obs_window, budget - sinks)
    return Keep(sinks, obs + length - prompt, budget - obs - sinks, pool)


@register
class SnapKV(Policy):
    """SnapKV: at the end of prefill, the attention of the last observation_window prompt tokens,
    max-pooled over `pool_kernel` positions (clustering), picks B prompt tokens to keep (budget_fraction
    applies to the prompt); the selection is then fixed and generated tokens are all kept."""

    name = "snapkv"
    summary = "prompt selection at prefill end from an observation window, then fixed"

    def horizon(self, length: int, prompt: int) -> tuple[int, float]:
        return 1, math.inf  # every generated token is kept

    def keeps(self, length: int, prompt: int) -> list[Keep]:
        k = _snap_keep(self.budget(prompt), self.cfg.observation_window, length, prompt, self.sink_tokens,
                       self.cfg.pool_kernel)
        return [k] * self.groups


@register
class PyramidKV(Policy):
    """PyramidKV: SnapKV selection (pooled as SnapKV's) with budgets falling linearly with depth (mean
    over groups at most B; see group_budgets). With one block table per sequence (block_tables: shared)
    the widest group decides the slots held, not the mean."""

    name = "pyramidkv"
    summary = "SnapKV selection, budgets falling with layer depth"
    per_layer = True

    def horizon(self, length: int, prompt: int) -> tuple[int, float]:
        return 1, math.inf

    def group_budgets(self, prompt: int) -> list[int]:
        """Per layer group: the observation window plus a share of the rest of the budget that falls
        linearly from 2 R - R / beta (first group) to R / beta (last), R = budget - window (as in the
        PyramidKV code: the window is kept in every layer on top of the pyramid)."""
        b = self.budget(prompt)
        g = self.groups
        obs = min(self.cfg.observation_window, b)
        if g == 1:
            return [b]
        rest = b - obs
        top = rest / self.cfg.pyramid_beta
        bottom = 2 * rest - top
        return [obs + int(bottom + (top - bottom) * i / (g - 1)) for i in range(g)]

    def keeps(self, length: int, prompt: int) -> list[Keep]:
        obs, s = self.cfg.observation_window, self.sink_tokens
        k = self.cfg.pool_kernel
        return [_snap_keep(b, obs, length, prompt, s, k) for b in self.group_budgets(prompt)]
