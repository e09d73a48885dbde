# C types for prefix_hash.py when Cython compiles it (docs/speed.md): the hash manager and its per-sequence
# state are extension types (PrefixHashKVManager extends PagedKVManager: its overrides of the cpdef hooks
# are C calls from the engine), the pool typed as the HashCachePool it is; counts C integers.
import cython

from kvsim.kvcache.paged cimport PagedKVManager
from kvsim.kvcache.hash_pool cimport HashCachePool as _Pool, match, match_hold, register
from kvsim.kvcache.hashing cimport BlockContent as _Content, ContentMemo as _Memo, cached_upto


cdef class _SeqCache:
    cdef public _Content content
    cdef public Py_ssize_t prompt, done, hits, computed
    cdef public bint pending
    cdef public object rid, tier_hits


cdef dict _GPU_HITS


cpdef _gpu_hit(Py_ssize_t tokens)


cdef class PrefixHashKVManager(PagedKVManager):
    cdef public dict seqcache
    cdef public object namespace
    cdef public _Memo _memo
    cdef public bint _through
    cdef public Py_ssize_t _cpu_blocks

    @cython.locals(pool=_Pool)
    cdef Py_ssize_t _cached(self) except -1

    @cython.locals(pool=_Pool)
    cdef Py_ssize_t _used(self) except? -1

    @cython.locals(pool=_Pool, content=_Content, limit=Py_ssize_t, m=Py_ssize_t, keys=list)
    cpdef tuple _peek_gpu(self, req, Py_ssize_t prompt_tokens)

    @cython.locals(bs=Py_ssize_t, content=_Content, limit=Py_ssize_t, keys=list, pool=_Pool,
                   m=Py_ssize_t, table=list, shared=Py_ssize_t, st=_SeqCache)
    cpdef admit(self, seq, req, prompt_tokens, output_tokens)

    cpdef allocate(self, seq, Py_ssize_t num_tokens)

    cpdef reserve(self, seq, num_tokens)

    @cython.locals(st=_SeqCache, pool=_Pool, uses=list, end=Py_ssize_t, upto=Py_ssize_t)
    cpdef bint _allocate(self, seq, Py_ssize_t num_tokens, bint register) except -1

    @cython.locals(pool=_Pool, spill=list)
    cpdef _spill(self)

    @cython.locals(keys=list, c=Py_ssize_t, lo=Py_ssize_t, hi=Py_ssize_t)
    cpdef _register(self, seq, _SeqCache st, Py_ssize_t upto)

    @cython.locals(pool=_Pool)
    cpdef _take_evicting(self)

    @cython.locals(pool=_Pool)
    cpdef _take_each(self, Py_ssize_t k)

    @cython.locals(pool=_Pool, st=_SeqCache, touch=bint, upto=Py_ssize_t, table=list, ntok=Py_ssize_t, kept=list,
                   bs=Py_ssize_t)
    cpdef free(self, seq)
