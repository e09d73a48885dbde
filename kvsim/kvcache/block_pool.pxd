# C types for block_pool.py when Cython compiles it (docs/speed.md): BlockPool is an extension type (its
# caching subclasses, Python classes, add slots and override the hooks: the hooks and the methods the
# managers call are cpdef, dispatched to an override), its counts C integers; block ids, refcounts and
# positions are C integers in the per-block loop (the lists keep Python ints; a block id handed out stays the
# Python int the free list held).
import cython
from cpython.list cimport PyList_GET_ITEM, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject

cdef bint _COMPILED


cdef inline void _put(list items, Py_ssize_t i, object v) noexcept:
    """items[i] = v without the checks (i a valid index of items): the per-block stores of the compiled loops
    (block_pool.py, hash_pool.py call it only where _COMPILED; as Python, the item assignment)."""
    cdef PyObject* old = PyList_GET_ITEM(items, i)
    Py_INCREF(v)
    PyList_SET_ITEM(items, i, v)
    Py_XDECREF(old)

cdef class BlockPool:
    cdef public Py_ssize_t num_blocks, block_size, shared, known, free_count
    cdef public list rc, _free

    @cython.locals(lo=Py_ssize_t, hi=Py_ssize_t)
    cpdef _more(self, Py_ssize_t k)

    cpdef _extend(self, Py_ssize_t k)

    cpdef _evict(self, Py_ssize_t k)

    cpdef _put_free(self, list ids)

    cpdef Py_ssize_t free_now(self) except -1

    cpdef evict(self, Py_ssize_t k)

    @cython.locals(free=list)
    cpdef take(self)

    @cython.locals(free=list, got=list)
    cpdef take_evicting(self)

    @cython.locals(free=list, n=Py_ssize_t, ids=list, _j=Py_ssize_t)
    cpdef take_free(self, Py_ssize_t k)

    @cython.locals(n=Py_ssize_t, ids=list)
    cpdef take_each(self, Py_ssize_t k)

    @cython.locals(free=list, out=list, got=list)
    cpdef _evict_taken(self, Py_ssize_t m)

    @cython.locals(free=list)
    cpdef allocate(self)

    @cython.locals(free=list, short=Py_ssize_t, got=list, ids=list)
    cpdef allocate_many(self, Py_ssize_t k)

    @cython.locals(kept=list, zeroed=list)
    cpdef drop_refs(self, list ids)

    @cython.locals(kept=list, zeroed=list)
    cpdef release(self, list ids)

    cpdef incref(self, bid)

    cpdef decref(self, bid)


@cython.locals(n=Py_ssize_t, zeroed=list, start=Py_ssize_t, i=Py_ssize_t, b=Py_ssize_t, r=Py_ssize_t)
cpdef list drop(list rc, list ids, list kept)
