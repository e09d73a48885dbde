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
    assert counts == pool.refcount, "refcounts do not match block tables"
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
    free = pool.known_free_ids()
    assert len(free) == len(set(free)), "block on the free list twice"
    assert not any(map(counts.__getitem__, free)), "referenced block on the free list"
    return counts
