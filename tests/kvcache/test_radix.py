"""Hand-computed cases for the radix prefix cache (SGLang RadixAttention semantics)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.kvcache.hashing import BlockContent, request_content
from kvsim.kvcache.radix import RadixKVManager
from kvsim.kvcache.radix_tree import PageRuns, RadixNode, RadixTree, _cut, common_pages
from kvsim.workload.request import Request


def req(rid, segs, out=4):
    return Request(rid=rid, arrival_s=0.0, prompt_len=sum(n for _, n in segs), output_len=out,
                   segments=tuple(segs))


def start(m, seq, r):
    cached = m.admit(seq, r, r.prompt_len, r.output_len).tokens
    assert m.allocate(seq, r.prompt_len)
    m.check_invariants()
    return cached


def shape(node):
    """The tree as nested (page count, lock, children by first page) tuples."""
    return (len(node.blocks), node.lock, sorted(shape(c) for c in node.children.values()))


def test_node_split_where_prompts_diverge():
    """bs 4. A = content 1 (16 tokens) + 1 token: its 4 full pages form one node. B shares the first 8
    tokens (content 1 truncated to 8) then differs: matching splits A's node after 2 pages."""
    m = RadixKVManager(32, 4)
    start(m, 0, req(0, [(1, 17)]))
    root = m.tree.root
    assert shape(root) == (0, 2, [(4, 1, [])])  # root lock 1 (never evicted) + A
    m.free(0)
    assert shape(root) == (0, 1, [(4, 0, [])])
    assert start(m, 1, req(1, [(1, 8), (2, 9)])) == 8
    (mid,) = root.children.values()
    assert shape(mid) == (2, 1, [(2, 0, []), (2, 1, [])])  # split: shared 2 pages, A's rest, B's own pages
    assert mid.depth == 0 and all(c.depth == 2 for c in mid.children.values())
    assert m.tables[1][:2] == mid.blocks


def test_match_of_any_length_with_block_size_one():
    m = RadixKVManager(64, 1)
    start(m, 0, req(0, [(1, 10), (2, 7)]))
    m.free(0)
    assert start(m, 1, req(1, [(1, 7), (3, 5)])) == 7  # 7 tokens, any length: exact with pages of 1
    assert start(m, 2, req(2, [(1, 10), (2, 7)])) == 16  # all but the last prompt token


def test_locked_prefix_is_not_evicted_and_leaves_go_first():
    """Pool of 8 blocks of 4. A (8 tokens + 1) runs; C (8 + 1, other content) is cached and unlocked.
    A 5-block allocation must evict C's leaf, never A's locked path."""
    m = RadixKVManager(8, 4)
    start(m, 0, req(0, [(1, 9)]))
    start(m, 1, req(1, [(2, 9)]))
    m.free(1)
    assert m.cached_blocks == 2 and m.num_free_blocks == 5
    assert m.allocate(2, 20)  # 5 blocks: 3 free + C's 2-page leaf
    assert m.evictions == 2
    assert m.admit(3, req(3, [(1, 9)]), 9, 1).tokens == 8  # A's path survived
    m.free(3)
    m.check_invariants()


def test_leaf_eviction_exposes_parent():
    tree = RadixTree("lru")
    a = tree.add_child(tree.root, [0], [2], [0, 1])  # one run of two pages
    b = tree.add_child(a, [2], [1], [2])
    tree.unlock(b)  # releases b, a (root keeps its own lock)
    assert tree.queue.items() == [b]  # only the leaf is evictable
    assert tree.pop_leaf() is b
    assert tree.queue.items() == [a]  # its parent is a leaf now
    assert tree.pop_leaf() is a and not tree.root.children


def test_concurrent_computation_switches_to_tree_blocks():
    """A and B start together with the same 12-token prefix, so neither finds it cached. A's chunk is
    inserted first; when B's is, B drops its own copies and shares A's blocks (SGLang dedup)."""
    m = RadixKVManager(32, 4)
    a = req(0, [(1, 12), (2, 3)])
    b = req(1, [(1, 12), (3, 3)])
    assert m.admit(0, a, 15, 4).tokens == 0 and m.admit(1, b, 15, 4).tokens == 0
    assert m.allocate(0, 15) and m.allocate(1, 15)
    assert m.tables[1][:3] == m.tables[0][:3]
    assert m.used_blocks == 4 + 1 and m.shared_dup_tokens == 12
    m.check_invariants()
    m.free(0)
    m.free(1)
    assert m.used_blocks == 0 and m.cached_blocks == 3
    m.check_invariants()


def test_forked_samples_lock_the_path():
    m = RadixKVManager(32, 4)
    start(m, 0, req(0, [(1, 9)]))
    m.fork(0, 1)
    (node,) = m.tree.root.children.values()
    assert node.lock == 2
    m.free(0)
    assert node.lock == 1 and m.cached_blocks == 0
    m.free(1)
    assert node.lock == 0 and m.cached_blocks == 2
    m.check_invariants()


@settings(max_examples=200, deadline=None)
@given(segs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 13)), max_size=6),
       bs=st.sampled_from([1, 2, 4, 5]), n=st.integers(0, 40), data=st.data())
def test_page_runs_spell_the_page_keys(segs, bs, n, data):
    """PageRuns holds the pages BlockContent lists (as runs, with keys of its own): equal pages have equal
    keys, pieces and splits of the runs give back the same pages, and common_pages counts equal pages."""
    content = (*segs, (9, 1 << 62))
    pages = BlockContent(content, bs, chained=False).upto(n)[:n]
    pr = PageRuns(content, bs)
    assert pr.upto(n) >= n and sum(pr.counts) == pr.pages and pr.firsts[-1:] <= [pr.pages - 1]
    keys = [pr.key(i) for i in range(n)]
    for i in range(n):
        for j in range(n):
            assert (keys[i] == keys[j]) == (pages[i] == pages[j])
    i = data.draw(st.integers(0, n), label="i")
    j = data.draw(st.integers(min(i + 1, n), n), label="j")
    if j == i:
        return
    starts, counts = pr.runs(i, j)
    node = RadixNode(starts, counts, list(range(j - i)), None, i, {}, 0, 0, 1, 0)
    assert node.keys(bs) == keys[i:j]
    if j - i > 1:
        cut = data.draw(st.integers(1, j - i - 1), label="cut")
        ls, lc, rs, rc = _cut(starts, counts, cut, bs)
        assert RadixNode(ls, lc, [], None, 0, {}, 0, 0, 1, 0).keys(bs) + \
            RadixNode(rs, rc, [], None, 0, {}, 0, 0, 1, 0).keys(bs) == keys[i:j]
    other = PageRuns(data.draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 13)), max_size=6),
                               label="other") + [(8, 1 << 62)], bs)
    k = data.draw(st.integers(0, 40), label="k")
    other.upto(k)
    if k > 0:
        same = 0
        while same < min(j - i, k) and other.key(same) == keys[i + same]:
            same += 1
        assert common_pages(node, other, 0, k) == same


@settings(max_examples=300, deadline=None)
@given(segs=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 13)), max_size=6),
       more=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 13)), max_size=3),
       cut=st.integers(0, 6), out=st.integers(0, 13), bs=st.sampled_from([1, 2, 4, 5]), n=st.integers(0, 40),
       m=st.integers(0, 60))
def test_resumed_page_runs_spell_the_fresh_ones(segs, more, cut, out, bs, n, m):
    """A conversation's next turn (its content the turn before's up to a point, then its own) resumed from
    the turn before's runs (computed to any length) has the pages of fresh runs, and extends as they do."""
    prev_content = (*segs, (9, 1 << 62))
    new_content = (*segs[:cut], *([(9, out)] if cut >= len(segs) else []), *more, (8, 1 << 62))
    prev = PageRuns(prev_content, bs)
    prev.upto(n)
    fresh, resumed = PageRuns(new_content, bs), PageRuns(new_content, bs)
    resumed.resume(prev)
    assert resumed.pages <= prev.pages and sum(resumed.counts) == resumed.pages
    m = max(m, resumed.pages)
    assert fresh.upto(m) == resumed.upto(m)
    assert [fresh.key(i) for i in range(fresh.pages)] == [resumed.key(i) for i in range(resumed.pages)]
    assert (resumed._i, resumed._off) == (fresh._i, fresh._off)


def test_a_follow_up_starts_from_the_runs_of_the_turn_before():
    """A freed request's runs are kept for its follow-up (Request.after), which resumes from them: the pages
    of fresh runs, and the tree's blocks of the turn before (its prompt and its answer's full pages)."""
    m = RadixKVManager(64, 4)
    a = Request(rid=0, arrival_s=0.0, prompt_len=17, output_len=4, segments=((1, 10), (2, 7)), output_id=5)
    start(m, 0, a)
    m.set_computed_tokens(0, 20)
    m.free(0)
    assert m._kept[0] is m._runs and m._runs.pages == 5
    b = Request(rid=1, arrival_s=0.0, prompt_len=25, output_len=4, segments=((1, 10), (2, 7), (5, 3), (3, 5)),
                after=0)
    runs = m._pages(b)
    assert 0 not in m._kept and runs.pages == 5
    fresh = PageRuns(request_content(b), 4)
    assert runs.upto(6) == fresh.upto(6) == 6
    assert [runs.key(i) for i in range(6)] == [fresh.key(i) for i in range(6)]
    assert start(m, 1, b) == 20


