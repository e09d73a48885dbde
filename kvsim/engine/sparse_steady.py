"""Steady decode steps of token-level sparsity, accounted in bulk instead of one by one.

SparseSizing (kvsim/engine/sparse_sizing.py) steps every decoding group every iteration. For a policy
that offloads nothing and whose blocks follow from the resident count alone (Footprint.only_resident:
H2O, StreamingLLM, ScissorHands, SnapKV under compact reclaim), most of those steps only add to running
sums: the resident count moves by a slope of 0 or 1 token per step (policy.horizon), the blocks held and
the blocks the sequence would hold without eviction stay, no re-read fires and the retained attention mass
is not refreshed. After a step a group whose next such event is more than one iteration away goes
*steady*: it is not stepped again until the iteration of that event (its `due`), and its steps in between
are accounted when it is due, when it leaves decoding, or never twice: the same sums as stepping one by
one (integer sums in closed form, float sums added step by step in the same order).

The passes (`run_pass`, the sizing's before_decode) step only the groups due, in the order of the states
(entry order). A group preempted in the middle of a pass was stepped in it if its turn had come (`cursor`):
its steady steps then run to this pass, else to the one before. A pass whose iteration does not follow
the last one (an iteration without a pass: prefill-only scheduling; or one iteration's pass run again)
first brings every steady group up to the last pass and steps every group, as the plain loop does.
"""

from __future__ import annotations

import math

INF_SEQ = 1 << 62
MASS_STRIDE = 32
"""Decode steps between evaluations of the attention mass a sequence retains (sparse_sizing.MASS_STRIDE)."""


class SteadySteps:
    """The pass schedule of one SparseSizing (module docstring): `buckets` maps an iteration to the
    steady groups due then, `soon` holds the groups stepped at the next pass whatever it is, `rate` is the
    summed change of the steady groups' held-offset terms per step."""

    __slots__ = ("sizing", "buckets", "soon", "rate", "pass_it", "cursor", "adj", "seq")

    def __init__(self, sizing) -> None:
        self.sizing = sizing
        self.buckets: dict[int, list] = {}
        self.soon: list = []
        self.rate = 0
        self.pass_it = -2
        self.cursor = INF_SEQ
        self.adj = 0
        self.seq = 0

    def enter(self, g, st) -> None:
        """g (state st) starts decoding: stepped at the next pass."""
        st.seq = self.seq
        self.seq += 1
        st.due = -1
        st.lazy = False
        self.soon.append((g, st))

    def leave(self, g, st) -> None:
        """g leaves decoding: its steady steps up to the pass it was last stepped in are accounted."""
        if not st.lazy:
            return
        st.lazy = False
        self.rate -= st.rate
        if st.seq > self.cursor:  # a pass is running and g's turn had not come: stepped up to the last one
            self.adj -= st.rate
            self.catch_up(g, st, self.pass_it - 1)
        else:
            self.catch_up(g, st, self.pass_it)

    def sync(self) -> None:
        """Bring every steady group's state and request sums up to the last pass (they stay steady):
        for a reader of the states between iterations (tests, checks)."""
        for g, st in self.sizing.states.items():
            if st.lazy:
                self.catch_up(g, st, self.pass_it)

    def run_pass(self, it: int, resize) -> int:
        """before_decode: step the groups due at iteration it (the steady ones move on in bulk); the summed
        change of the held offset."""
        sizing = self.sizing
        states = sizing.states
        if it != self.pass_it + 1:
            for g, st in states.items():
                if st.lazy:
                    st.lazy = False
                    self.catch_up(g, st, self.pass_it)
            self.rate = 0
            self.buckets.clear()
            self.soon = []
            due = list(states.items())
        else:
            due = [e for e in self.soon if states.get(e[0]) is e[1] and e[1].due == -1]
            self.soon = []
            bucket = self.buckets.pop(it, None)
            if bucket:
                bs = sizing.bs
                for e in bucket:
                    g, st = e
                    if not st.lazy or states.get(g) is not st:
                        continue
                    if st.light == it:  # only the blocks it would hold without eviction grow
                        st.full_blocks += 1
                        sizing.full_blocks_sum += g.n
                        nxt = st.full_blocks * bs + 1 - st.base
                        st.light = nxt if nxt < st.due else -1
                        if st.light > 0:
                            self._add(nxt, e)
                    elif st.mass_due == it:  # the attention mass is refreshed (for this step on)
                        self.catch_up(g, st, it - 1)
                        length = st.base + it
                        st.base_mass = sizing.attn.mean_kept_mass(length, sizing.policy.keeps(length,
                                                                                            st.prompt_kv))
                        st.mass_step = st.gen_base + it - 1
                        nxt = it + MASS_STRIDE
                        st.mass_due = nxt if nxt < st.due else -1
                        if st.mass_due > 0:
                            self._add(nxt, e)
                    elif st.due == it:
                        st.lazy = False
                        self.rate -= st.rate
                        self.catch_up(g, st, it - 1)
                        due.append(e)
                due.sort(key=_seq_of)
        steady_delta = self.rate
        self.pass_it = it
        self.adj = 0
        delta = 0
        step = sizing._step
        for g, st in due:
            if states.get(g) is not st:  # preempted by an earlier group's growth
                continue
            self.cursor = st.seq
            delta += step(g, st, it, resize)
            if states.get(g) is st:
                self.plan(g, st, it)
        self.cursor = INF_SEQ
        return delta + steady_delta + self.adj

    def plan(self, g, st, it: int) -> None:
        """After g's real step at iteration it: steady until its next event, or stepped at the next pass."""
        slope = st.seg_slope
        held = st.resident
        bs = self.sizing.bs
        if (slope != 0 and slope != 1) or held != int(held) or st.blocks != -int(-held // bs):
            st.due = -1
            self.soon.append((g, st))
            return
        base = g.base
        gen_base = g.gen_base
        length = st.length
        light = st.full_blocks * bs + 1 - base  # the blocks it would hold without eviction grow
        due = math.inf
        if slope == 1:  # the blocks held grow
            due = it + st.blocks * bs + 1 - int(held)
        until = st.seg_until
        if until != math.inf:  # the policy's affine segment ends
            due = min(due, math.ceil(until) - base)
        if st.next_reread != math.inf:
            due = min(due, int(st.next_reread) - gen_base + 1)
        step = gen_base + it - 1
        if step <= st.reread_until:  # the re-read's extra attention ends
            due = min(due, st.reread_until + 2 - gen_base)
        mass = int(st.mass_step) + MASS_STRIDE + 1 - gen_base  # the attention mass is refreshed
        if due <= it + 1 or light <= it + 1 or mass <= it + 1 or length != base + it:
            st.due = -1
            self.soon.append((g, st))
            return
        st.lazy = True
        st.due = due
        st.acc_it = it
        st.rate = g.n * (slope - 1)
        st.base = base
        st.gen_base = gen_base
        self.rate += st.rate
        e = (g, st)
        if due != math.inf:
            self._add(due, e)
        if light < due:
            st.light = light
            self._add(light, e)
        else:
            st.light = -1
        if mass < due:
            st.mass_due = mass
            self._add(mass, e)
        else:
            st.mass_due = -1

    def _add(self, it: int, entry) -> None:
        bucket = self.buckets.get(it)
        if bucket is None:
            self.buckets[it] = [entry]
        else:
            bucket.append(entry)

    def catch_up(self, g, st, target: int) -> None:
        """Account g's steady steps after st.acc_it up to iteration `target` (SparseSizing._step's sums)."""
        k = target - st.acc_it
        if k <= 0:
            return
        first = st.acc_it + 1
        l0 = st.base + first
        l1 = st.base + target
        rs = st.rs
        rs.decode_steps += k
        rs.full_sum += (l0 + l1) * k // 2
        slope = st.seg_slope
        r0 = st.seg_resident + slope * (l0 - st.seg_len)
        r1 = st.seg_resident + slope * (l1 - st.seg_len)
        kept = rs.kept_sum
        total = (int(r0) + int(r1)) * k // 2
        if kept.is_integer() and kept + total < 2.0 ** 52:  # integer floats: the sum is exact either way
            rs.kept_sum = kept + total
        else:
            for i in range(k):
                kept += st.seg_resident + slope * (l0 + i - st.seg_len)
            rs.kept_sum = kept
        if st.gen_base + first - 1 <= st.reread_until:
            add = self.sizing.attn.reread_step_mass(st.base_mass, st.reread_avail)
        else:
            add = st.base_mass
        mass = rs.mass_sum
        for _ in range(k):
            mass += add
        rs.mass_sum = mass
        st.length = l1
        st.resident = r1
        st.offset = g.n * (int(r1 + 0.5) - l1)
        st.acc_it = target


def _seq_of(entry) -> int:
    return entry[1].seq
