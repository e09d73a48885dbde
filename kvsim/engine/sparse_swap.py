"""Swap-in under a token-level policy: a swapped-out group returns sized to the policy's footprint."""

from __future__ import annotations

from kvsim.engine.group import DECODE, RUNNING
from kvsim.kvcache.sparsity.tracker import SeqState, next_reread


def swap_in_sparse(sched) -> int:
    """The base Scheduler._swap_in (FCFS, sequence / token budgets, free blocks above the watermark),
    except that a returning group's footprint is what the policy keeps at its length, not the full
    context. Returns the blocks moved from host memory."""
    kv = sched.kv
    it = sched.it
    moved = 0
    while sched.swapped:
        g = sched.swapped[0]
        n = g.n
        if sched.running_seqs + n > sched.lim.max_num_seqs or sched._budget < n:
            break
        length = g.base + 1
        rs = sched._request_stats(g)
        _, resident, blocks = sched._target(rs.prompt_kv, length)
        held = kv.swap_blocks_needed(g.seqs)
        need = max(held, blocks * n)
        if need + n > kv.num_free_blocks - sched.lim.watermark_blocks:
            break
        sched.swapped.popleft()
        moved += kv.swap_in(g.seqs)
        g.state = RUNNING
        g.phase = DECODE
        sched.running[g] = None
        sched.running_seqs += n
        g.base = length - it
        g.gen_base = g.generated + 1 - it
        st = SeqState(prompt_kv=rs.prompt_kv, resident=resident, blocks=kv.num_blocks_of(g.seqs[0]),
                      contrib=n * g.base, rs=rs, next_reread=next_reread(rs))
        if sched.offload:  # its offloaded KV stayed in host memory: nothing to write again
            st.offloaded = length - int(resident + 0.5)
            sched.host_tokens += st.offloaded * n
        g.seq_blocks = st.blocks * n
        sched.dec_seqs += n
        sched.dec_base_sum += n * g.base
        sched.dec_blocks += g.seq_blocks
        sched.full_base_sum += n * g.base
        sched.states[g] = st
        sched._budget -= n
        sched._push(sched._finish_heap, g.output - g.gen_base, g)
        sched._step(g, st, it)
    return moved
