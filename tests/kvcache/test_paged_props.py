"""Stateful property test of PagedKVManager against an independent content model.

The model gives every logical block a content id: a write into a partially filled last block makes new
content and fork copies ids. Swap-out re-labels a batch's ids as host blocks (shared inside the batch
only) and swap-in re-labels again (shared inside the swap-in call only). Two resident table entries
must share a physical block exactly when they share a content id.
"""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvsim.kvcache.paged import PagedKVManager

NUM_BLOCKS = 32
SWAP_BLOCKS = 24


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class PagedMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.m: PagedKVManager | None = None
        self.content: dict[int, list[int]] = {}  # resident seq -> content id per logical block
        self.ntok: dict[int, int] = {}
        self.host: dict[int, tuple[list[int], int]] = {}  # swapped seq -> (host content ids, ntok)
        self.next_seq = 0
        self.next_content = 0

    def fresh(self, k: int = 1) -> list[int]:
        ids = list(range(self.next_content, self.next_content + k))
        self.next_content += k
        return ids

    def relabel(self, seqs, ids_of) -> dict[int, list[int]]:
        """Fresh ids for seqs' blocks, equal exactly where the old ids were equal."""
        new: dict[int, int] = {}
        out = {}
        for s in seqs:
            out[s] = []
            for c in ids_of(s):
                if c not in new:
                    new[c] = self.fresh()[0]
                out[s].append(new[c])
        return out

    def swap_used(self) -> int:
        return len({h for ids, _ in self.host.values() for h in ids})

    def holders(self, bid: int) -> int:
        return sum(t.count(bid) for t in self.m.tables.values())

    def snapshot(self):
        m = self.m
        return ({s: list(t) for s, t in m.tables.items()}, dict(m.ntok), list(m.pool.refcount),
                m.pool.free_ids(), m.shared_dup_tokens, m.cow_copies, m.swap_used_blocks, dict(m.swapped))

    @initialize(block_size=st.sampled_from([1, 4, 16]))
    def setup(self, block_size):
        self.bs = block_size
        self.m = PagedKVManager(NUM_BLOCKS, block_size, swap_capacity_blocks=SWAP_BLOCKS)

    @rule(data=st.data())
    def new_seq(self, data):
        tokens = data.draw(st.integers(0, 5 * self.bs), label="tokens")
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        need = ceil_div(tokens, self.bs)
        assert self.m.blocks_needed(seq, tokens) == need
        ok = need <= self.m.num_free_blocks
        before = self.snapshot()
        assert self.m.allocate(seq, tokens) is ok
        if not ok:
            assert self.snapshot() == before
            return
        self.content[seq] = self.fresh(need)
        self.ntok[seq] = tokens

    @precondition(lambda self: self.content)
    @rule(data=st.data())
    def grow(self, data):
        m, bs = self.m, self.bs
        seq = data.draw(st.sampled_from(sorted(self.content)), label="seq")
        old = self.ntok[seq]
        new = old + data.draw(st.integers(1, 2 * bs), label="grow")
        table = list(m.tables[seq])
        partial = old % bs != 0
        cow = partial and self.holders(table[-1]) > 1
        assert m.last_block_shared(seq) is cow
        assert m.capacity_tokens(seq) == len(table) * bs
        need = ceil_div(new, bs) - len(table) + cow
        assert m.blocks_needed(seq, new) == need
        ok = need <= m.num_free_blocks
        before = self.snapshot()
        cow_before, used_before = m.cow_copies, m.used_blocks
        assert m.allocate(seq, new) is ok
        if not ok:
            assert self.snapshot() == before
            return
        after = m.tables[seq]
        if table:
            assert after[: len(table) - 1] == table[:-1]
            assert (after[len(table) - 1] != table[-1]) is cow
        assert m.cow_copies == cow_before + cow
        assert m.used_blocks == used_before + need
        if partial:
            self.content[seq][-1] = self.fresh()[0]
        self.content[seq] += self.fresh(ceil_div(new, bs) - len(table))
        self.ntok[seq] = new

    @precondition(lambda self: any(n % self.bs == 0 for n in self.ntok.values()))
    @rule(data=st.data())
    def grow_one_block(self, data):
        m, bs = self.m, self.bs
        seq = data.draw(st.sampled_from(sorted(s for s, n in self.ntok.items() if n % bs == 0)), label="seq")
        new = self.ntok[seq] + data.draw(st.integers(1, bs), label="grow")
        ok = m.num_free_blocks > 0
        before = self.snapshot()
        table = list(m.tables[seq])
        assert m.grow_one_block(seq, new) is ok
        if not ok:
            assert self.snapshot() == before
            return
        assert m.tables[seq][:-1] == table and len(m.tables[seq]) == len(table) + 1
        self.content[seq] += self.fresh()
        self.ntok[seq] = new

    @precondition(lambda self: self.content)
    @rule(data=st.data())
    def fork(self, data):
        parent = data.draw(st.sampled_from(sorted(self.content)), label="parent")
        child, self.next_seq = self.next_seq, self.next_seq + 1
        dup, used = self.m.shared_dup_tokens, self.m.used_blocks
        self.m.fork(parent, child)
        assert self.m.shared_dup_tokens == dup + self.ntok[parent]
        assert self.m.used_blocks == used
        self.content[child] = list(self.content[parent])
        self.ntok[child] = self.ntok[parent]

    @precondition(lambda self: self.content)
    @rule(data=st.data())
    def free(self, data):
        seq = data.draw(st.sampled_from(sorted(self.content)), label="seq")
        expected = sum(1 for b in self.m.tables[seq] if self.holders(b) == 1)
        used = self.m.used_blocks
        assert self.m.free(seq) == expected
        assert self.m.used_blocks == used - expected
        del self.content[seq], self.ntok[seq]

    @precondition(lambda self: self.content)
    @rule(data=st.data())
    def swap_out(self, data):
        m = self.m
        seqs = data.draw(st.lists(st.sampled_from(sorted(self.content)), min_size=1, max_size=3,
                                  unique=True), label="seqs")
        blocks = {b for s in seqs for b in m.tables[s]}
        can = self.swap_used() + len(blocks) <= SWAP_BLOCKS
        assert m.can_swap_out(seqs) is can
        if not can:
            return
        outside = {b for s, t in m.tables.items() if s not in seqs for b in t}
        used = m.used_blocks
        assert m.swap_out(seqs) == len(blocks)
        assert m.used_blocks == used - len(blocks - outside)
        host = self.relabel(seqs, self.content.pop)
        for s in seqs:
            self.host[s] = (host[s], self.ntok.pop(s))
        assert not any(m.has(s) for s in seqs)

    @precondition(lambda self: self.host)
    @rule(data=st.data())
    def swap_in(self, data):
        m = self.m
        seqs = data.draw(st.lists(st.sampled_from(sorted(self.host)), min_size=1, max_size=4, unique=True),
                         label="seqs")
        need = len({h for s in seqs for h in self.host[s][0]})
        assert m.swap_blocks_needed(seqs) == need
        if need > m.num_free_blocks:
            return
        used = m.used_blocks
        assert m.swap_in(seqs) == need
        assert m.used_blocks == used + need
        self.content.update(self.relabel(seqs, lambda s: self.host[s][0]))
        for s in seqs:
            self.ntok[s] = self.host.pop(s)[1]

    @invariant()
    def consistent(self):
        m = self.m
        if m is None:
            return
        m.check_invariants()
        bs, n = self.bs, NUM_BLOCKS
        counts = [0] * n
        for t in m.tables.values():
            for b in t:
                counts[b] += 1
        assert counts == m.pool.refcount
        held = {b for b in range(n) if counts[b]}
        free = m.pool.free_ids()
        assert len(free) == len(set(free)) and not set(free) & held
        assert m.num_free_blocks + m.used_blocks == n
        assert m.used_blocks == len(held) <= n
        assert set(m.tables) == set(self.content) and m.ntok == self.ntok
        phys_to_content: dict[int, int] = {}
        content_to_phys: dict[int, int] = {}
        fill: dict[int, int] = {}
        for s, t in m.tables.items():
            assert len(t) == len(self.content[s]) == ceil_div(self.ntok[s], bs)
            for i, (b, c) in enumerate(zip(t, self.content[s], strict=True)):
                assert phys_to_content.setdefault(b, c) == c, f"block {b} shared by different content"
                assert content_to_phys.setdefault(c, b) == b, f"content {c} lost its sharing"
                f = min(bs, self.ntok[s] - i * bs)
                assert fill.setdefault(b, f) == f, f"block {b} filled differently by its holders"
        assert sum(self.ntok.values()) - m.shared_dup_tokens == sum(fill.values())
        assert set(m.swapped) == set(self.host)
        assert all(m.swapped[s][1] == n for s, (_, n) in self.host.items())
        assert m.swap_used_blocks == self.swap_used() <= SWAP_BLOCKS

    def teardown(self):
        m = self.m
        if m is None:
            return
        for s in list(m.tables):
            m.free(s)
        back = sorted(self.host)
        m.swap_in(back)
        for s in back:
            m.free(s)
        m.check_invariants()
        assert m.used_blocks == 0 and m.num_free_blocks == NUM_BLOCKS
        assert sorted(m.pool.free_ids()) == list(range(NUM_BLOCKS))
        assert m.pool.refcount == [0] * NUM_BLOCKS
        assert (m.shared_dup_tokens, m.swap_used_blocks, m.swapped, m.tables) == (0, 0, {}, {})


PagedMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestPagedManager = PagedMachine.TestCase
