"""Token-level sparsity as a decode sizing (kvsim/engine/decode_sizing.py): each decoding group holds what
the policy keeps (`kv.sparsity.policy` not none).

Prefill holds the whole prompt's KV (the methods compress after prefill). When a request's prefill ends
the policy compresses it to its budget; then every iteration each decoding group is resized to what the
policy keeps at its current length (fewer blocks, fewer KV tokens read) through the scheduler's `resize`,
which grows by the ordinary allocate-or-preempt path and shrinks by re-mapping the table. This costs
O(running sequences) per iteration, unlike context sizing's O(changes).

Offload policies write what they drop to host memory and, when a re-read (Request.rereads) lands on
offloaded KV, recall it over the host link inside the iteration. The charges (offload writes, recalls,
compaction copies) go into the iteration's Batch through `batch_extras`; the per-iteration figures
(`timeline_values()`) and per-request figures (`stats`, `request_values`) are recorded with each timeline
and request row (the column groups: kvsim/engine/sparse_columns.py).
"""

from __future__ import annotations

from kvsim.engine.decode_sizing import Figures, Resize
from kvsim.engine.group import Group
from kvsim.engine.sparse_state import RequestStats, SeqState, next_reread, reread_outcome
from kvsim.kvcache.sparsity.attention import AttentionModel
from kvsim.kvcache.sparsity.config import SparsityConfig
from kvsim.kvcache.sparsity.keep import kept_in_range
from kvsim.kvcache.sparsity.paging import compaction_copies, footprint_blocks, hole_slots
from kvsim.kvcache.sparsity.policies import build_policy
from kvsim.kvcache.sparsity.tracker import reread_schedule

MASS_STRIDE = 32
"""Decode steps between evaluations of the attention mass a sequence retains (held in between)."""


class SparseSizing:
    """Decoding groups hold only the KV a token-level policy retains (see the module docstring)."""

    by_context = False

    def __init__(self, cfg: SparsityConfig, block_size: int, kv_bytes_per_token: float,
                 host_bandwidth: float) -> None:
        self.cfg = cfg
        self.policy = build_policy(cfg)
        self.attn = AttentionModel(cfg.attention)
        self.mode = cfg.reclaim
        self.compact = cfg.reclaim == "compact"
        self.offload = self.policy.offload
        self.sinks = cfg.attention.sink_tokens
        self.span = cfg.attention.reread_span
        self.rho = cfg.attention.heavy_fraction
        self.bs = block_size
        self.tok_bytes = kv_bytes_per_token
        self.host_bw = host_bandwidth
        self.states: dict[Group, SeqState] = {}
        self.stats: dict[int, RequestStats] = {}
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

    def _resized(self, g: Group, st: SeqState, blocks: int, resident: float) -> None:
        """Account a resize the scheduler made: a shrink compacts the kept KV into the fewer blocks."""
        if blocks < st.blocks and self.compact:
            self._copy_tok += g.n * compaction_copies(st.resident, resident, st.blocks, blocks, self.bs)
        st.blocks = blocks

    def _request_stats(self, g: Group) -> RequestStats:
        rs = self.stats.get(g.req.rid)
        if rs is None:
            r = g.req
            rs = self.stats[r.rid] = RequestStats(
                rereads=reread_schedule(r.segments, getattr(r, "rereads", ()), g.output - 1))
        return rs

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

    # ----------------------------------------------------------------- DecodeSizing
    def on_join_decode(self, g: Group, resize: Resize) -> int:
        """Start g's state and compress it to the policy's budget now if the pool allows it without
        preempting (else the next before_decode does). Its held offset starts at 0."""
        n = g.n
        prompt = g.prompt
        rs = self._request_stats(g)
        rs.prompt_kv = prompt
        st = SeqState(prompt_kv=prompt, resident=float(prompt), blocks=g.seq_blocks // n,
                      full_blocks=-(-prompt // self.bs), rs=rs, next_reread=next_reread(rs))
        self.full_blocks_sum += st.full_blocks * n
        self.states[g] = st
        _, resident, blocks = self._target(prompt, prompt)
        if blocks < st.blocks and resize(g, blocks, False):
            self._resized(g, st, blocks, resident)
            st.resident = resident
        self._offload(st, prompt - int(resident + 0.5), n)
        return 0

    def on_leave_decode(self, g: Group) -> int:
        st = self.states.pop(g, None)
        if st is None:
            return 0
        n = g.n
        if st.length:
            st.rs.full_tokens = st.length
            st.rs.kept_tokens = st.resident
        self.full_blocks_sum -= st.full_blocks * n
        self.holes_sum -= st.holes * n
        self.host_tokens -= st.offloaded * n
        return -st.offset

    def before_decode(self, it: int, resize: Resize) -> int:
        """Resize every decoding group to the policy's footprint at this iteration's context."""
        states = self.states
        delta = 0
        for g, st in list(states.items()):
            if g in states:  # not preempted by an earlier group's growth
                delta += self._step(g, st, it, resize)
        return delta

    def swap_in_blocks(self, g: Group, length: int, held: int) -> int:
        """A returning group is sized to the policy's footprint at its length, not its full context."""
        rs = self._request_stats(g)
        blocks = self._target(rs.prompt_kv, length)[2]
        return max(held, blocks * g.n)

    def on_swap_in(self, g: Group, it: int, resize: Resize) -> int:
        """g is back from host memory with the blocks it held; its policy state resumes (offloaded KV
        stayed in host memory: nothing to write again) and it is resized for this iteration."""
        n = g.n
        length = g.base + it
        rs = self._request_stats(g)
        resident = self._target(rs.prompt_kv, length)[1]
        st = SeqState(prompt_kv=rs.prompt_kv, resident=resident, blocks=g.seq_blocks // n, rs=rs,
                      next_reread=next_reread(rs))
        if self.offload:
            st.offloaded = length - int(resident + 0.5)
            self.host_tokens += st.offloaded * n
        self.states[g] = st
        return self._step(g, st, it, resize)

    def batch_extras(self, figures: Figures) -> tuple[float, float, float]:
        """This iteration's (recall, offload, compaction copy) bytes; closes its accounting (run totals,
        timeline values)."""
        tb = self.tok_bytes
        copy_b, off_b, rec_b = self._copy_tok * tb, self._offload_tok * tb, self._recall_tok * tb
        context_tokens, decode_blocks, prefill_blocks = figures()
        self._timeline_values = (
            context_tokens, self.full_blocks_sum + prefill_blocks, decode_blocks + prefill_blocks,
            self.holes_sum, self.host_tokens, rec_b, off_b, copy_b)
        t = self.totals
        t["copy_tokens"] += self._copy_tok
        t["offload_tokens"] += self._offload_tok
        t["recall_tokens"] += self._recall_tok
        self._copy_tok = 0.0
        self._offload_tok = 0
        self._recall_tok = 0.0
        return rec_b, off_b, copy_b

    # ----------------------------------------------------------------- recorder values
    def timeline_values(self) -> tuple:
        """The iteration just scheduled's values of the sparsity timeline columns (TIMELINE_COLUMNS order)."""
        return self._timeline_values

    def request_values(self, rid: int) -> tuple | None:
        """Request rid's values of the sparsity request columns, or None if it never decoded."""
        rs = self.stats.get(rid)
        return None if rs is None else rs.row()

    # ----------------------------------------------------------------- one decode step
    def _renew(self, st: SeqState, length: int) -> float:
        """Resident tokens at `length` from the policy, starting a new affine segment (policy.horizon)."""
        pol = self.policy
        resident = pol.resident_tokens(pol.keeps(length, st.prompt_kv))
        st.seg_slope, st.seg_until = pol.horizon(length, st.prompt_kv)
        st.seg_len = length
        st.seg_resident = resident
        return resident

    def _step(self, g: Group, st: SeqState, it: int, resize: Resize) -> int:
        """Resize g to the policy's footprint for this iteration's context and account the step; returns
        the change of its held offset (0 when its growth preempted g itself)."""
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
        if blocks != st.blocks:
            if not resize(g, blocks):
                return 0
            self._resized(g, st, blocks, resident)
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
        offset = n * (ctx - length)
        delta = offset - st.offset
        st.offset = offset
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
        return delta

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
