# C types for paged.py when Cython compiles it (docs/speed.md, "C types where they pay"): PagedKVManager is
# an extension type (the prefix managers, Python classes, subclass it and add slots: the methods they or the
# engine override or call are cpdef, dispatched to an override), its pool typed and its counts C integers;
# grow_due's per-entry loop over typed containers.
import cython

from kvsim.kvcache.block_pool cimport BlockPool


cdef class PagedKVManager:
    cdef public BlockPool pool
    cdef public Py_ssize_t block_size, shared_dup_tokens, cow_copies, swap_capacity_blocks, swap_used_blocks
    cdef public dict tables, ntok, swapped
    cdef public object host, tiers

    @cython.locals(pool=BlockPool)
    cpdef Py_ssize_t free_blocks(self) except? -1

    cpdef bint _needs_cow(self, list table, Py_ssize_t ntok) except -1

    @cython.locals(table=list, ntok=Py_ssize_t, need=Py_ssize_t)
    cpdef Py_ssize_t blocks_needed(self, seq, Py_ssize_t num_tokens) except? -1

    cpdef reserve(self, seq, num_tokens)

    @cython.locals(pool=BlockPool, free=Py_ssize_t, table=list, extra=Py_ssize_t, ntok=Py_ssize_t, cow=bint)
    cpdef allocate(self, seq, Py_ssize_t num_tokens)

    cpdef grow_one_block(self, seq, num_tokens)

    cpdef _take_evicting(self)

    @cython.locals(tables=dict, ntok=dict, ids=list)
    cpdef grow_each(self, list seqs, list num_tokens)

    @cython.locals(ids=list)
    cpdef grow_due(self, list entries, Py_ssize_t offset)

    cpdef _take_each(self, Py_ssize_t k)

    cpdef admit(self, seq, req, prompt_tokens, output_tokens)

    cpdef bint has(self, seq) except -1

    cpdef Py_ssize_t capacity_tokens(self, seq) except? -1

    cpdef last_block_shared(self, seq)

    @cython.locals(table=list, ntok=Py_ssize_t, kept=list, bs=Py_ssize_t)
    cpdef free(self, seq)

    cpdef Py_ssize_t num_blocks_of(self, seq) except? -1


@cython.locals(i=Py_ssize_t, e=tuple, table=list, base=Py_ssize_t)
cpdef _append_each(dict tables, dict ntok, list entries, list ids, Py_ssize_t offset)
