# C types for recorder.py when Cython compiles it (docs/speed.md): the per-row path reads a table's state
# from C fields (row counts are C integers) instead of slot descriptors.
import cython


cdef class _Columns:
    cdef public tuple names, floats, ints
    cdef public dict row_kinds, store
    cdef public bytearray pending
    cdef public Py_ssize_t npending, limit, rows
    cdef public object pack, row_dtype, values_of, sealed
    cdef public list groups


cdef class Recorder:
    cdef public _Columns _timeline, _requests


@cython.locals(row=bytes)
cpdef append_values(_Columns cols, object values, tuple extra)
