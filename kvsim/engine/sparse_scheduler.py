"""The scheduler used when `kv.sparsity.policy` is not none: each decoding sequence's KV follows the policy.

Prefill holds the whole prompt's KV (the methods compress after prefill). When a request's prefill ends the
policy compresses it to its budget; then every iteration each decoding sequence is resized to what the
policy keeps at its current length (fewer blocks, fewer KV tokens read), growing through the ordinary
allocate-or-preempt path and shrinking by re-mapping its table. This costs O(running sequences) per
iteration, unlike the base scheduler's O(changes); with policy none the base scheduler runs untouched.

Offload policies write what they drop to host memory and, when a re-read (Request.rereads) lands on
offloaded KV, recall it over the host link inside the iteration. Charges (offload writes, recalls,
compaction copies) go into the iteration's Batch; the per-iteration figures (`timeline_values()`) and
per-request figures (`stats`) kept here are recorded with each timeline and request row (the columns are
registered by kvsim/engine/sparse_wiring.py).
"""

from __future__ import annotations

from dataclasses import replace

from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.engine.sparse_swap import swap_in_sparse
from kvsim.kvcache.sparsity.attention import AttentionModel
from kvsim.kvcache.sparsity.config import SparsityConfig
from kvsim.kvcache.sparsity.keep import kept_in_range
from kvsim.kvcache.sparsity.paging import compaction_copies, footprint_blocks, hole_slots
from kvsim.kvcache.sparsity.policies import build_policy
from kvsim.kvcache.sparsity.tracker import (
    RequestStats,
    SeqState,
    next_reread,
    private_blocks,
    reread_outcome,
    reread_schedule,
)

MASS_STRIDE = 32
"""Decode steps between evaluations of the attention mass a sequence retains (held in between)."""

class SparseScheduler(Scheduler):
    """Scheduler whose decoding sequences hold only the KV a token-level policy retains."""

    def __init__(self, limits: SchedulerLimits, kv, cfg: SparsityConfig, kv_bytes_per_token: float,
                 host_bandwidth: float) -> None:
        super().__init__(limits, kv)
        self.cfg = cfg
        self.policy = build_policy(cfg)
        self.attn = AttentionModel(cfg.attention)
        self.mode = cfg.reclaim
        self.compact = cfg.reclaim == "compact"
        self.offload = self.policy.offload
        self.sinks = cfg.attention.sink_tokens
        self.span = cfg.attention.reread_span
        self.rho = cfg.attention.heavy_fraction
        self.tok_bytes = kv_bytes_per_token
        self.host_bw = host_bandwidth
        self.states: dict[Group, SeqState] = {}
        self.stats: dict[int, RequestStats] = {}
        self.full_base_sum = 0
        self.full_blocks_sum = 0
        self.holes_sum = 0
        self.host_tokens = 0
        self.host_tokens_max = 0
        self._copy_tok = 0.0
        self._offload_tok = 0
        self._recall_tok = 0.0
        self.totals = {"copy_tokens": 0.0, "offload_tokens": 0, "recall_tokens": 0.0}
        self._timeline_values: tuple = ()

    # ----------------------------------------------------------------- policy targets
    def _target(self, prompt_kv: int, length: int):
        pol = self.policy
        keeps = pol.keeps(length, prompt_kv)
        resident = pol.resident_tokens(keeps)
        blocks = footprint_blocks(self.mode, resident, pol.widest(keeps), length, self.sinks, self.bs,
                                  self.rho)
        return keeps, resident, blocks

    def _shrink(self, g: Group, st: SeqState, blocks: int, resident: float, may_preempt: bool) -> bool:
        """Re-map g's sequences onto `blocks` fresh blocks each, the kept KV compacted into them. Blocks
        shared through a prefix cache stay with their other holders, so the pool may be short: then the
        most recently admitted groups are preempted, as for a decode allocation (may_preempt), or nothing
        changes and False is returned. False also when g itself was preempted."""
        kv = self.kv
        while kv.num_free_blocks + sum(private_blocks(kv, s) for s in g.seqs) < blocks * g.n:
            if not may_preempt or self._preempt_last() is g:
                return False
        for s in g.seqs:
            kv.free(s)
            kv.allocate(s, blocks * self.bs)
        if self.compact:
            self._copy_tok += g.n * compaction_copies(st.resident, resident, st.blocks, blocks, self.bs)
        return True

    def _resize(self, g: Group, st: SeqState, blocks: int, resident: float, may_preempt: bool = True) -> bool:
        """Give g's sequences `blocks` blocks each; False if that needed a preemption that was not allowed
        (nothing changed) or that took g itself."""
        if blocks > st.blocks:
            if not self._alloc_or_preempt(g, g.seqs, blocks * self.bs):
                return False
        elif not self._shrink(g, st, blocks, resident, may_preempt):
            return False
        self.dec_blocks += (blocks - st.blocks) * g.n
        g.seq_blocks = blocks * g.n
        st.blocks = blocks
        return True

    # ----------------------------------------------------------------- scheduler overrides
    def _schedule_next_alloc(self, g: Group) -> None:
        """Sequences under a policy are resized every iteration in _decode_hook, not from the heap."""

    def _join_decode(self, g: Group, it_done: int) -> None:
        super()._join_decode(g, it_done)
        n = g.n
        prompt = g.prompt
        self.full_base_sum += n * g.base
        rs = self._request_stats(g)
        rs.prompt_kv = prompt
        st = SeqState(prompt_kv=prompt, resident=float(prompt), blocks=g.seq_blocks // n,
                      full_blocks=-(-prompt // self.bs), contrib=n * g.base, rs=rs,
                      next_reread=next_reread(rs))
        self.full_blocks_sum += st.full_blocks * n
        self.states[g] = st
        _, resident, blocks = self._target(prompt, prompt)
        # compress now if the pool allows it without preempting; else the next _decode_hook does
        if blocks < st.blocks and self._resize(g, st, blocks, resident, may_preempt=False):
            st.resident = resident
        self._offload(st, prompt - int(resident + 0.5), n)

    def _request_stats(self, g: Group) -> RequestStats:
        rs = self.stats.get(g.req.rid)
        if rs is None:
            r = g.req
            rs = self.stats[r.rid] = RequestStats(
                rereads=reread_schedule(r.segments, getattr(r, "rereads", ()), g.output - 1))
        return rs

    def _leave_decode(self, g: Group) -> None:
        st = self.states.pop(g, None)
        if st is not None:
            n = g.n
            if st.length:
                st.rs.full_tokens = st.length
                st.rs.kept_tokens = st.resident
            self.dec_base_sum += n * g.base - st.contrib
            self.full_base_sum -= n * g.base
            self.full_blocks_sum -= st.full_blocks * n
            self.holes_sum -= st.holes * n
            self.host_tokens -= st.offloaded * n
        super()._leave_decode(g)

    def _offload(self, st: SeqState, offloaded: int, n: int) -> None:
        if not self.policy.offload:
            return
        delta = offloaded - st.offloaded
        if delta > 0:
            self._offload_tok += delta * n
        self.host_tokens += delta * n
        if self.host_tokens > self.host_tokens_max:
            self.host_tokens_max = self.host_tokens
        st.offloaded = offloaded

    def _decode_hook(self, it: int) -> None:
        states = self.states
        for g, st in list(states.items()):
            if g in states:
                self._step(g, st, it)

    def _renew(self, st: SeqState, length: int) -> float:
        """Resident tokens at `length` from the policy, starting a new affine segment (policy.horizon)."""
        pol = self.policy
        resident = pol.resident_tokens(pol.keeps(length, st.prompt_kv))
        st.seg_slope, st.seg_until = pol.horizon(length, st.prompt_kv)
        st.seg_len = length
        st.seg_resident = resident
        return resident

    def _step(self, g: Group, st: SeqState, it: int) -> None:
        """Resize g to the policy's footprint for this iteration's context and account the step."""
        length = g.base + it
        bs = self.bs
        if length < st.seg_until:
            resident = st.seg_resident + st.seg_slope * (length - st.seg_len)
        else:
            resident = self._renew(st, length)
        keeps = None
        if self.compact:
            blocks = -int(-resident // bs)
        else:
            keeps = self.policy.keeps(length, st.prompt_kv)
            blocks = footprint_blocks("block", resident, self.policy.widest(keeps), length, self.sinks, bs,
                                      self.rho)
        if blocks != st.blocks and not self._resize(g, st, blocks, resident):
            return
        n = g.n
        st.resident = resident
        st.length = length
        full_blocks = -(-length // bs)
        if full_blocks != st.full_blocks:
            self.full_blocks_sum += (full_blocks - st.full_blocks) * n
            st.full_blocks = full_blocks
        if keeps is not None:
            holes = hole_slots(blocks, resident, length, bs)
            self.holes_sum += (holes - st.holes) * n
            st.holes = holes
        ctx = int(resident + 0.5)
        contrib = n * (ctx - it)
        self.dec_base_sum += contrib - st.contrib
        st.contrib = contrib
        if self.offload:
            self._offload(st, length - ctx, n)

        rs = st.rs
        step = g.gen_base + it - 1
        if step >= st.next_reread:
            keeps = keeps or self.policy.keeps(length, st.prompt_kv)
            rereads = rs.rereads
            while rs.next_reread < len(rereads) and rereads[rs.next_reread][0] <= step:
                self._reread(g, st, rs, keeps, length, step)
            st.next_reread = next_reread(rs)
        if step - st.mass_step >= MASS_STRIDE:
            keeps = keeps or self.policy.keeps(length, st.prompt_kv)
            st.base_mass = self.attn.mean_kept_mass(length, keeps)
            st.mass_step = step
        if step <= st.reread_until:
            rs.mass_sum += self.attn.reread_step_mass(st.base_mass, st.reread_avail)
        else:
            rs.mass_sum += st.base_mass
        rs.decode_steps += 1
        rs.full_sum += length
        rs.kept_sum += resident

    def _reread(self, g: Group, st: SeqState, rs: RequestStats, keeps, length: int, step: int) -> None:
        _, start, count = rs.rereads[rs.next_reread]
        rs.next_reread += 1
        end = min(start + count, length)
        if end <= start:
            return
        kept = sum(kept_in_range(k, length, self.sinks, start, end, self.rho) for k in keeps) / len(keeps)
        recalled, st.reread_avail = reread_outcome(rs, end - start, kept, self.offload, self.tok_bytes,
                                                   self.host_bw)
        self._recall_tok += recalled * g.n
        st.reread_until = step + self.span - 1

    def _swap_in(self, now: float) -> int:
        """As the base scheduler's, but a returning sequence is sized to the policy's footprint."""
        return swap_in_sparse(self)

    # ----------------------------------------------------------------- one iteration
    def timeline_values(self) -> tuple:
        """This iteration's values of the sparsity timeline columns (tracker.TIMELINE_COLUMNS order)."""
        return self._timeline_values

    def schedule(self, now: float):
        batch = super().schedule(now)
        if batch is None:
            return None
        tb = self.tok_bytes
        copy_b, off_b, rec_b = self._copy_tok * tb, self._offload_tok * tb, self._recall_tok * tb
        if copy_b or off_b or rec_b:
            batch = replace(batch, recall_bytes=rec_b, offload_bytes=off_b, kv_copy_bytes=copy_b)
        it = self.it
        kv = self.kv
        prefill_blocks = sum(kv.num_blocks_of(g.seqs[0]) for g in self.prefilling if kv.has(g.seqs[0]))
        table_blocks = self.dec_blocks + prefill_blocks
        self._timeline_values = (
            self.full_base_sum + self.dec_seqs * it + self.prefill_tokens_held,
            self.full_blocks_sum + prefill_blocks, table_blocks, self.holes_sum, self.host_tokens,
            rec_b, off_b, copy_b)
        t = self.totals
        t["copy_tokens"] += self._copy_tok
        t["offload_tokens"] += self._offload_tok
        t["recall_tokens"] += self._recall_tok
        self._copy_tok = 0.0
        self._offload_tok = 0
        self._recall_tok = 0.0
        return batch
