# C types for hash_pool.py when Cython compiles it (docs/speed.md): block ids and positions are C integers
# where they only index lists; a block id the loop stores is read as a Python int and copied to a C index
# (a C int stored would make a new Python int per store); keys and clock values stay Python ints.
import cython

from kvsim.kvcache.block_pool cimport BlockPool, _put

cdef bint _COMPILED
cdef list _DEPTHS

cdef list _depths(Py_ssize_t n)


cdef class HashCachePool(BlockPool):
    cdef public list key_of, last, uses, birth, depth, filed
    cdef public dict by_key
    cdef public object queue, spill, clock
    cdef public Py_ssize_t evictions
    cdef public bint runs, revives, counts_uses, counts_birth

    cpdef _extend(self, Py_ssize_t k)

    cpdef _evict(self, Py_ssize_t k)

    cpdef _forget(self, list ids)

    cpdef _evict_taken(self, Py_ssize_t m)

    @cython.locals(kept=list, zeroed=list, free=list, cached=list, ascending=bint)
    cpdef release(self, list ids, bint touch=*)

    @cython.locals(shared=Py_ssize_t)
    cpdef Py_ssize_t hold(self, list table) except? -1

@cython.locals(table=list, got=list, j=Py_ssize_t, h=Py_ssize_t, n=Py_ssize_t, hb=Py_ssize_t)
cpdef list match(dict by_key, list key_of, list keys, Py_ssize_t m, list hint)

@cython.locals(key_of=list, rc=list, by_key=dict, table=list, shared=Py_ssize_t, j=Py_ssize_t, h=Py_ssize_t,
               n=Py_ssize_t, hb=Py_ssize_t, r=Py_ssize_t, i=Py_ssize_t)
cpdef tuple match_hold(HashCachePool pool, list keys, Py_ssize_t m, list hint)

@cython.locals(free=list, cached=list)
cpdef tuple settle(list key_of, list rc, list filed, list last, list zeroed, object now)

@cython.locals(prev=Py_ssize_t, d=Py_ssize_t, ascending=bint, cut=Py_ssize_t, mixed=bint, j=Py_ssize_t,
               b=Py_ssize_t)
cpdef tuple settle_run(list key_of, list rc, list filed, list last, list depth, list zeroed, object now)

@cython.locals(rc=list, key_of=list, filed=list, last=list, depth=list, shared=Py_ssize_t, n=Py_ssize_t,
               j=Py_ssize_t, b=Py_ssize_t, r=Py_ssize_t, lo=Py_ssize_t, prev=Py_ssize_t, ascending=bint,
               cut=Py_ssize_t, mixed=bint, d=Py_ssize_t, kept=list, free=list, cached=list, rest=list)
cpdef tuple settle_drop(HashCachePool pool, list ids, object now)

@cython.locals(shared=Py_ssize_t, b=Py_ssize_t, r=Py_ssize_t)
cpdef Py_ssize_t hold(list rc, list table, object discard) except? -1

@cython.locals(b=Py_ssize_t)
cpdef forget(dict by_key, list key_of, list rc, list ids, list spill)

@cython.locals(by_key=dict, key_of=list, last=list, depth=list, depths=list, birth=list, uses=list, j=Py_ssize_t,
               i=Py_ssize_t)
cpdef register(HashCachePool pool, list keys, list table, Py_ssize_t lo, Py_ssize_t hi)
