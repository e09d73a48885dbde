"""Stateful property test of the prefix-caching managers (hash and radix) under admission, chunked
allocation, decode growth, forks, undone admissions and frees, on a pool small enough to evict.

Besides each manager's own check_invariants (refcounts, free/cached/referenced partition, key map or
tree shape, shared-slot count), an independent content model checks that the cache never maps wrong
content: every full block a table holds must carry the chained key of that table's content at that
position, consistently across all tables that share it, and a hash-cached block must keep its key.
"""

import copy

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvsim.kvcache.hashing import BlockContent, request_content
from kvsim.kvcache.prefix_hash import PrefixHashKVManager
from kvsim.kvcache.radix import RadixKVManager
from kvsim.workload.request import Request

NUM_BLOCKS = 24


def state_of(m) -> tuple:
    """What a grow step may change: tables, refcounts, the free stack, evictions and what is cached (the
    eviction queue's live entries, or the tree's blocks)."""
    pool = m.pool
    if isinstance(m, PrefixHashKVManager):
        cached = (sorted(pool.queue.live), dict(pool.by_key), list(pool.key_of))
    else:
        cached = (sorted(b for node in m.tree.nodes() for b in node.blocks), list(pool.in_tree))
    return ({s: list(t) for s, t in m.tables.items()}, dict(m.ntok), list(pool.refcount), pool.free_ids(),
            pool.free_count, m.evictions, m.cached_blocks, cached)
PIECES = [(1, 8), (1, 5), (2, 6), (3, 4), (4, 9), (5, 3)]  # content ids reused across prompts


class PrefixMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.m = None
        self.info: dict[int, tuple[list, int, int]] = {}  # seq -> (chained keys, prompt, known full blocks)
        self.prefilling: dict[int, int] = {}              # seq -> prompt tokens still to allocate
        self.next_seq = 0
        self.next_rid = 0

    @initialize(kind=st.sampled_from(["hash", "radix"]), block_size=st.sampled_from([1, 2, 4]),
                eviction=st.sampled_from(["lru", "lfu", "fifo", "length"]))
    def setup(self, kind, block_size, eviction):
        cls = PrefixHashKVManager if kind == "hash" else RadixKVManager
        self.m = cls(NUM_BLOCKS, block_size, eviction=eviction)
        self.bs = block_size

    def keys_for(self, r: Request) -> list:
        return BlockContent(request_content(r), self.bs).upto(NUM_BLOCKS * 4)

    @rule(data=st.data())
    def admit(self, data):
        m, bs = self.m, self.bs
        pieces = data.draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4), label="pieces")
        out_id = data.draw(st.sampled_from([-1, 77, 78]), label="output_id")
        r = Request(rid=self.next_rid, arrival_s=0.0, prompt_len=sum(n for _, n in pieces), output_len=8,
                    segments=tuple(pieces), output_id=out_id)
        self.next_rid += 1
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        cached = m.admit(seq, r, r.prompt_len, r.output_len).tokens
        assert cached % bs == 0 and cached <= (r.prompt_len - 1) // bs * bs
        keys = self.keys_for(r)
        self.info[seq] = (keys, r.prompt_len, cached // bs)
        chunk = data.draw(st.integers(1, r.prompt_len - cached), label="chunk")
        undo = data.draw(st.booleans(), label="undo")
        if undo or m.blocks_needed(seq, cached + chunk) > m.num_free_blocks:
            m.free(seq)
            del self.info[seq]
            return
        assert m.allocate(seq, cached + chunk)
        self.info[seq] = (keys, r.prompt_len, (cached + chunk) // bs)
        if cached + chunk < r.prompt_len:
            self.prefilling[seq] = r.prompt_len - cached - chunk

    @precondition(lambda self: self.prefilling)
    @rule(data=st.data())
    def continue_prefill(self, data):
        seq = data.draw(st.sampled_from(sorted(self.prefilling)), label="seq")
        left = self.prefilling[seq]
        chunk = data.draw(st.integers(1, left), label="chunk")
        total = self.m.ntok[seq] + chunk
        if not self.m.allocate(seq, total):
            return
        keys, prompt, _ = self.info[seq]
        self.info[seq] = (keys, prompt, total // self.bs)
        if chunk == left:
            del self.prefilling[seq]
        else:
            self.prefilling[seq] = left - chunk

    def decoding(self):
        return sorted(s for s in self.info if s not in self.prefilling)

    @precondition(lambda self: any(s not in self.prefilling for s in self.info))
    @rule(data=st.data())
    def grow(self, data):
        m = self.m
        seq = data.draw(st.sampled_from(self.decoding()), label="seq")
        keys, prompt, _ = self.info[seq]
        if data.draw(st.booleans(), label="fast"):
            new = m.capacity_tokens(seq) + 1
            if m.last_block_shared(seq) or not m.grow_one_block(seq, new):
                return
        else:
            new = m.ntok[seq] + data.draw(st.integers(1, 3 * self.bs), label="grow")
            if not m.allocate(seq, new):
                return
        full = (new - 1) // self.bs  # blocks before the one holding the newest token
        self.info[seq] = (keys, prompt, max(self.info[seq][2], full))

    @precondition(lambda self: any(s not in self.prefilling for s in self.info))
    @rule(data=st.data())
    def grow_each(self, data):
        """Several sequences' grow steps at once: the blocks, evictions and state of grow_one_block on each
        in turn (all of them succeeding), or nothing changed."""
        m = self.m
        seqs = data.draw(st.lists(st.sampled_from(self.decoding()), min_size=1, max_size=6, unique=True),
                         label="seqs")
        seqs = [s for s in seqs if not m.last_block_shared(s)]
        new = [m.capacity_tokens(s) + 1 for s in seqs]
        one = copy.deepcopy(m)
        ok = all(one.grow_one_block(s, n) for s, n in zip(seqs, new, strict=True))
        before = state_of(m)
        if data.draw(st.booleans(), label="due"):  # the scheduler's form: (epoch, group, seq, base), offset
            assert m.grow_due([(0, None, s, n - 3) for s, n in zip(seqs, new, strict=True)], 3) == ok
        else:
            assert m.grow_each(seqs, new) == ok
        assert state_of(m) == (state_of(one) if ok else before)
        if ok:
            for s, n in zip(seqs, new, strict=True):
                keys, prompt, known = self.info[s]
                self.info[s] = (keys, prompt, max(known, (n - 1) // self.bs))

    @precondition(lambda self: any(s not in self.prefilling for s in self.info))
    @rule(data=st.data())
    def fork(self, data):
        parent = data.draw(st.sampled_from(self.decoding()), label="parent")
        child, self.next_seq = self.next_seq, self.next_seq + 1
        self.m.fork(parent, child)
        keys, prompt, known = self.info[parent]
        self.info[child] = (keys[:known], prompt, known)  # the child's later tokens are its own

    @precondition(lambda self: self.info)
    @rule(data=st.data())
    def free(self, data):
        seq = data.draw(st.sampled_from(sorted(self.info)), label="seq")
        self.m.free(seq)
        del self.info[seq]
        self.prefilling.pop(seq, None)

    @invariant()
    def consistent(self):
        m = self.m
        if m is None:
            return
        m.check_invariants()
        assert m.used_blocks + m.cached_blocks + len(m.pool.free_ids()) == NUM_BLOCKS
        content: dict[int, object] = {}
        for seq, (keys, _, known) in self.info.items():
            for j, b in enumerate(m.tables[seq][: min(known, len(keys))]):
                assert content.setdefault(b, keys[j]) == keys[j], "two tables disagree on a block"
        if isinstance(m, PrefixHashKVManager):
            for b, k in content.items():
                assert m.pool.key_of[b] in (None, k), "cached key differs from the block's content"


PrefixMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestPrefixMachine = PrefixMachine.TestCase
