# C types for hash_pool.py when Cython compiles it (docs/speed.md): block ids and positions are C integers
# where they only index lists; a block id the loop stores is read as a Python int and copied to a C index
# (a C int stored would make a new Python int per store); keys and clock values stay Python ints. The C
# inlines below do the per-block work of the loops (hash_pool.py calls them only where _COMPILED): _at / _index
# read a list item / an int as a C index, _store stores without the checks, _put_count stores a refcount from
# _COUNTS (no int made), _differ is match's key check (two exact ints compared by their digits).
import cython
from cpython.list cimport PyList_GET_ITEM, PyList_SET_ITEM
from cpython.object cimport Py_NE, PyObject_RichCompareBool
from cpython.ref cimport Py_INCREF, PyObject

from kvsim.kvcache.block_pool cimport BlockPool
from kvsim.kvcache.block_queue cimport BlockQueue

cdef bint _COMPILED
cdef list _DEPTHS
cdef list _COUNTS


cdef extern from *:
    """
    /* 1 if a and b are exact ints of equal value, 0 if exact ints of different values, -1 if either is not an
       exact int (or the digits are not readable here): hash_pool's key compare, without the generic
       rich compare for two equal keys made separately. */
    #if !defined(PYPY_VERSION) && !defined(Py_LIMITED_API) && PY_VERSION_HEX < 0x030B0000
    #include "longintrepr.h"
    #endif
    static CYTHON_INLINE int __kvsim_int_eq(PyObject *a, PyObject *b) {
    #if defined(PYPY_VERSION) || defined(Py_LIMITED_API)
        (void) a; (void) b;
        return -1;
    #else
        if (!PyLong_CheckExact(a) || !PyLong_CheckExact(b)) return -1;
        #if PY_VERSION_HEX >= 0x030C0000
        uintptr_t tag = ((PyLongObject *) a)->long_value.lv_tag;  /* sign, digit count (and a flag: bit 2) */
        if ((tag ^ ((PyLongObject *) b)->long_value.lv_tag) & ~(uintptr_t) 4) return 0;
        Py_ssize_t n = (Py_ssize_t) (tag >> 3);
        const digit *x = ((PyLongObject *) a)->long_value.ob_digit, *y = ((PyLongObject *) b)->long_value.ob_digit;
        #else
        Py_ssize_t n = Py_SIZE(a);  /* sign times digit count */
        if (n != Py_SIZE(b)) return 0;
        if (n < 0) n = -n;
        const digit *x = ((PyLongObject *) a)->ob_digit, *y = ((PyLongObject *) b)->ob_digit;
        #endif
        for (Py_ssize_t i = 0; i < n; i++) if (x[i] != y[i]) return 0;
        return 1;
    #endif
    }

    /* The value of int o as a C index where o is an exact int of at most one digit (a block id, refcount or
       depth), else as Cython's index conversion would (__index__, OverflowError): the per-block reads. */
    static CYTHON_INLINE Py_ssize_t __kvsim_index(PyObject *o) {
    #if !defined(PYPY_VERSION) && !defined(Py_LIMITED_API)
        if (PyLong_CheckExact(o)) {
        #if PY_VERSION_HEX >= 0x030C0000
            uintptr_t tag = ((PyLongObject *) o)->long_value.lv_tag;
            if (tag < (2 << 3))  /* compact: sign in bits 0-1 (0 +, 1 zero, 2 -) */
                return (1 - (Py_ssize_t) (tag & 3)) * (Py_ssize_t) ((PyLongObject *) o)->long_value.ob_digit[0];
        #else
            Py_ssize_t size = Py_SIZE(o);
            if (size == 1) return (Py_ssize_t) ((PyLongObject *) o)->ob_digit[0];
            if (size == 0) return 0;
        #endif
        }
    #endif
        return PyNumber_AsSsize_t(o, PyExc_OverflowError);
    }

    static CYTHON_INLINE Py_ssize_t __kvsim_at(PyObject *items, Py_ssize_t i) {
        return __kvsim_index(PyList_GET_ITEM(items, i));
    }
    """
    int _int_eq "__kvsim_int_eq"(PyObject* a, PyObject* b) noexcept
    Py_ssize_t _index "__kvsim_index"(object o) except? -1
    Py_ssize_t _index_p "__kvsim_index"(PyObject* o) except? -1
    Py_ssize_t _at "__kvsim_at"(list items, Py_ssize_t i) except? -1


cdef inline bint _differ(list key_of, Py_ssize_t b, list keys, Py_ssize_t j) except -1:
    """`key_of[b] != keys[j]` unless they are the same object (match's hint check), borrowed: two exact ints
    compared by their digits, anything else by Python's !=."""
    cdef PyObject* kb = PyList_GET_ITEM(key_of, b)
    cdef PyObject* k = PyList_GET_ITEM(keys, j)
    if kb == k:
        return False
    cdef int eq = _int_eq(kb, k)
    if eq >= 0:
        return not eq
    return PyObject_RichCompareBool(<object>kb, <object>k, Py_NE)


cdef extern from "Python.h":
    PyObject* _item "PyList_GET_ITEM"(PyObject* items, Py_ssize_t i)
    void _incref "Py_INCREF"(PyObject* o)
    void _decref "Py_DECREF"(PyObject* o)
    PyObject* _setdefault "PyDict_SetDefault"(PyObject* d, PyObject* key, PyObject* default) except NULL
    int _delitem "PyDict_DelItem"(PyObject* d, PyObject* key) except -1


cdef inline void _store(list items, Py_ssize_t i, object v) noexcept:
    """items[i] = v as _put does (i a valid index of the full list: the old item is never NULL)."""
    cdef PyObject* old = PyList_GET_ITEM(items, i)
    Py_INCREF(v)
    PyList_SET_ITEM(items, i, v)
    _decref(old)


cdef inline int _put_count(list items, Py_ssize_t i, Py_ssize_t r) except -1:
    """items[i] = r (r >= 0, i a valid index) as _store does, the int taken from _COUNTS (made once) while r
    is small: a refcount store without an int made per store."""
    cdef PyObject* old
    cdef PyObject* v
    if r < 256:
        v = _item(<PyObject*>_COUNTS, r)
        old = PyList_GET_ITEM(items, i)
        _incref(v)
        PyList_SET_ITEM(items, i, <object>v)
        _decref(old)
    else:
        _store(items, i, r)
    return 0

cdef list _depths(Py_ssize_t n)


cdef class HashCachePool(BlockPool):
    cdef public list key_of, last, uses, birth, depth, filed
    cdef public dict by_key
    cdef public object queue, spill, clock
    cdef public Py_ssize_t evictions
    cdef public bint runs, revives, counts_uses, counts_birth

    cpdef _extend(self, Py_ssize_t k)

    cpdef Py_ssize_t free_now(self) except -1

    @cython.locals(queue=BlockQueue)
    cpdef _evict(self, Py_ssize_t k)

    cpdef _forget(self, list ids)

    @cython.locals(queue=BlockQueue)
    cpdef _evict_taken(self, Py_ssize_t m)

    @cython.locals(kept=list, zeroed=list, free=list, cached=list, ascending=bint, queue=BlockQueue)
    cpdef release(self, list ids, bint touch=*)

    @cython.locals(shared=Py_ssize_t)
    cpdef Py_ssize_t hold(self, list table) except? -1

@cython.locals(table=list, got=list, j=Py_ssize_t, h=Py_ssize_t, n=Py_ssize_t, hb=Py_ssize_t)
cpdef list match(dict by_key, list key_of, list keys, Py_ssize_t m, list hint)

@cython.locals(key_of=list, rc=list, by_key=dict, table=list, shared=Py_ssize_t, j=Py_ssize_t, h=Py_ssize_t,
               n=Py_ssize_t, hb=Py_ssize_t, r=Py_ssize_t, i=Py_ssize_t, queue=BlockQueue)
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

@cython.locals(b=Py_ssize_t, j=Py_ssize_t)
cpdef forget(dict by_key, list key_of, list rc, list ids, list spill)

@cython.locals(by_key=dict, key_of=list, last=list, depth=list, depths=list, birth=list, uses=list, j=Py_ssize_t,
               i=Py_ssize_t)
cpdef register(HashCachePool pool, list keys, list table, Py_ssize_t lo, Py_ssize_t hi)


cdef inline int _register_run(dict by_key, list key_of, list last, list depth, list birth, list uses, list keys,
                              list table, Py_ssize_t lo, Py_ssize_t hi, object now, list depths) except -1:
    """register's loop (hash_pool.py), keys and block ids read borrowed (birth, uses: None where not kept)."""
    cdef Py_ssize_t j, i
    cdef PyObject* k
    cdef PyObject* b
    for j in range(lo, hi):
        k = _item(<PyObject*>keys, j)
        b = _item(<PyObject*>table, j)
        i = _index_p(b)
        if _item(<PyObject*>key_of, i) != <PyObject*>None:
            continue
        if _setdefault(<PyObject*>by_key, k, b) != b:  # (its key is cached already: it stays private)
            continue
        _store(key_of, i, <object>k)
        _store(last, i, now)
        if j < 256:
            _put_count(depth, i, j)
        else:
            _store(depth, i, <object>_item(<PyObject*>depths, j))
        if birth is not None:
            birth[i] = now
        if uses is not None:
            uses[i] = 1
    return 0


cdef inline int _forget_run(dict by_key, list key_of, list rc, list ids, list spill) except -1:
    """forget's loop (hash_pool.py), the keys read borrowed (key_of holds each until it is dropped)."""
    cdef Py_ssize_t j, b
    cdef PyObject* k
    for j in range(len(ids)):
        b = _index_p(_item(<PyObject*>ids, j))
        k = _item(<PyObject*>key_of, b)
        if spill is not None:
            spill.append(<object>k)
        _delitem(<PyObject*>by_key, k)
        _store(key_of, b, None)
        _store(rc, b, 1)
    return 0
