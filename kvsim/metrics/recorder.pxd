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
    cdef public bytes xcodes, xsizes
    cdef public object xdtype
    cdef public bytearray xpending
    cdef public Py_ssize_t nx


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


cdef inline bint _pack_extra(_Columns cols, tuple extra) except -1:
    """append_values' group values, compiled: when every registered group is given a tuple of its columns'
    values, an int column's (int64 storage) each an int in int64's range and a float64-held column's each
    a float, or an int whose double is exact (what the array's append would store), they are written as C
    values into their place in `cols.xpending` (`cols.nx` counts them) and True is returned; False,
    nothing written, otherwise (append_extra's path then appends them, or raises its error)."""
    cdef long long row[64]
    cdef Py_ssize_t ng, g, j, k = 0, m, at, total
    cdef long long x
    cdef double d
    cdef int overflow = 0
    cdef bytes codes = cols.xcodes
    cdef bytes sizes = cols.xsizes
    cdef const char* c
    cdef const unsigned char* sz
    cdef char* p
    cdef bytearray pending
    cdef tuple vals
    if codes is None or extra is None:
        return False
    ng = len(sizes)
    if len(extra) != ng:
        return False
    total = len(codes)
    c = codes
    sz = <const unsigned char*>(<const char*>sizes)
    for g in range(ng):
        v = extra[g]
        if type(v) is not tuple:
            return False
        vals = <tuple>v
        m = sz[g]
        if len(vals) != m or k + m > total:
            return False
        for j in range(m):
            v = vals[j]
            if c[k] == 100:  # 'd'
                if type(v) is float:
                    d = PyFloat_AS_DOUBLE(v)
                elif type(v) is int:
                    x = PyLong_AsLongLongAndOverflow(v, &overflow)
                    if overflow or x > 9007199254740992 or x < -9007199254740992:
                        return False
                    d = <double>x
                else:
                    return False
                memcpy(&row[k], &d, 8)
            else:  # 'q'
                if type(v) is not int:
                    return False
                row[k] = PyLong_AsLongLongAndOverflow(v, &overflow)
                if overflow:
                    return False
            k += 1
    if k != total:
        return False
    pending = cols.xpending
    at = cols.nx * 8 * total
    if PyByteArray_GET_SIZE(pending) < at + 8 * total:
        return False
    p = PyByteArray_AS_STRING(pending)
    memcpy(p + at, row, 8 * total)
    cols.nx += 1
    return True


cdef class Recorder:
    cdef public _Columns _timeline, _requests


@cython.locals(row=bytes)
cpdef append_values(_Columns cols, object values, tuple extra)
