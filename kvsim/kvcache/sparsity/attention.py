"""A cheap, parameterised model of where a decode query's attention goes, per layer group.

For a context of L tokens, s = min(sink_tokens, L) sink positions and N = L - s others, layer group g of G
(depth x = g / (G - 1), 0.5 when G = 1) spends
    background  b_g = background_first + (background_last - background_first) * x, uniform over the N,
    sinks       (1 - b_g) * sink_share, equally over the s sink tokens,
    recency     (1 - b_g) * recent_share, position at distance d from the newest weighs q^d, q = e^(-1/tau),
                tau = recent_tau * (recent_tau_last / recent_tau)^x,
    heavy       (1 - b_g) * heavy_share over H = floor(heavy_fraction * N) heavy hitters; rank r weighs
                r^-alpha, alpha = heavy_alpha + (heavy_alpha_last - heavy_alpha) * x (a power law of
                accumulated scores, steeper in deeper layers).
Heavy hitters sit at the non-sink indices i with floor((i + 1) f) > floor(i f) (evenly spread, fixed as
the context grows); heavy hitter j's rank orders frac((j + 1) * golden ratio), so ranks are spread evenly
over positions. With no sinks their mass goes to the other parts in proportion; with no heavy hitter
their mass goes to the background.

`token_weights` materialises the distribution for one layer group (tests, small sequences); `kept_mass`
gives the mass a `Keep` retains in closed form from counts alone: kept outside tokens are the best heavy
hitters (spread over the outside region, ranks independent of position) and then the recency tail next to
the window (keep.split_outside; with SnapKV's pooling, runs of `pool` tokens around fewer heavy hitters).
A re-read of positions
[a, a + n) moves `reread_mass` of the attention onto them, uniformly (`reread_step_mass`).
"""

from __future__ import annotations

import math

import numpy as np

from kvsim.kvcache.sparsity.config import AttentionConfig
from kvsim.kvcache.sparsity.keep import Keep, split_outside, spread_hitters

GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_ZIPF_TABLE = 1 << 14


class ZipfSums:
    """Z(x) = sum over ranks r = 1..x of r^-alpha, for real x >= 0 (linear between integers); exact up
    to 16384, an Euler-Maclaurin integral beyond."""

    __slots__ = ("alpha", "_cum", "_sums")

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        r = np.arange(1, _ZIPF_TABLE + 1, dtype=np.float64)
        self._cum = np.concatenate(([0.0], np.cumsum(r ** -alpha)))
        self._sums: list[float] = self._cum.tolist()  # (the same values, read without a numpy scalar)

    def __call__(self, x: float) -> float:
        if x <= 0:
            return 0.0
        n = int(x)
        if n < _ZIPF_TABLE:
            return self._sums[n] + (x - n) * (n + 1) ** -self.alpha
        a = self.alpha
        lo, hi = _ZIPF_TABLE + 0.5, x + 0.5
        tail = math.log(hi / lo) if a == 1.0 else (hi ** (1 - a) - lo ** (1 - a)) / (1 - a)
        return float(self._cum[_ZIPF_TABLE]) + tail


class AttentionModel:
    """Attention mass per layer group over sinks, a recency window, heavy hitters and a background."""

    __slots__ = ("cfg", "groups", "sink_tokens", "q", "alpha", "zipf", "_parts")

    def __init__(self, cfg: AttentionConfig) -> None:
        self.cfg = cfg
        self.groups = cfg.layer_groups
        self.sink_tokens = cfg.sink_tokens
        xs = [g / (self.groups - 1) if self.groups > 1 else 0.5 for g in range(self.groups)]
        self.q = [math.exp(-1.0 / (cfg.recent_tau * (cfg.recent_tau_last / cfg.recent_tau) ** x)) for x in xs]
        self.alpha = [cfg.heavy_alpha + (cfg.heavy_alpha_last - cfg.heavy_alpha) * x for x in xs]
        tables: dict[float, ZipfSums] = {}
        self.zipf = [tables.setdefault(a, ZipfSums(a)) for a in self.alpha]
        self._parts = [self._group_parts(x) for x in xs]

    def _group_parts(self, x: float) -> tuple[float, float, float, float]:
        c = self.cfg
        bg = c.background_first + (c.background_last - c.background_first) * x
        rest = 1.0 - bg
        return rest * c.sink_share, rest * c.recent_share, rest * c.heavy_share, bg

    def parts(self, g: int, length: int) -> tuple[float, float, float, float]:
        """(sink, recency, heavy, background) mass of layer group g for a context of `length` tokens,
        after moving the mass of absent parts (no sinks, no heavy hitter) as the module docstring says."""
        m_s, m_r, m_h, m_b = self._parts[g]
        s = min(self.sink_tokens, length)
        n = length - s
        if n == 0:
            return 1.0, 0.0, 0.0, 0.0
        if s == 0 and m_s > 0:
            rest = m_r + m_h + m_b
            if rest <= 0:
                return 0.0, 0.0, 0.0, 1.0
            m_r, m_h, m_b, m_s = m_r / rest, m_h / rest, m_b / rest, 0.0
        if self.heavy_count(n) == 0:
            m_b, m_h = m_b + m_h, 0.0
        return m_s, m_r, m_h, m_b

    def heavy_count(self, non_sink: int) -> int:
        return int(math.floor(self.cfg.heavy_fraction * non_sink + 1e-9))

    def heavy_indices(self, non_sink: int) -> np.ndarray:
        """Non-sink indices (0 = first position after the sinks) that are heavy hitters."""
        i = np.arange(non_sink, dtype=np.float64)
        f = self.cfg.heavy_fraction
        return np.nonzero(np.floor((i + 1) * f + 1e-9) > np.floor(i * f + 1e-9))[0]

    def token_weights(self, g: int, length: int, reread: tuple[int, int] | None = None) -> np.ndarray:
        """Attention of the newest query over positions 0..length-1 in layer group g (sums to one); with
        reread = (start, count), `reread_mass` of it moved uniformly onto positions [start, start+count)."""
        m_s, m_r, m_h, m_b = self.parts(g, length)
        s = min(self.sink_tokens, length)
        n = length - s
        w = np.zeros(length, dtype=np.float64)
        if s:
            w[:s] = m_s / s
        if n:
            d = np.arange(n - 1, -1, -1, dtype=np.float64)
            q = self.q[g]
            w[s:] += m_r * q ** d * (1 - q) / (1 - q ** n) + m_b / n
            idx = self.heavy_indices(n)
            if len(idx) and m_h > 0:
                u = ((np.arange(len(idx)) + 1) * GOLDEN) % 1.0
                rank = np.argsort(np.argsort(u, kind="stable"), kind="stable") + 1.0
                hw = rank ** -self.alpha[g]
                w[s + idx] += m_h * hw / hw.sum()
        if reread is not None and reread[1] > 0:
            a, cnt = reread
            rm = self.cfg.reread_mass
            w *= 1 - rm
            w[a:a + cnt] += rm / cnt
        return w

    def kept_mass(self, g: int, length: int, keep: Keep) -> float:
        """Attention mass of layer group g that falls on what `keep` retains (closed form)."""
        return self._group_mass(g, keep, self._shape(length, keep))

    def mean_kept_mass(self, length: int, keeps) -> float:
        """kept_mass averaged over layer groups; keeps holds one Keep per group (the parts that depend only
        on the Keep computed once for the groups sharing it)."""
        masses = []
        prev = None
        shape: tuple = ()
        for g, keep in enumerate(keeps):
            if keep is not prev:
                prev = keep
                shape = self._shape(length, keep)
            masses.append(self._group_mass(g, keep, shape))
        return sum(masses) / self.groups

    def _shape(self, length: int, keep: Keep) -> tuple:
        """kept_mass's values that do not depend on the layer group."""
        s = min(self.sink_tokens, length)
        n = length - s
        if n == 0:
            return (s, 0)
        w = min(keep.window, n)
        n_out = n - w
        o = min(keep.outside, n_out)
        spread, adjacent = split_outside(keep, length, self.sink_tokens, self.cfg.heavy_fraction)
        heavy = self.heavy_count(n)
        top_x = spread_hitters(keep, spread) * n / n_out if n_out else 0.0
        return (s, n, w, n_out, o, spread, adjacent, n_out - adjacent, heavy, top_x)

    def _group_mass(self, g: int, keep: Keep, shape: tuple) -> float:
        """kept_mass(g, length, keep), from _shape(length, keep)."""
        s = shape[0]
        n = shape[1]
        if n == 0:
            return keep.sinks / s if s else 1.0
        _, _, w, n_out, o, spread, adjacent, rest, heavy, top_x = shape
        m_s, m_r, m_h, m_b = self.parts(g, s + n)  # (s + n: the context length)
        mass = m_s * keep.sinks / s if s else 0.0
        q = self.q[g]
        qn, qt = q ** n, q ** (w + adjacent)
        mass += m_r * ((1 - qt) + (qt - qn) * (spread / rest if rest > 0 else 0.0)) / (1 - qn)
        if m_h > 0:
            if n_out == 0:
                mass += m_h
            else:
                zipf = self.zipf[g]
                mass += m_h * (w / n + n_out / n * (zipf(top_x) / zipf(heavy)))
        mass += m_b * (w + o) / n
        return min(1.0, mass)

    def reread_step_mass(self, base_mass: float, segment_kept_fraction: float) -> float:
        """Mass retained in a decode step during a re-read: the base attention scaled by 1 - reread_mass
        plus reread_mass times the share of the re-read segment still available."""
        rm = self.cfg.reread_mass
        return (1 - rm) * base_mass + rm * segment_kept_fraction
