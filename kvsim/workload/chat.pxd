# C types for chat.py when Cython compiles it (docs/speed.md): _ChatSegments is an extension type whose
# per-row columns (int64) are read through typed memoryviews and whose content ids are summed as C integers
# (they fit: TURN_ID_BASE is 2**41), one Python int made per value of a segment.
cimport cython


cdef class _ChatSegments:
    cdef public object sys_of_session, sys_len, session, k, user_len, out_len, turn_no
    cdef public dict _kept
    cdef public Py_ssize_t _rows
    cdef const long long[:] _ks, _turns, _outs, _users

    @cython.locals(ks="const long long[:]", turn_no="const long long[:]", base=cython.longlong,
                   k=cython.longlong)
    cpdef tuple row(self, Py_ssize_t i)

    cpdef tuple _list(self, Py_ssize_t i, Py_ssize_t k)
