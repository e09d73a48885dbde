"""Token-level sparsity as a decode sizing (kvsim/engine/decode_sizing.py): each decoding group holds what
the policy keeps (`kv.sparsity.policy` not none).

Prefill holds the whole prompt's KV (the methods compress after prefill). When a request's prefill ends
the policy compresses it to its budget; then every iteration each decoding group is resized to what the
policy keeps at its current length (fewer blocks, fewer KV tokens read) through the scheduler's `resize`,
which grows by the ordinary allocate-or-preempt path and shrinks by re-mapping the table. This costs
O(running sequences) per iteration, unlike context sizing's O(changes).

Blocks follow the policy's per-layer-group Keeps through `paging.Footprint` (kv.sparsity.block_tables,
selection, reclaim). InfiniGen (an offload policy with per-step prefetch) keeps each sequence's sinks and
recent window on the GPU for every layer and the rest of its KV in host memory: every decode step it
fetches the selected entries (the outside tokens of its budget) over the host link, layer by layer, into
a double buffer of `prefetch_layers` layers, so the GPU pool holds sinks + window + selected x
prefetch_layers / layers (whole-model token equivalents) while attention reads sinks + window + selected.
The host pool is capped (`host_pool_bytes`) and, when full, evicts the least-used entries (never-selected
ones first, then selected ones) for good. A re-read (Request.rereads) landing on host KV recalls it, less
what the pool evicted. The charges (offload writes, re-read recalls, compaction copies, the prefetch
and the decode read of the selected entries beyond the double buffer) go into the iteration's Batch
through `batch_extras`; the replica then reports how much of the prefetch compute hid
(`record_overlap`). The per-iteration figures
(`timeline_values()`) and per-request figures (`stats`, `request_values`) are recorded with each timeline
and request row (the column groups: kvsim/engine/sparse_columns.py).
"""

from __future__ import annotations

import math

from kvsim.engine.decode_sizing import Extras, Figures, Resize, resize_each
from kvsim.engine.group import Group
from kvsim.engine.sparse_state import RequestStats, SeqState, next_reread, reread_outcome
from kvsim.engine.sparse_steady import MASS_STRIDE, SteadySteps
from kvsim.errors import KvsimError
from kvsim.kvcache.sparsity.attention import AttentionModel
from kvsim.kvcache.sparsity.config import SparsityConfig
from kvsim.kvcache.sparsity.keep import Keep, kept_in_range
from kvsim.kvcache.sparsity.paging import Footprint, compaction_copies
from kvsim.kvcache.sparsity.policies import build_policy
from kvsim.kvcache.sparsity.tracker import reread_schedule


class SparseSizing:
    """Decoding groups hold only the KV a token-level policy retains (see the module docstring)."""

    by_context = False
    decode_tokens = 1

    def __init__(self, cfg: SparsityConfig, block_size: int, kv_bytes_per_token: float,
                 host_bandwidth: float, kv_heads: int = 1, host_pool_bytes: float = math.inf,
                 num_layers: int | None = None) -> None:
        self.cfg = cfg
        self.policy = build_policy(cfg)
        self.attn = AttentionModel(cfg.attention)
        self.mode = cfg.reclaim
        self.compact = cfg.reclaim == "compact"
        self.offload = self.policy.offload
        self.prefetch = self.policy.prefetch
        self.share = 1.0
        """Share of the selected entries the GPU holds at once (prefetch): prefetch_layers / layers (1 when
        the layer count is not given)."""
        if self.prefetch and num_layers is not None:
            if cfg.prefetch_layers > num_layers:
                raise KvsimError(f"kv.sparsity.prefetch_layers must be at most the model's {num_layers} "
                                 f"layers, got {cfg.prefetch_layers}")
            self.share = cfg.prefetch_layers / num_layers
        self.sinks = cfg.attention.sink_tokens
        self.span = cfg.attention.reread_span
        self.rho = cfg.attention.heavy_fraction
        self.heads = (cfg.kv_heads or max(1, kv_heads)) if cfg.selection == "per_head" else 1
        self.foot = Footprint(cfg.reclaim, cfg.block_tables, self.heads, self.sinks, block_size, self.rho,
                              packed_outside=self.prefetch)
        self.by_resident = self.foot.only_resident(self.policy.per_layer)
        self.bs = block_size
        self.tok_bytes = kv_bytes_per_token
        self.host_bw = host_bandwidth
        pool = cfg.host_pool_bytes if cfg.host_pool_bytes is not None else host_pool_bytes
        self.host_pool_bytes = float(pool)
        self.host_cap = pool / kv_bytes_per_token if kv_bytes_per_token > 0 else math.inf
        self.states: dict[Group, SeqState] = {}
        self.stats: dict[int, RequestStats] = {}
        self.full_blocks_sum = 0
        self.holes_sum = 0
        self.host_tokens = 0.0
        self.host_tokens_max = 0.0
        self._copy_tok = 0.0
        self._offload_tok = 0
        self._recall_tok = 0.0
        self._prefetch_tok = 0.0
        self._read_extra = 0
        self.totals = {"copy_tokens": 0.0, "offload_tokens": 0, "recall_tokens": 0.0, "prefetch_tokens": 0.0,
                       "evicted_tokens": 0.0}
        self._timeline_values: tuple = ()
        self.steady = (SteadySteps(self) if not self.offload and not self.prefetch and self.by_resident
                       else None)
        """Steps only the groups due each iteration (kvsim/engine/sparse_steady.py), for the policies
        whose steps in between only add to running sums; None: every group every iteration."""

    # ----------------------------------------------------------------- policy targets
    def _blocks(self, keeps, resident: float, length: int) -> tuple[int, float]:
        """(blocks, kept slots) one sequence holds for `keeps`."""
        return self.foot.blocks(keeps, self.policy.widest(keeps), resident, length)

    def _on_gpu(self, keeps: list[Keep], resident: float) -> tuple[list[Keep], float]:
        """(the Keeps as the GPU pool holds them, the tokens it holds) for `keeps` attending `resident`
        tokens: as they are, but for a prefetch policy only `share` of each group's selected (outside)
        entries, the double buffer, is held (sinks and window for every layer)."""
        if not self.prefetch or self.share >= 1.0:
            return keeps, resident
        k = keeps[0]
        if k.outside <= 0:
            return keeps, resident
        staged = k.outside * self.share
        return [Keep(k.sinks, k.window, staged, k.pool)] * len(keeps), resident - (k.outside - staged)

    def _target(self, prompt_kv: int, length: int):
        """(keeps, tokens attended, tokens held on the GPU, blocks held) at `length`."""
        pol = self.policy
        keeps = pol.keeps(length, prompt_kv)
        resident = pol.resident_tokens(keeps)
        gpu, held = self._on_gpu(keeps, resident)
        return keeps, resident, held, self._blocks(gpu, held, length)[0]

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

    def _host(self, st: SeqState, keep: Keep, resident: float, length: int, n: int,
              write: bool = True) -> None:
        """Offload policies: positions other than the sinks and the recent window live in the host pool
        (written there once; `write` False when they are already there, after a swap-in); `selected` are
        those the GPU set takes from it (the outside tokens, prefetched every step)."""
        if resident >= length:   # within the budget: everything on the GPU
            positions, selected = 0, 0
        else:
            positions, selected = length - keep.window - keep.sinks, keep.outside
        if positions > st.written:
            if write:
                self._offload_tok += (positions - st.written) * n
            st.written = positions
        st.selected = selected
        st.lost_hot = min(st.lost_hot, float(selected))
        st.lost_cold = min(st.lost_cold, float(max(0, positions - selected)))
        host = max(0.0, positions - st.lost_cold - st.lost_hot)
        self.host_tokens += (host - st.offloaded) * n
        st.offloaded = host

    def _evict(self) -> None:
        """The host pool is over its cap: evict the excess for good, the least-used entries first (those
        never selected, whose use counters stay at zero), spread over the sequences in proportion to what
        each holds of them; then selected entries the same way."""
        excess = self.host_tokens - self.host_cap
        evicted = 0.0
        for hot in (False, True):
            if excess <= 1e-9:
                break
            avail = {g: (st.selected - st.lost_hot if hot else st.written - st.selected - st.lost_cold)
                     for g, st in self.states.items()}
            total = sum(g.n * a for g, a in avail.items() if a > 0)
            if total <= 0:
                continue
            share = min(1.0, excess / total)
            for g, a in avail.items():
                if a <= 0:
                    continue
                st = self.states[g]
                take = a * share
                if hot:
                    st.lost_hot += take
                else:
                    st.lost_cold += take
                st.offloaded -= take
                st.rs.host_evicted += take
                evicted += take * g.n
            excess -= total * share
        self.host_tokens -= evicted
        self.totals["evicted_tokens"] += evicted

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
        if self.steady is not None:
            self.steady.enter(g, st)
        rs.lost_cold = rs.lost_hot = 0.0  # a fresh prefill: every entry computed again
        keeps, resident, held, blocks = self._target(prompt, prompt)
        if blocks < st.blocks and resize(g, blocks, False):
            self._resized(g, st, blocks, held)
            st.resident = held
        if self.offload:
            self._host(st, keeps[0], resident, prompt, n)
        return 0

    def on_leave_decode(self, g: Group) -> int:
        st = self.states.pop(g, None)
        if st is None:
            return 0
        if self.steady is not None:
            self.steady.leave(g, st)
        n = g.n
        if st.length:
            st.rs.full_tokens = st.length
            st.rs.kept_tokens = st.resident
        self.full_blocks_sum -= st.full_blocks * n
        self.holes_sum -= st.holes * n
        self.host_tokens -= st.offloaded * n
        st.rs.lost_cold, st.rs.lost_hot = st.lost_cold, st.lost_hot  # kept if it is swapped back in
        return -st.offset

    def before_decode(self, it: int, resize: Resize) -> int:
        """Resize every decoding group to the policy's footprint at this iteration's context."""
        if self.steady is not None:
            return self.steady.run_pass(it, resize)
        return resize_each(self.states, self._step, it, resize)

    def sync(self) -> None:
        """Every decoding group's SeqState and request sums as of the last iteration (steady groups are
        otherwise accounted when due: kvsim/engine/sparse_steady.py); between iterations."""
        if self.steady is not None:
            self.steady.sync()

    def swap_in_blocks(self, g: Group, length: int, held: int) -> int:
        """A returning group is sized to the policy's footprint at its length, not its full context."""
        rs = self._request_stats(g)
        blocks = self._target(rs.prompt_kv, length)[3]
        return max(held, blocks * g.n)

    def on_swap_in(self, g: Group, it: int, resize: Resize) -> int:
        """g is back from host memory with the blocks it held; its policy state resumes (offloaded KV
        stayed in host memory: nothing to write again) and it is resized for this iteration."""
        n = g.n
        length = g.base + it
        rs = self._request_stats(g)
        keeps, resident, held, _ = self._target(rs.prompt_kv, length)
        st = SeqState(prompt_kv=rs.prompt_kv, resident=held, blocks=g.seq_blocks // n, rs=rs,
                      next_reread=next_reread(rs), lost_cold=rs.lost_cold, lost_hot=rs.lost_hot)
        if self.offload:
            self._host(st, keeps[0], resident, length, n, write=False)
        self.states[g] = st
        steady = self.steady
        if steady is None:
            return self._step(g, st, it, resize)
        steady.enter(g, st)
        steady.soon.pop()  # (stepped now)
        delta = self._step(g, st, it, resize)
        if self.states.get(g) is st:
            steady.plan(g, st, it)
        return delta

    def batch_extras(self, figures: Figures) -> Extras:
        """This iteration's (re-read recall, offload, compaction copy, prefetch) bytes and the extra KV
        tokens its decodes read (prefetched entries outside the double buffer); closes its accounting
        (run totals, timeline values)."""
        if self.offload:
            if self.host_tokens > self.host_cap:
                self._evict()
            if self.host_tokens > self.host_tokens_max:
                self.host_tokens_max = self.host_tokens
        read_extra = self._read_extra
        if not (self._copy_tok or self._offload_tok or self._recall_tok or self._prefetch_tok):
            # nothing moved (the common iteration): the same values, no totals to add zeros to
            context_tokens, decode_blocks, prefill_blocks = figures()
            self._timeline_values = (
                context_tokens, self.full_blocks_sum + prefill_blocks, decode_blocks + prefill_blocks,
                self.holes_sum, int(self.host_tokens + 0.5), 0.0, 0.0, 0.0, 0.0, 0.0, 0)
            self._read_extra = 0
            return 0.0, 0.0, 0.0, 0.0, read_extra
        tb = self.tok_bytes
        copy_b, off_b, rec_b = self._copy_tok * tb, self._offload_tok * tb, self._recall_tok * tb
        pre_b = self._prefetch_tok * tb
        context_tokens, decode_blocks, prefill_blocks = figures()
        self._timeline_values = (
            context_tokens, self.full_blocks_sum + prefill_blocks, decode_blocks + prefill_blocks,
            self.holes_sum, int(self.host_tokens + 0.5), rec_b, off_b, copy_b, pre_b, 0.0, 0)
        t = self.totals
        t["copy_tokens"] += self._copy_tok
        t["offload_tokens"] += self._offload_tok
        t["recall_tokens"] += self._recall_tok
        t["prefetch_tokens"] += self._prefetch_tok
        self._copy_tok = 0.0
        self._offload_tok = 0
        self._recall_tok = 0.0
        self._prefetch_tok = 0.0
        self._read_extra = 0
        return rec_b - pre_b, off_b, copy_b, pre_b, read_extra

    def record_overlap(self, compute_s: float, transfer_s: float, exposed_s: float) -> None:
        """The cost model's split of this iteration's prefetch (CostModel.prefetch_overlap) into the
        timeline values: the seconds compute did not hide, and 1 when the transfer exceeded the compute it
        overlaps (a transfer-bound iteration)."""
        v = self._timeline_values
        self._timeline_values = (*v[:-2], exposed_s, int(transfer_s > compute_s))

    def decode_steps(self, g: Group, remaining: int) -> int:
        return remaining

    def progress(self, g: Group, done: int) -> int:
        return 0

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
        n = g.n
        if length < st.seg_until:
            resident = st.seg_resident + st.seg_slope * (length - st.seg_len)
        else:
            resident = self._renew(st, length)
        keeps = None
        held = resident  # tokens the GPU pool holds (attended: resident)
        gpu_keeps = None
        if self.offload:
            keeps = self.policy.keeps(length, st.prompt_kv)
            self._host(st, keeps[0], resident, length, n)
            if st.lost_hot > 0:  # evicted selected entries are no longer on the GPU either
                k = keeps[0]
                keeps = [Keep(k.sinks, k.window, max(0.0, k.outside - st.lost_hot), k.pool)] * len(keeps)
                resident = max(0.0, resident - st.lost_hot)
            gpu_keeps, held = self._on_gpu(keeps, resident)
        if self.by_resident:
            blocks, slots = -int(-held // self.bs), held
        else:
            keeps = keeps or self.policy.keeps(length, st.prompt_kv)
            blocks, slots = self._blocks(gpu_keeps or keeps, held, length)
        if blocks != st.blocks:
            if not resize(g, blocks):
                return 0
            self._resized(g, st, blocks, held)
        st.resident = held
        st.length = length
        full_blocks = -(-length // self.bs)
        if full_blocks != st.full_blocks:
            self.full_blocks_sum += (full_blocks - st.full_blocks) * n
            st.full_blocks = full_blocks
        if not self.by_resident:
            holes = self.foot.holes(blocks, slots, held, length)
            self.holes_sum += (holes - st.holes) * n
            st.holes = holes
        ctx = int(held + 0.5)
        offset = n * (ctx - length)
        delta = offset - st.offset
        st.offset = offset
        if held != resident:  # the selected entries outside the double buffer are read as they arrive
            self._read_extra += n * (int(resident + 0.5) - ctx)

        rs = st.rs
        if self.prefetch and resident < length:  # this step's selected entries come over the host link
            fetched = max(0.0, st.selected - st.lost_hot)
            self._recall_tok += fetched * n
            self._prefetch_tok += fetched * n
            b = fetched * self.tok_bytes
            rs.prefetch_bytes += b
            rs.recall_bytes += b
            rs.stall_s += b / self.host_bw
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
        cold = st.written - st.selected
        lost_share = st.lost_cold / cold if self.offload and cold > 0 else 0.0
        recalled, st.reread_avail = reread_outcome(rs, end - start, kept, self.offload, self.tok_bytes,
                                                   self.host_bw, lost_share)
        self._recall_tok += recalled * g.n
        st.reread_until = step + self.span - 1
