# C types for recorder.py when Cython compiles it (docs/speed.md): the per-row path reads a table's state
# from C fields (row counts are C integers) instead of slot descriptors.
import cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.string cimport memcpy


cdef class _Columns:
    cdef public tuple names, floats, ints
    cdef public bytes codes
    cdef public dict row_kinds, store
    cdef public bytearray pending
    cdef public Py_ssize_t npending, limit, rows
    cdef public object pack, row_dtype, values_of, sealed
    cdef public list groups


cdef bint _COMPILED


cdef inline bint _pack_row(_Columns cols, tuple values) except -1:
    """append_values' row, compiled: each value written as the C int64 / double `cols.pack` would pack
    (native order, the '=' layout), straight into its place in `cols.pending`, when every value of an int
    column is an int in int64's range and every value of a float column a float (exact types), and the
    buffer has room; False, nothing written, otherwise (struct's path then packs it, or raises its
    error)."""
    cdef long long row[32]
    cdef Py_ssize_t n = len(values), i, at
    cdef double d
    cdef int overflow = 0
    cdef bytes codes = cols.codes
    cdef const char* c
    cdef char* p
    cdef bytearray pending
    if codes is None or n > 32 or len(codes) != n:
        return False
    c = codes
    for i in range(n):
        v = values[i]
        if c[i] == 100:  # 'd'
            if type(v) is not float:
                return False
            d = PyFloat_AS_DOUBLE(v)
            memcpy(&row[i], &d, 8)
        else:  # 'q'
            if type(v) is not int:
                return False
            row[i] = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow:
                return False
    pending = cols.pending
    at = cols.npending * 8 * n
    if PyByteArray_GET_SIZE(pending) < at + 8 * n:
        return False
    p = PyByteArray_AS_STRING(pending)
    memcpy(p + at, row, 8 * n)
    return True


cdef class Recorder:
    cdef public _Columns _timeline, _requests


@cython.locals(row=bytes)
cpdef append_values(_Columns cols, object values, tuple extra)
