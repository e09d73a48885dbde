"""Invariant checks shared by the prefix-caching managers (tables, refcounts, the shared-slot count)."""

from __future__ import annotations


def check_tables(m) -> list[int]:
    """Check a PagedKVManager-shaped manager's tables against its pool; return references per block with
    state (BlockPool.known: the others were never handed out and are free).

    Refcounts equal table references, every table covers its token count, and shared_dup_tokens equals
    the slots reachable from a second (third, ...) table.
    """
    pool = m.pool
    counts = [0] * pool.known
    for table in m.tables.values():
        for b in table:
            assert 0 <= b < pool.known, f"block {b} never handed out"
            counts[b] += 1
    bs = m.block_size
    dup = 0
    seen: set[int] = set()
    for s, table in m.tables.items():
        ntok = m.ntok[s]
        assert len(table) == -(-ntok // bs), f"table of seq {s} mis-sized"
        for i, b in enumerate(table):
            if b in seen:
                dup += min(bs, ntok - i * bs)
            seen.add(b)
    assert dup == m.shared_dup_tokens, "shared token count drifted"
    check_refcounts(pool, counts)
    return counts


def check_refcounts(pool, counts: list[int], what: str = "block tables") -> None:
    """The pool's free list and refcounts against `counts` (the table references of each block with
    state): no block free twice, none referenced, each marked free (rc 1, BlockPool), refcounts equal
    the references elsewhere (a block no table holds, not free and not cached, is leaked), and `shared` the
    references beyond the first."""
    free = pool.known_free_ids()
    unit = "page" if what != "block tables" else "block"
    assert len(free) == len(set(free)), f"{unit} on the free list twice"
    assert not any(map(counts.__getitem__, free)), f"referenced {unit} on the free list"
    rc = pool.rc
    assert all(rc[b] for b in free), f"cached {unit} on the free list (rc 0; a free {unit}'s rc is 1)"
    exact = pool.refcount
    if exact != counts:
        b = next(b for b, (c, r) in enumerate(zip(counts, exact, strict=True)) if c != r)
        why = f"leaked {unit} {b} (rc 1, held by no table, not free)" if counts[b] == 0 and exact[b] == 1 \
            else f"{unit} {b} has rc {rc[b]}, {counts[b]} references"
        raise AssertionError(f"refcounts do not match {what}: {why}")
    assert pool.shared == sum(counts) - len(counts) + counts.count(0), "shared reference count drifted"
