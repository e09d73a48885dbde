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


cdef inline bint _pack_timeline(_Columns cols, long long replica, long long iteration, double t_s, double dt_s,
                                long long running_reqs, long long num_seqs, long long prefill_seqs,
                                long long prefill_tokens, long long decode_seqs, long long waiting,
                                long long swapped, long long kv_used_blocks, long long kv_token_states,
                                long long kv_cached_blocks, long long preempted, long long cow_copies,
                                long long kv_reservation, long long kv_internal_frag,
                                long long kv_external_frag, long long kv_free,
                                long long kv_unshared_blocks) except -1:
    """append_timeline's row, compiled: its C values written as `cols.pack` would pack them (native order:
    'qqdd' then 17 'q', TIMELINE_COLUMNS) into their place in `cols.pending`, when `cols` has exactly those
    codes, no registered group and room; False, nothing written, otherwise."""
    cdef long long row[21]
    cdef Py_ssize_t i, at
    cdef bytes codes = cols.codes
    cdef const char* c
    cdef bytearray pending
    if codes is None or len(codes) != 21 or cols.groups:
        return False
    c = codes
    for i in range(21):
        if c[i] != (100 if i == 2 or i == 3 else 113):  # 'd' for t_s and dt_s, 'q' for the rest
            return False
    pending = cols.pending
    at = cols.npending * 168
    if PyByteArray_GET_SIZE(pending) < at + 168:
        return False
    row[0] = replica
    row[1] = iteration
    memcpy(&row[2], &t_s, 8)
    memcpy(&row[3], &dt_s, 8)
    row[4] = running_reqs
    row[5] = num_seqs
    row[6] = prefill_seqs
    row[7] = prefill_tokens
    row[8] = decode_seqs
    row[9] = waiting
    row[10] = swapped
    row[11] = kv_used_blocks
    row[12] = kv_token_states
    row[13] = kv_cached_blocks
    row[14] = preempted
    row[15] = cow_copies
    row[16] = kv_reservation
    row[17] = kv_internal_frag
    row[18] = kv_external_frag
    row[19] = kv_free
    row[20] = kv_unshared_blocks
    memcpy(PyByteArray_AS_STRING(pending) + at, row, 168)
    return True


cdef class Recorder:
    cdef public _Columns _timeline, _requests


@cython.locals(row=bytes)
cpdef append_values(_Columns cols, object values, tuple extra)

cpdef append_timeline(_Columns cols, long long replica, long long iteration, double t_s, double dt_s,
                      long long running_reqs, long long num_seqs, long long prefill_seqs, long long prefill_tokens,
                      long long decode_seqs, long long waiting, long long swapped, long long kv_used_blocks,
                      long long kv_token_states, long long kv_cached_blocks, long long preempted,
                      long long cow_copies, long long kv_reservation, long long kv_internal_frag,
                      long long kv_external_frag, long long kv_free, long long kv_unshared_blocks)
