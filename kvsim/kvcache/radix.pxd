# Cython types for radix.py (docs/speed.md, "C types where they pay"): RadixPool, _SeqPath and RadixKVManager are
# extension types (subclasses of the extension types BlockPool and PagedKVManager: the hooks and the methods the
# engine calls are cpdef overrides, dispatched in C), with C integers for block ids, counts and indexes.
cimport cython

from kvsim.kvcache.block_pool cimport BlockPool
from kvsim.kvcache.paged cimport PagedKVManager
from kvsim.kvcache.radix_tree cimport PageRuns, RadixNode, RadixTree


cdef class RadixPool(BlockPool):
    cdef public bytearray in_tree
    cdef public Py_ssize_t num_cached_free, evictions
    cdef public RadixTree tree

    cpdef _extend(self, Py_ssize_t k)

    cpdef Py_ssize_t free_now(self) except -1

    @cython.locals(ids=list, freed=Py_ssize_t, in_tree=bytearray, rc=list, blocks=list)
    cpdef _evict(self, Py_ssize_t k)

    @cython.locals(kept=list, zeroed=list, in_tree=bytearray, rc=list, free=list, b=Py_ssize_t)
    cpdef release(self, list ids)

    @cython.locals(kept=list, zeroed=list)
    cpdef list release_own(self, list ids)

    @cython.locals(r=Py_ssize_t)
    cpdef Py_ssize_t reuse(self, Py_ssize_t bid) except? -1


@cython.locals(b=Py_ssize_t)
cpdef _forget(list blocks, bytearray in_tree, list rc)

@cython.locals(b=Py_ssize_t)
cpdef _mark(list blocks, bytearray in_tree)

cpdef Py_ssize_t _cached_free(RadixPool pool) except? -1

@cython.locals(t=Py_ssize_t, b=Py_ssize_t)
cpdef Py_ssize_t _first_shared(list rc, list table, Py_ssize_t i, Py_ssize_t end) except? -1


@cython.locals(out=list, short=object, n=object)
cpdef list _content_segs(req)

cpdef tuple _seg(cid, n)


cdef class _SeqPath:
    cdef public PageRuns content
    cdef public Py_ssize_t prompt, pages, computed
    cdef public object rid
    cdef public RadixNode node
    cdef public bint pending


@cython.locals(st=_SeqPath)
cpdef _SeqPath _new_path(PageRuns content, Py_ssize_t prompt, RadixNode node, Py_ssize_t pages, bint pending, rid)

@cython.locals(hit=object)
cpdef _gpu_hit(tokens)


cdef class RadixKVManager(PagedKVManager):
    cdef public RadixTree tree
    cdef public dict paths
    cdef public object _runs_rid
    cdef public PageRuns _runs
    cdef public dict _kept

    @cython.locals(runs=PageRuns, prev=PageRuns)
    cpdef PageRuns _pages(self, req)

    @cython.locals(kept=dict)
    cpdef _keep(self, rid, PageRuns runs)

    @cython.locals(bs=Py_ssize_t, content=PageRuns, node=RadixNode, blocks=list, pool=RadixPool, tree=RadixTree,
                   cached=Py_ssize_t, reused=Py_ssize_t, n=Py_ssize_t, prompt=Py_ssize_t)
    cpdef admit(self, seq, req, prompt_tokens, output_tokens)

    cpdef allocate(self, seq, Py_ssize_t num_tokens)

    cpdef reserve(self, seq, num_tokens)

    @cython.locals(st=_SeqPath, upto=Py_ssize_t)
    cpdef bint _allocate(self, seq, Py_ssize_t num_tokens, bint insert) except -1

    @cython.locals(pr=PageRuns, table=list, tree=RadixTree, node=RadixNode, child=RadixNode, i=Py_ssize_t,
                   j=Py_ssize_t, t=Py_ssize_t, blocks=list, starts=list, counts=list, new_blocks=list,
                   pool=RadixPool)
    cpdef _insert(self, seq, _SeqPath st, Py_ssize_t upto)

    @cython.locals(pool=RadixPool, bs=Py_ssize_t)
    cpdef _switch(self, list table, Py_ssize_t idx, tree_block)

    @cython.locals(st=_SeqPath, upto=Py_ssize_t, table=list, ntok=Py_ssize_t, pages=Py_ssize_t, pool=RadixPool,
                   kept=list, last_kept=bint, shared=Py_ssize_t, bs=Py_ssize_t, n=Py_ssize_t)
    cpdef free(self, seq)
